// Package clitest holds what the tests of the command lines (durablecli,
// cmd/durable and the examples) share: a PostgreSQL schema per test with
// the flags that point a command at it, a long-running process and its
// output read line by line, and building a program. Like every package under internal/, it
// does not import the root package: each test package starts the engines
// it needs on the schema, with its own workflows.
package clitest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
)

// PG is a per-test PostgreSQL schema and the flags that point a command
// at it.
type PG struct {
	URL    string
	Schema string
	Store  *pgstore.Store
}

// NewPG returns a fresh schema, migrated unless migrate is false (then it
// does not exist yet, and is dropped at the end if the test created it).
// It skips the test without a test database (fails under CI=true).
func NewPG(t *testing.T, migrate bool) *PG {
	t.Helper()
	url := pgtest.URL(t)
	pool := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, pool)
	if migrate {
		schema = pgtest.Schema(t, pool)
	}
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	return &PG{URL: url, Schema: schema, Store: s}
}

// Flags returns args followed by --database-url and --schema.
func (p *PG) Flags(args ...string) []string {
	return append(args, "--database-url", p.URL, "--schema", p.Schema)
}

// QuietLogger discards what it is given.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// ParseIDs parses the first n lines of out as run IDs.
func ParseIDs(t *testing.T, out string, n int) []uuid.UUID {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), n, "output:\n%s", out)
	ids := make([]uuid.UUID, n)
	for i := range n {
		id, err := uuid.Parse(lines[i])
		require.NoError(t, err, "line %d of:\n%s", i+1, out)
		ids[i] = id
	}
	return ids
}

// Build builds the main package pkg (a path relative to dir, such as ".")
// into a temporary directory and returns the binary's path; it skips the
// test without a go toolchain.
func Build(t *testing.T, dir, pkg, name string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build " + pkg)
	}
	exe := filepath.Join(t.TempDir(), name)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", exe, pkg)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s:\n%s", pkg, out)
	return exe
}

// Lines collects what a process writes, line by line, for WaitFor.
type Lines struct {
	mu     sync.Mutex
	text   strings.Builder
	notify chan struct{} // closed and replaced at every new line
}

// NewLines reads r until it ends.
func NewLines(r io.Reader) *Lines {
	l := &Lines{notify: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.text.WriteString(sc.Text() + "\n")
			close(l.notify)
			l.notify = make(chan struct{})
			l.mu.Unlock()
		}
	}()
	return l
}

// String returns the lines read so far.
func (l *Lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// WaitFor waits until the output contains want.
func (l *Lines) WaitFor(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		found, next := strings.Contains(l.text.String(), want), l.notify
		l.mu.Unlock()
		if found {
			return
		}
		select {
		case <-next:
		case <-deadline:
			t.Fatalf("no %q in %s; output:\n%s", want, timeout, l.String())
		}
	}
}

// Proc is a long-running command started by Start: what it writes to
// stderr is read line by line into Log.
type Proc struct {
	Cmd    *exec.Cmd
	Log    *Lines
	Exited chan struct{} // closed when it has exited
	Err    error         // then how (cmd.Wait's error)
}

// Start starts cmd with its stderr read into Log, and kills it if it still
// runs when the test ends. Its stderr goes through a pipe, so that Exited
// is closed only after the last line was read.
func Start(t *testing.T, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Exited: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	require.NoError(t, cmd.Start())
	p.Log = NewLines(pr)
	go func() {
		p.Err = cmd.Wait()
		pw.Close()
		close(p.Exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.Exited:
		default:
			_ = cmd.Process.Kill()
			<-p.Exited
		}
	})
	return p
}

// Stop sends sig and returns the exit status (see Wait).
func (p *Proc) Stop(t *testing.T, sig os.Signal, timeout time.Duration) int {
	t.Helper()
	require.NoError(t, p.Cmd.Process.Signal(sig))
	return p.Wait(t, timeout)
}

// Wait returns the exit status once the process has exited, failing the
// test if it has not within timeout. A process ended by a signal it did
// not handle has status -1.
func (p *Proc) Wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.Exited:
	case <-time.After(timeout):
		t.Fatalf("no exit within %s; output:\n%s", timeout, p.Log.String())
	}
	if p.Err == nil {
		return 0
	}
	var exit *exec.ExitError
	require.True(t, errors.As(p.Err, &exit), "%v", p.Err)
	return exit.ExitCode()
}
