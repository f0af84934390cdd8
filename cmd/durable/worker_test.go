package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/pgtest"
	"github.com/effectivelabs/durable/internal/workloads"
)

// buildDurable builds this command into a temporary directory and returns
// the binary's path; it skips the test without a go toolchain.
func buildDurable(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the durable binary")
	}
	exe := filepath.Join(t.TempDir(), "durable")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", exe, ".").CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	return exe
}

// lines collects what a process writes, line by line, for waitFor.
type lines struct {
	mu     sync.Mutex
	text   strings.Builder
	notify chan struct{} // closed and replaced at every new line
}

func newLines(r io.Reader) *lines {
	l := &lines{notify: make(chan struct{})}
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

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// waitFor waits until the output contains want.
func (l *lines) waitFor(t *testing.T, want string, timeout time.Duration) {
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

// TestWorkerSecondSignal: a worker draining a step that cannot finish exits
// at once on a second signal. The step is a chaos step blocked in its
// execution recorder, whose insert waits for a table lock the test holds.
func TestWorkerSecondSignal(t *testing.T) {
	t.Parallel()
	p := newPGEnv(t, true)
	exe := buildDurable(t)

	out, err := exec.Command(exe, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "durable ")

	cmd := exec.Command(exe, p.flags("worker", "--record-executions", "--drain-timeout", "5m", "--worker-id", "second-signal")...)
	// Through an io.Pipe, Wait returns only after all output was read.
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	require.NoError(t, cmd.Start())
	exited := make(chan struct{}) // closed when the worker has exited
	var exitErr error             // then its exit status
	go func() {
		exitErr = cmd.Wait()
		pw.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	log := newLines(pr)
	log.waitFor(t, "durable worker: serving", 30*time.Second)

	// Block every chaos step in its recorder: the worker created the table
	// before serving.
	pool := pgtest.Pool(t)
	tx, err := pool.Begin(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) }) // before the schema is dropped
	_, err = tx.Exec(context.Background(), "LOCK TABLE "+pgx.Identifier{p.schema, "chaos_executions"}.Sanitize()+" IN EXCLUSIVE MODE")
	require.NoError(t, err)
	_, err = workloads.New(workloads.Options{}).Chaos.RunNoWait(context.Background(), p.client(t), "t", workloads.ChaosInput{N: 1})
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO ' || $1 || '%'`,
			pgx.Identifier{p.schema, "chaos_executions"}.Sanitize()).Scan(&waiting))
		if waiting > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no step blocked in its recorder; worker output:\n%s", log.String())
		time.Sleep(20 * time.Millisecond) // polling another process's progress
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	log.waitFor(t, "durable worker: draining", 10*time.Second)
	select {
	case <-exited:
		t.Fatalf("the worker exited while its step could not finish: %v\n%s", exitErr, log.String())
	default:
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the worker did not exit within 10s of the second signal; output:\n%s", log.String())
	}
	var status *exec.ExitError
	require.True(t, errors.As(exitErr, &status), "%v", exitErr)
	require.Equal(t, exitSecondSignal, status.ExitCode(), log.String())
	log.waitFor(t, "second signal during the drain; exiting at once", 5*time.Second)
}

// TestWorkerNoMigrate: with --no-migrate the worker serves a migrated schema
// and refuses, saying how to fix it, one that is missing (which it does not
// create).
func TestWorkerNoMigrate(t *testing.T) {
	t.Parallel()
	missing := newPGEnv(t, false)
	code, out, errOut := runCLI(t, missing.flags("worker", "--no-migrate")...)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	for _, want := range []string{
		"durable worker: cannot start: durable: store not ready: pgstore: schema " + missing.schema + " does not exist",
		"run `durable migrate up` (or pgstore.Migrate)",
	} {
		require.Contains(t, errOut, want)
	}
	var exists bool
	require.NoError(t, pgtest.Pool(t).QueryRow(context.Background(), `SELECT to_regnamespace($1) IS NOT NULL`, missing.schema).Scan(&exists))
	require.False(t, exists, "--no-migrate created the schema")

	p := newPGEnv(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	log := newLines(pr)
	done := make(chan int, 1)
	go func() {
		var stdout strings.Builder
		done <- run(ctx, p.flags("worker", "--no-migrate", "--worker-id", "no-migrate"), &stdout, pw)
		pw.Close()
	}()
	log.waitFor(t, "durable worker: serving", 30*time.Second)
	cancel()
	require.Equal(t, 0, <-done, log.String())
	log.waitFor(t, "durable worker: draining", time.Second)
}

func TestWorkerRetentionFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, durable.DefaultRetention},
		{[]string{"--retention", "168h"}, 7 * 24 * time.Hour},
		{[]string{"--retention", "30m"}, 30 * time.Minute},
		{[]string{"--retention", "0"}, durable.KeepForever},
	} {
		var o workerOptions
		fs := newWorkerFlags(&o)
		require.NoError(t, fs.Parse(tc.args))
		require.Equal(t, tc.want, o.config(nil).Retention, "%v", tc.args)
	}

	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	code, out, errOut := runCLI(t, append([]string{"worker", "--retention", "-1h"}, db...)...)
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Equal(t, "durable worker: --retention must not be negative (0 keeps every run), got -1h0m0s\n", errOut)
	code, _, errOut = runCLI(t, append([]string{"worker", "--retention", "a week"}, db...)...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, `invalid value "a week" for flag -retention`)
	code, _, errOut = runCLI(t, "worker", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "--retention 0 keeps every run")
	require.Regexp(t, `-retention duration\n\s+how long settled runs are kept before the leader deletes them \(0: keep every run\) \(default 168h0m0s\)`, errOut)
}

// TestWorkerRetention: a worker with a short --retention deletes settled
// runs by itself.
func TestWorkerRetention(t *testing.T) {
	t.Parallel()
	p := newPGEnv(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	log := newLines(pr)
	done := make(chan int, 1)
	go func() {
		var stdout strings.Builder
		done <- run(ctx, p.flags("worker", "--retention", "1s", "--worker-id", "retention"), &stdout, pw)
		pw.Close()
	}()
	log.waitFor(t, "durable worker: serving", 30*time.Second)

	client := p.client(t)
	res, err := workloads.New(workloads.Options{}).Noop.Run(ctx, client, "t", 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.Get(ctx, res.ID)
		return errors.Is(err, durable.ErrRunNotFound)
	}, 30*time.Second, 50*time.Millisecond, "the leader deletes runs settled more than a second ago")
	cancel()
	require.Equal(t, 0, <-done, log.String())
}

// TestWorkerMetrics: a worker started with --metrics-addr serves the
// engine's metrics to Prometheus, under the names the README lists.
func TestWorkerMetrics(t *testing.T) {
	t.Parallel()
	p := newPGEnv(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	log := newLines(pr)
	done := make(chan int, 1)
	go func() {
		var stdout strings.Builder
		done <- run(ctx, p.flags("worker", "--metrics-addr", "127.0.0.1:0", "--worker-id", "metrics"), &stdout, pw)
		pw.Close()
	}()
	log.waitFor(t, "durable worker: serving", 30*time.Second)
	m := regexp.MustCompile(`serving metrics" addr=(\S+)`).FindStringSubmatch(log.String())
	require.NotNil(t, m, log.String())
	url := "http://" + m[1] + "/metrics"

	client := p.client(t)
	noop := workloads.New(workloads.Options{}).Noop
	for range 2 {
		_, err := noop.Run(ctx, client, "t", 0)
		require.NoError(t, err)
	}
	scrape := func() string {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	// The worker counts an outcome once the store took it, a moment after
	// the run settled.
	completed := regexp.MustCompile(`(?m)^durable_steps_completed_total\{durable_step="noop",durable_workflow="bench-noop",otel_scope_name="github.com/effectivelabs/durable"[^}]*\} (\S+)$`)
	require.Eventually(t, func() bool {
		m := completed.FindStringSubmatch(scrape())
		return m != nil && m[1] == "2"
	}, 30*time.Second, 50*time.Millisecond, "durable_steps_completed_total of bench-noop is 2")
	body := scrape()
	for _, want := range []string{
		`durable_steps_started_total{durable_step="noop",durable_workflow="bench-noop"`,
		`durable_runs_settled_total{durable_status="COMPLETED",durable_workflow="bench-noop"`,
		`durable_step_duration_seconds_count{durable_step="noop",durable_workflow="bench-noop"`,
		`durable_queue_wait_seconds_bucket{durable_step="noop",durable_workflow="bench-noop"`,
		`durable_store_duration_seconds_count{durable_op="finish"`,
		`durable_store_duration_seconds_count{durable_op="claim"`,
		`durable_queue_depth{durable_state="ready",durable_workflow="bench-noop"`,
	} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, "go_goroutines", "a registry of its own, not the default one")
	code, _, help := runCLI(t, "worker", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, help, "-metrics-addr string")
	require.Contains(t, help, "durable_steps_completed_total")
	cancel()
	require.Equal(t, 0, <-done, log.String())
	_, err := http.Get(url)
	require.Error(t, err, "the metrics server stops with the worker")
}
