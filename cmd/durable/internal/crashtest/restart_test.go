package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
)

// TestPostgresRestart restarts the PostgreSQL server under three busy
// workers: chaos runs are triggered at a steady pace, half before the
// restart and half after it, so that every worker has work on both sides,
// and their events are sent (some only after the restart). The workers
// must reconnect by themselves (their processes are never restarted), each
// must run steps again, and every run and child run must complete, with
// each step and item recorded once and each event received once.
func TestPostgresRestart(t *testing.T) {
	postgresOutage(t, 0)
}

// TestPostgresOutage is TestPostgresRestart with the server stopped for 8
// s, longer than the workers' --dead-after (5 s), and then started: no
// worker could heartbeat during the outage, the leader's included, so the
// leader must not take the silent workers for dead when the server is back
// (it rescues only after two heartbeat intervals of contact, by when the
// live workers have heartbeated again). No step that ran is rescued and
// run again; a claim whose answer the outage lost (the step never ran) may
// be, and the test reports those.
func TestPostgresOutage(t *testing.T) {
	postgresOutage(t, 8*time.Second)
}

// postgresOutage runs the restart proof: with down zero, the server is
// restarted; otherwise it is stopped, and started again down later.
func postgresOutage(t *testing.T, down time.Duration) {
	h := newHarness(t)
	version, cluster := localCluster(t, h)
	const runs = 300
	flags := []string{"--record-executions", "--dead-after", "5s", "--heartbeat-interval", "1s",
		"--drain-timeout", "5s", "--concurrency", "25"}
	ws := []*worker{h.startWorker("r1", flags...), h.startWorker("r2", flags...), h.startWorker("r3", flags...)}

	set := workloads.New(workloads.Options{})
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	// trigger starts runs from..to-1, 10 every 250ms, and sends their
	// events (see approver): the events held back from the last batch
	// before the restart go out after it.
	ap := newApprover(h.client, set.Chaos, rand.New(rand.NewPCG(seed, seed>>1)))
	trigger := func(from, to int) {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for b := from; b < to; b += 10 {
			ns := make([]int, 0, 10)
			for n := b; n < min(b+10, to); n++ {
				ns = append(ns, n)
			}
			require.NoError(t, ap.trigger(ctx, ns))
			<-tick.C
		}
	}
	trigger(0, runs/2)
	total, before, _, err := h.counts(ctx)
	require.NoError(t, err)

	// Much of the outage is the shutdown checkpoint, which writes out every
	// dirty buffer: after a package of tests that can take longer than
	// --dead-after (7.3 s once, in CI), and then the leader rightly takes
	// the silent workers for dead. A checkpoint now leaves the restart
	// little to write, so the outage stays the short one the test is about.
	_, err = h.pool.Exec(ctx, "CHECKPOINT")
	require.NoError(t, err)
	ctl := func(action string) {
		cmd := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, action)
		if out, err := cmd.CombinedOutput(); err != nil {
			unavailable(t, fmt.Sprintf("pg_ctlcluster %s %s %s failed: %v\n%s", version, cluster, action, err, out))
		}
	}
	issued := time.Now()
	back := watchRestart(h.url, issued)
	if down == 0 {
		ctl("restart")
	} else {
		// Start the server again even if the test fails while it is down.
		started := false
		t.Cleanup(func() {
			if !started {
				ctl("start")
			}
		})
		ctl("stop")
		time.Sleep(down) // the outage itself, not a wait for anything
		ctl("start")
		started = true
	}
	returned := time.Now()
	up, ok := <-back
	require.True(t, ok, "PostgreSQL did not accept connections within 2 minutes of the restart")
	h.pool.Reset() // drop the connections the restart broke
	t.Logf("PostgreSQL restarted with %d of %d runs settled: accepting connections again %s after the restart was issued (pg_ctlcluster returned after %s; stopped for %s)",
		before, total, up.Sub(issued).Round(time.Millisecond), returned.Sub(issued).Round(time.Millisecond), down)
	trigger(runs/2, runs)
	require.NoError(t, ap.flush(ctx))

	h.waitSettled(runs, 3*time.Minute)
	settledAt := time.Since(up)
	for _, w := range ws {
		require.True(t, w.running(), "%s is still the process started before the restart", w.id)
		require.Equal(t, 1, w.starts)
	}

	// How long the workers took to run steps again once the server was back.
	for _, w := range ws {
		require.Equal(t, 0, w.terminate(30*time.Second), "%s exits 0 on SIGTERM", w.id)
	}
	s := h.snapshot()
	// The first claim after the restart, overall and by each worker: the
	// STARTED events after up, attributed to workers by chaos_executions.
	started := map[attemptKey]time.Time{}
	var firstClaim time.Time
	for k, evs := range s.events {
		for _, ev := range evs {
			if ev.typ == "STARTED" && ev.at.After(up) {
				started[attemptKey{k.run, k.step, ev.attempt}] = ev.at
				if firstClaim.IsZero() || ev.at.Before(firstClaim) {
					firstClaim = ev.at
				}
			}
		}
	}
	firstOf := map[string]time.Time{}
	claimsOf := map[string]int{}
	rows, err := h.pool.Query(ctx, `SELECT run_id::text, step, attempt, worker FROM `+h.table("chaos_executions"))
	require.NoError(t, err)
	var k attemptKey
	var worker string
	ran := map[attemptKey]bool{} // every attempt whose step code ran
	_, err = pgx.ForEachRow(rows, []any{&k.run, &k.step, &k.attempt, &worker}, func() error {
		ran[k] = true
		if at, ok := started[k]; ok {
			claimsOf[worker]++
			if first, seen := firstOf[worker]; !seen || at.Before(first) {
				firstOf[worker] = at
			}
		}
		return nil
	})
	require.NoError(t, err)
	var per []string
	for _, w := range ws {
		if first, ok := firstOf[w.id]; ok {
			per = append(per, fmt.Sprintf("%s after %s (%d claims)", w.id, first.Sub(up).Round(time.Millisecond), claimsOf[w.id]))
		}
	}
	t.Logf("first claim %s after PostgreSQL came back; each worker's first claim: %s; all runs settled %s after it came back",
		firstClaim.Sub(up).Round(time.Millisecond), strings.Join(per, ", "), settledAt.Round(time.Millisecond))
	require.Len(t, per, len(ws), "every worker runs steps again after the restart")

	// No worker died, so no step that ran should have been rescued as a
	// dead worker's: not after a restart shorter than --dead-after, and not
	// after an outage longer than it either. After a restart no step should
	// have been rescued at all; after a long outage, a claim may have been
	// (one whose answer the outage lost: its worker never knew of it, and
	// its step never ran).
	var rescued, unran []string
	for k, evs := range s.events {
		for _, ev := range evs {
			if ev.typ == "LOST" {
				d := fmt.Sprintf("%s/%s attempt %d at %s: %s", k.run, k.step, ev.attempt, ev.at.Sub(up).Round(time.Millisecond), ev.detail)
				if down == 0 || ran[attemptKey{k.run, k.step, ev.attempt}] {
					rescued = append(rescued, d)
				} else {
					unran = append(unran, d)
				}
			}
		}
	}
	require.Empty(t, rescued, "steps of live workers were rescued (times relative to PostgreSQL coming back)")
	t.Logf("%d claims that never ran were rescued: %v", len(unran), unran)

	rs := verifyRecorded(t, s, runs)
	cs := verifyChaos(t, h, s)
	as := ap.st
	t.Logf("runs %d (all COMPLETED) and %d child runs (%d failed or cancelled, retried), tasks %d (%d items), recorded outcomes %d, recorded duplicates %d; executions %d for %d recorded outputs of code (%d re-executions)",
		rs.runs, rs.children, cs.failedChildren, rs.tasks, rs.items, rs.outcomes, rs.duplicates, cs.executions, cs.recordedSteps, cs.reexecutions)
	t.Logf("events: %d sent before their run was triggered, %d after it (%d received by a step already waiting); %d approve steps received theirs by the lookback, %d while waiting; %d second events, none received",
		as.early, as.late, as.live, cs.lookback, cs.approvals-cs.lookback, as.seconds)
	require.Equal(t, runs, cs.approvals, "every approve step received its event")
}

// watchRestart reports when a server started after issued first accepts a
// connection, trying every 20ms on fresh connections; the channel is closed
// if that does not happen within 2 minutes.
func watchRestart(url string, issued time.Time) <-chan time.Time {
	back := make(chan time.Time, 1)
	go func() {
		defer close(back)
		for time.Since(issued) < 2*time.Minute {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			var started time.Time
			conn, err := pgx.Connect(ctx, url)
			if err == nil {
				err = conn.QueryRow(ctx, `SELECT pg_postmaster_start_time()`).Scan(&started)
				conn.Close(ctx)
			}
			cancel()
			if err == nil && started.After(issued) {
				back <- time.Now()
				return
			}
			time.Sleep(20 * time.Millisecond) // polling a condition
		}
	}()
	return back
}

// localCluster returns the Debian version and name of the cluster serving
// the test database, if pg_ctlcluster can restart it from here; otherwise
// the test is skipped (failed under CI=true).
func localCluster(t *testing.T, h *harness) (version, cluster string) {
	t.Helper()
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		unavailable(t, "pg_ctlcluster (postgresql-common) is not installed: cannot restart PostgreSQL")
	}
	var name string
	require.NoError(t, h.pool.QueryRow(context.Background(), `SHOW cluster_name`).Scan(&name))
	version, cluster, ok := strings.Cut(name, "/")
	if !ok {
		// Not a Debian cluster name: the only version's "main" cluster.
		dirs, _ := filepath.Glob("/etc/postgresql/*")
		if len(dirs) != 1 {
			unavailable(t, fmt.Sprintf("cannot tell which cluster serves the test database (cluster_name %q, /etc/postgresql holds %v)", name, dirs))
		}
		version, cluster = filepath.Base(dirs[0]), "main"
	}
	if _, err := os.Stat(filepath.Join("/etc/postgresql", version, cluster)); err != nil {
		unavailable(t, fmt.Sprintf("the test database's cluster %s/%s is not a local cluster: %v", version, cluster, err))
	}
	return version, cluster
}

// unavailable skips a test that cannot run here, or fails it under CI=true.
func unavailable(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: not skipping)")
	}
	t.Skip(msg)
}
