package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PgBouncerPath returns the pgbouncer binary (on PATH or Debian's
// /usr/sbin/pgbouncer), or skips the test without it; under CI=true it
// fails the test instead, so that CI never passes by skipping the pooler
// tests.
func PgBouncerPath(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer"
	}
	const msg = "no pgbouncer: install it (apt-get install -y pgbouncer) to run the connection pooler tests"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: not skipping)")
	}
	t.Skip(msg)
	return ""
}

// PgBouncer starts a PgBouncer of its own in front of the test database,
// with pool_mode mode ("transaction" or "session"), on a free loopback
// port, and returns the URL of the test database through it. It is stopped
// when the test ends; its log is shown if the test failed. Root cannot run
// PgBouncer: as root it runs as nobody.
func PgBouncer(t testing.TB, mode string) string {
	t.Helper()
	bin := PgBouncerPath(t)
	direct, err := url.Parse(URL(t))
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", EnvURL, err)
	}
	host, port := direct.Hostname(), direct.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "5432"
	}
	db := strings.TrimPrefix(direct.Path, "/")
	user := direct.User.Username()
	if user == "" {
		user = "postgres"
	}
	dir, err := os.MkdirTemp("", "durable-pgbouncer-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Readable by nobody, whom PgBouncer becomes when started as root.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	users := filepath.Join(dir, "users.txt")
	if err := os.WriteFile(users, []byte(strconv.Quote(user)+` ""`+"\n"), 0o644); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	for attempt := 1; ; attempt++ {
		listen := freePort(t)
		ini := filepath.Join(dir, "pgbouncer.ini")
		conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
max_client_conn = 1000
default_pool_size = %d
ignore_startup_parameters = extra_float_digits
`, host, port, listen, users, mode, poolSize(mode))
		if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		args := []string{ini}
		if os.Geteuid() == 0 {
			args = []string{"-u", "nobody", ini}
		}
		var out SyncBuffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("pgtest: start pgbouncer: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		pooled := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", url.User(user).String(), listen, db)
		err := waitConnect(pooled, exited)
		if err == nil {
			t.Cleanup(func() {
				_ = cmd.Process.Signal(syscall.SIGTERM) // the process this test started, by its pid
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					_ = cmd.Process.Kill()
					<-exited
				}
				if t.Failed() {
					t.Logf("pgbouncer (%s mode) log:\n%s", mode, out.String())
				}
			})
			return pooled
		}
		_ = cmd.Process.Kill()
		<-exited
		if attempt == 3 || !strings.Contains(out.String(), "in use") {
			t.Fatalf("pgtest: pgbouncer did not start: %v\n%s", err, out.String())
		}
	}
}

// poolSize is the server connections of a PgBouncer in mode: in
// transaction mode few, so that the clients' transactions move between
// them (and the tests leave the server's connections to the others); in
// session mode each client connection holds one for its lifetime.
func poolSize(mode string) int {
	if mode == "transaction" {
		return 8
	}
	return 24
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitConnect waits until a query through url answers, for up to 30
// seconds, or until the process exits.
func waitConnect(url string, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			_, err = conn.Exec(ctx, "SELECT 1", pgx.QueryExecModeSimpleProtocol)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("pgbouncer exited (last error: %w)", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}

// SyncBuffer is a bytes.Buffer safe for writers in several goroutines (a
// process's output, a logger's) and a reader.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
