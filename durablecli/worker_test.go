package durablecli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
)

// TestWorkerNoMigrate: with --no-migrate the worker serves a migrated schema
// and refuses, saying how to fix it, one that is missing (which it does not
// create).
func TestWorkerNoMigrate(t *testing.T) {
	t.Parallel()
	missing := newPG(t, false)
	code, out, errOut := runCLI(t, missing.Flags("worker", "--no-migrate")...)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	for _, want := range []string{
		"durable worker: cannot start: durable: store not ready: pgstore: schema " + missing.Schema + " does not exist",
		"run `durable migrate up` (or pgstore.Migrate)",
	} {
		require.Contains(t, errOut, want)
	}
	var exists bool
	require.NoError(t, pgtest.Pool(t).QueryRow(context.Background(), `SELECT to_regnamespace($1) IS NOT NULL`, missing.Schema).Scan(&exists))
	require.False(t, exists, "--no-migrate created the schema")

	p := newPG(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	log := clitest.NewLines(pr)
	done := make(chan int, 1)
	go func() {
		var stdout strings.Builder
		done <- run(ctx, p.Flags("worker", "--no-migrate", "--worker-id", "no-migrate"), &stdout, pw)
		pw.Close()
	}()
	log.WaitFor(t, "durable worker: serving", 30*time.Second)
	cancel()
	require.Equal(t, 0, <-done, log.String())
	log.WaitFor(t, "durable worker: draining", time.Second)
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
		fs := newCLI(testConfig(), io.Discard, io.Discard).newWorkerFlags(&o, io.Discard)
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
	p := newPG(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	log := clitest.NewLines(pr)
	done := make(chan int, 1)
	go func() {
		var stdout strings.Builder
		done <- run(ctx, p.Flags("worker", "--retention", "1s", "--worker-id", "retention"), &stdout, pw)
		pw.Close()
	}()
	log.WaitFor(t, "durable worker: serving", 30*time.Second)

	client := p.Client(t)
	res, err := newFixtures(0).Noop.Run(ctx, client, "t", 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.Get(ctx, res.ID)
		return errors.Is(err, durabletype.ErrRunNotFound)
	}, 30*time.Second, 50*time.Millisecond, "the leader deletes runs settled more than a second ago")
	cancel()
	require.Equal(t, 0, <-done, log.String())
}

// TestWorkerMetrics: a worker started with --metrics-addr serves the
// engine's metrics to Prometheus, under the names docs/observability.md lists.
func TestWorkerMetrics(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	log := clitest.NewLines(pr)
	done := make(chan int, 1)
	go func() {
		var stdout strings.Builder
		done <- run(ctx, p.Flags("worker", "--metrics-addr", "127.0.0.1:0", "--worker-id", "metrics"), &stdout, pw)
		pw.Close()
	}()
	log.WaitFor(t, "durable worker: serving", 30*time.Second)
	m := regexp.MustCompile(`serving metrics" addr=(\S+)`).FindStringSubmatch(log.String())
	require.NotNil(t, m, log.String())
	url := "http://" + m[1] + "/metrics"

	client := p.Client(t)
	noop := newFixtures(0).Noop
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
	// The leader samples the queue depth when it starts leading (and
	// every 30s), which may come after the runs.
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(), `durable_queue_depth{durable_state="ready",durable_workflow="bench-noop"`)
	}, 30*time.Second, 50*time.Millisecond, "the leader's queue depth sample")
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

// TestWorkerLeaderLeaseFlag: --leader-lease defaults to pgstore's default
// lease and refuses a lease below 100ms as a usage error.
func TestWorkerLeaderLeaseFlag(t *testing.T) {
	t.Parallel()
	var o workerOptions
	fs := newCLI(testConfig(), io.Discard, io.Discard).newWorkerFlags(&o, io.Discard)
	require.NoError(t, fs.Parse(nil))
	require.Equal(t, pgstore.DefaultLeaderLease, o.leaderLease)
	require.NoError(t, fs.Parse([]string{"--leader-lease", "5s"}))
	require.Equal(t, 5*time.Second, o.leaderLease)

	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	code, out, errOut := runCLI(t, append([]string{"worker", "--leader-lease", "10ms"}, db...)...)
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.Equal(t, "durable worker: --leader-lease must be at least 100ms, got 10ms\n", errOut)
	code, _, errOut = runCLI(t, "worker", "-h")
	require.Equal(t, 0, code)
	require.Regexp(t, `-leader-lease duration\n\s+how long the leader's lease lasts unrenewed.*\(default 15s\)`, errOut)
}
