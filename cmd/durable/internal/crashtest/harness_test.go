package crashtest

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
)

// Environment variables: envEnable turns the crash tests on; envKeep keeps
// the schema of a failed test; envNewIDs makes TestChaos restart killed
// workers under new worker IDs.
const (
	envEnable = "DURABLE_CRASH_TESTS"
	envKeep   = "DURABLE_CRASH_KEEP"
	envNewIDs = "DURABLE_CRASH_NEW_IDS"
)

// binary is the durable CLI built by TestMain ("" when the tests are off),
// deployApp the service of the rolling-deploy proof (./deployapp), txApp
// that of the transactional-step proof (./txapp).
var binary, deployApp, txApp string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Getenv(envEnable) != "1" {
		return m.Run() // every test skips
	}
	dir, err := os.MkdirTemp("", "durable-crashtest-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "crashtest: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binary, err = build(dir, "./cmd/durable"); err != nil {
		fmt.Fprintf(os.Stderr, "crashtest: %v\n", err)
		return 1
	}
	if deployApp, err = build(dir, "./cmd/durable/internal/crashtest/deployapp"); err != nil {
		fmt.Fprintf(os.Stderr, "crashtest: %v\n", err)
		return 1
	}
	if txApp, err = build(dir, "./cmd/durable/internal/crashtest/txapp"); err != nil {
		fmt.Fprintf(os.Stderr, "crashtest: %v\n", err)
		return 1
	}
	return m.Run()
}

// build builds the command pkg of the module containing the working
// directory into dir.
func build(dir, pkg string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %w\n%s", pkg, root, err, b)
	}
	return out, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// harness is one test's schema, its worker processes and a client engine.
type harness struct {
	t      *testing.T
	url    string
	schema string
	pool   *pgxpool.Pool
	client *durable.Engine // never started: triggers and reads runs
	logDir string

	mu      sync.Mutex
	workers []*worker
}

// newHarness skips unless the crash tests are enabled, and returns a harness
// on a fresh, migrated schema. Worker logs go to a directory that is kept
// (and named in the test log) when the test fails.
func newHarness(t *testing.T) *harness {
	t.Helper()
	if os.Getenv(envEnable) != "1" {
		t.Skipf("crash tests kill worker processes and restart PostgreSQL, so they run alone: "+
			"%s=1 %s=postgres://... go test -count=1 -v ./cmd/durable/internal/crashtest/", envEnable, pgtest.EnvURL)
	}
	url := pgtest.URL(t)
	require.NotEmpty(t, binary, "the durable CLI was not built")
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 6
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, pool.Ping(ctx))
	t.Cleanup(pool.Close)
	schema := pgtest.NewSchemaName()
	_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err)
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	client, err := durable.New(s, durable.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)

	logDir, err := os.MkdirTemp("", "durable-crashtest-"+t.Name()+"-")
	require.NoError(t, err)
	h := &harness{t: t, url: url, schema: schema, pool: pool, client: client, logDir: logDir}
	t.Cleanup(h.dropSchema)
	t.Cleanup(h.cleanup) // runs first: no worker uses the schema when it is dropped
	return h
}

// cleanup kills the workers still running, and keeps their logs if the test
// failed.
func (h *harness) cleanup() {
	h.mu.Lock()
	ws := slices.Clone(h.workers)
	h.mu.Unlock()
	for _, w := range ws {
		if w.running() {
			if h.t.Failed() {
				w.dumpGoroutines()
			}
			w.kill()
		}
	}
	if h.t.Failed() {
		h.t.Logf("worker logs kept in %s", h.logDir)
		for _, w := range ws {
			h.t.Logf("last lines of %s:\n%s", w.logPath, tail(w.logPath, 25))
		}
		return
	}
	os.RemoveAll(h.logDir)
}

// dropSchema drops the test's schema, unless the test failed and
// DURABLE_CRASH_KEEP=1 asks to keep it for a post-mortem.
func (h *harness) dropSchema() {
	if h.t.Failed() && os.Getenv(envKeep) == "1" {
		h.t.Logf("schema %s kept", h.schema)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{h.schema}.Sanitize()+" CASCADE"); err != nil {
		h.t.Errorf("drop schema %s: %v", h.schema, err)
	}
}

// table returns the quoted name of a table of the test's schema.
func (h *harness) table(name string) string {
	return pgx.Identifier{h.schema, name}.Sanitize()
}

// worker is one `durable worker` process (or the worker command of
// another program over durablecli), restartable.
type worker struct {
	h       *harness
	base    string // the name of its log file
	id      string // the current --worker-id
	args    []string
	logPath string
	bin     string   // the program; the durable CLI when empty
	env     []string // added to the environment

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	state   *os.ProcessState
	started time.Time
	starts  int
}

// startWorker starts a worker process with the given ID and extra flags.
func (h *harness) startWorker(id string, extra ...string) *worker {
	h.t.Helper()
	return h.startProgram(binary, nil, id, extra...)
}

// startProgram starts the worker command of program bin, with env added to
// its environment, under the given ID and with extra flags.
func (h *harness) startProgram(bin string, env []string, id string, extra ...string) *worker {
	h.t.Helper()
	w := &worker{h: h, base: id, id: id, args: extra, logPath: filepath.Join(h.logDir, id+".log"), bin: bin, env: env}
	h.mu.Lock()
	h.workers = append(h.workers, w)
	h.mu.Unlock()
	w.start()
	return w
}

// start runs the process (again) under w.id, and waits until it is up: its
// worker record, written once the engine has started, says it started.
func (w *worker) start() {
	t := w.h.t
	t.Helper()
	f, err := os.OpenFile(w.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer f.Close()
	w.mu.Lock()
	w.starts++
	fmt.Fprintf(f, "=== crashtest: start #%d as %s at %s\n", w.starts, w.id, time.Now().Format(time.RFC3339Nano))
	args := append([]string{"worker", "--database-url", w.h.url, "--schema", w.h.schema, "--worker-id", w.id}, w.args...)
	cmd := exec.Command(cmp.Or(w.bin, binary), args...)
	if len(w.env) > 0 {
		cmd.Env = append(os.Environ(), w.env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	w.started = time.Now()
	err = cmd.Start()
	if err != nil {
		w.mu.Unlock()
		require.NoError(t, err)
	}
	done := make(chan struct{})
	w.cmd, w.done, w.state = cmd, done, nil
	w.mu.Unlock()
	go func() {
		_ = cmd.Wait() // the exit status is read from ProcessState
		w.mu.Lock()
		w.state = cmd.ProcessState
		w.mu.Unlock()
		close(done)
	}()
	w.waitUp()
}

// waitUp waits until the process's engine has registered its start: its
// worker record's started_at is at or after the process's start (the
// database runs on this machine's clock).
func (w *worker) waitUp() {
	t := w.h.t
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := w.h.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM `+w.h.table("workers")+` WHERE id = $1 AND started_at >= $2`,
			w.id, w.started).Scan(&n)
		if err == nil && n > 0 {
			return
		}
		if !w.running() {
			require.Failf(t, "worker exited while starting", "%s: %v\n%s", w.id, w.exitState(), tail(w.logPath, 25))
		}
		if time.Now().After(deadline) {
			require.Failf(t, "worker did not come up", "%s within 30s (last error %v)\n%s", w.id, err, tail(w.logPath, 25))
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
}

func (w *worker) running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done == nil {
		return false
	}
	select {
	case <-w.done:
		return false
	default:
		return true
	}
}

func (w *worker) exitState() *os.ProcessState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// kill sends SIGKILL, waits for the process to be gone, and returns when the
// signal was sent.
func (w *worker) kill() time.Time {
	w.mu.Lock()
	cmd, done := w.cmd, w.done
	w.mu.Unlock()
	at := time.Now()
	_ = cmd.Process.Signal(syscall.SIGKILL) // it may have exited already
	<-done
	return at
}

// dumpGoroutines makes the process print its goroutines to its log (Go
// does that on SIGQUIT), for the post-mortem of a failed test.
func (w *worker) dumpGoroutines() {
	w.mu.Lock()
	cmd, done := w.cmd, w.done
	w.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// terminate sends SIGTERM and returns the exit code, failing the test if
// the process does not exit within timeout.
func (w *worker) terminate(timeout time.Duration) int {
	t := w.h.t
	t.Helper()
	w.mu.Lock()
	cmd, done := w.cmd, w.done
	w.mu.Unlock()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-done:
	case <-time.After(timeout):
		w.kill()
		require.Failf(t, "worker did not exit after SIGTERM", "%s within %s\n%s", w.id, timeout, tail(w.logPath, 25))
	}
	return w.exitState().ExitCode()
}

// tail returns the last n log lines of a worker's log file, leaving out
// goroutine dumps.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	dump := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "SIGQUIT"):
			dump = true
		case strings.HasPrefix(line, "=== crashtest"):
			dump = false
		}
		if dump {
			continue
		}
		lines = append(lines, line)
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// leader returns the worker holding the leader's lease (the leader table,
// on the database's clock), waiting for one of ws to hold it.
func (h *harness) leader(ws []*worker) *worker {
	h.t.Helper()
	var id string
	var err error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		id, err = h.leaseHolder(context.Background())
		if err == nil {
			for _, w := range ws {
				if w.running() && w.currentID() == id {
					return w
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
	require.Failf(h.t, "no leader", "the lease names %q, error %v", id, err)
	return nil
}

// leaseHolder returns the worker ID holding the leader's lease now, or ""
// when it has expired.
func (h *harness) leaseHolder(ctx context.Context) (string, error) {
	var id string
	err := h.pool.QueryRow(ctx, `SELECT coalesce((SELECT worker FROM `+h.table("leader")+` WHERE expires_at > now()), '')`).Scan(&id)
	return id, err
}

// currentID returns the worker ID the process runs (or last ran) under.
func (w *worker) currentID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id
}

// runningOf returns the tasks RUNNING under w's current process: claimed
// under its worker ID since it started. (Tasks of an earlier process with the
// same ID may still be RUNNING, waiting to be rescued.)
func (w *worker) runningOf() []attemptKey {
	h := w.h
	h.t.Helper()
	w.mu.Lock()
	id, since := w.id, w.started
	w.mu.Unlock()
	rows, err := h.pool.Query(context.Background(), `SELECT run_id::text, name, attempt FROM `+h.table("tasks")+
		` WHERE state = 'RUNNING' AND worker = $1 AND started_at >= $2`, id, since)
	require.NoError(h.t, err)
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (attemptKey, error) {
		var k attemptKey
		err := row.Scan(&k.run, &k.step, &k.attempt)
		k.step = dag.DisplayName(k.step) // an item as the engine's API names it
		return k, err
	})
	require.NoError(h.t, err)
	return keys
}

// attemptKey is one attempt of one task.
type attemptKey struct {
	run     string
	step    string
	attempt int
}

// counts returns how many runs the test triggered (child runs left out)
// and how many of them have settled, and how many runs, child runs
// included, have not. It returns an error instead of failing, for polls
// that span a PostgreSQL restart.
func (h *harness) counts(ctx context.Context) (total, settled, open int, err error) {
	err = h.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE parent_id IS NULL),
  count(finished_at) FILTER (WHERE parent_id IS NULL), count(*) FILTER (WHERE finished_at IS NULL) FROM `+h.table("runs")).
		Scan(&total, &settled, &open)
	return total, settled, open, err
}

// pendingMessages returns how many messages for runs (a sent event for a
// waiting step, a child run's settlement, the cancellation of a child) wait
// in the inbox table to be applied to their runs.
func (h *harness) pendingMessages(ctx context.Context) (n int, err error) {
	err = h.pool.QueryRow(ctx, `SELECT count(*) FROM `+h.table("inbox")).Scan(&n)
	return n, err
}

// waitSettled waits until at least want runs were triggered, and all runs,
// child runs included, have settled, and no message for a run is left
// pending: a message the process that wrote it did not apply (it died) is
// applied by the leader's periodic pass.
func (h *harness) waitSettled(want int, within time.Duration) {
	h.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	var total, settled, open, pending int
	var err error
	for time.Now().Before(deadline) {
		total, settled, open, err = h.counts(ctx)
		if err == nil && total >= want && open == 0 {
			pending, err = h.pendingMessages(ctx)
			if err == nil && pending == 0 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
	require.Failf(h.t, "runs did not settle", "%d of %d runs settled, %d runs open (child runs included), %d messages pending, after %s (want %d runs; last error %v)\n%s",
		settled, total, open, pending, within, want, err, h.diagnose(ctx))
}

// diagnose describes what keeps runs from settling: their open tasks, the
// messages pending in the inbox, and the event log of the first open run.
func (h *harness) diagnose(ctx context.Context) string {
	var b strings.Builder
	rows, err := h.pool.Query(ctx, `
SELECT t.run_id::text || ' ' || r.workflow || ' ' || t.name || ' ' || t.kind || ' ' || t.state || ' attempt ' || t.attempt ||
       ' token ' || t.token || ' worker ' || coalesce(t.worker, '-') || coalesce(' wait_key ' || t.wait_key, '') ||
       coalesce(' child ' || t.child_id::text, '') || coalesce(' items_left ' || t.items_left, '')
FROM `+h.table("tasks")+` t JOIN `+h.table("runs")+` r ON r.id = t.run_id
WHERE r.finished_at IS NULL AND t.state NOT IN ('COMPLETED', 'SKIPPED', 'FAILED', 'CANCELLED')
ORDER BY r.created_at, t.run_id, t.name LIMIT 30`)
	open, err2 := pgx.CollectRows(rows, pgx.RowTo[string])
	fmt.Fprintf(&b, "open tasks (error %v):\n%s\n", cmp.Or(err, err2), strings.Join(open, "\n"))
	rows, err = h.pool.Query(ctx, `
SELECT i.id || ' run ' || i.run_id::text || ' ' || coalesce(r.workflow || ' ' || r.status, 'no such run') || ' kind ' || i.kind ||
       coalesce(' step ' || i.step, '') || coalesce(' token ' || i.token, '') || coalesce(' message ' || i.message_id, '') ||
       coalesce(' child ' || i.child_id::text, '') || coalesce(' status ' || i.status, '') ||
       coalesce(' result_state ' || i.result_state, '') || coalesce(' error ' || i.error, '')
FROM `+h.table("inbox")+` i LEFT JOIN `+h.table("runs")+` r ON r.id = i.run_id ORDER BY i.id LIMIT 30`)
	inbox, err2 := pgx.CollectRows(rows, pgx.RowTo[string])
	fmt.Fprintf(&b, "inbox (error %v):\n%s\n", cmp.Or(err, err2), strings.Join(inbox, "\n"))
	var first string
	err = h.pool.QueryRow(ctx, `SELECT coalesce((SELECT id::text FROM `+h.table("runs")+
		` WHERE finished_at IS NULL ORDER BY created_at, id LIMIT 1), '')`).Scan(&first)
	if err != nil || first == "" {
		return b.String()
	}
	evs, err := h.client.Events(ctx, uuid.MustParse(first))
	fmt.Fprintf(&b, "event log of run %s (error %v):\n", first, err)
	for _, ev := range evs {
		due := ""
		if !ev.DueAt.IsZero() {
			due = " due " + ev.DueAt.Format("15:04:05.000000")
		}
		fmt.Fprintf(&b, "  %s %s %s#%d %s%s\n", ev.At.Format("15:04:05.000000"), ev.Step, ev.Type, ev.Attempt, ev.Detail, due)
	}
	return b.String()
}

// rest waits for d, the chaos's own rhythm (not a synchronisation). If the
// goroutine triggering the runs reports meanwhile, its error fails the test,
// *triggered is set to nil (so that it is not read again) and done is called.
func rest(t *testing.T, d time.Duration, triggered *chan error, done func()) {
	t.Helper()
	pause := time.NewTimer(d)
	defer pause.Stop()
	for {
		select {
		case err := <-*triggered:
			require.NoError(t, err, "triggering")
			*triggered = nil
			done()
		case <-pause.C:
			return
		}
	}
}
