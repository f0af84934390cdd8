package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
	"github.com/effectivelabs/durable/durabletype"
)

// TestDefaultsSurviveKills is the crash proof of the defaults. Three worker
// processes run with no engine options (DeadAfter 30 s, heartbeats every
// 5 s; --record-executions only records), and serve steady runs, whose steps
// are declared with no options at all: no retries. Runs are triggered at a
// steady rate for about two minutes while a random worker is SIGKILLed every
// few seconds (never one whose kill would be the third in a row of a steady
// step: with no options, that step fails as a poison step), and once the poison run below has settled every worker is
// restarted in turn (SIGTERM, a rolling restart). Meanwhile one crash-poison
// run, whose step ends the process that runs it, kills worker after worker.
// Workers that die, killed or by the poison, are started again, as a
// supervisor would.
//
// Then every steady run must have COMPLETED, with each step's outcome
// recorded exactly once and no attempt counted as failed (a lost attempt
// spends no retry, and these steps have none), and the kills must have
// caught steps running (LOST events). The poison run must have FAILED with
// an error matching ErrPoisonStep after DefaultLostLimit lost attempts, each
// of which ran its step once.
func TestDefaultsSurviveKills(t *testing.T) {
	h := newHarness(t)
	flags := []string{"--record-executions"}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("seed %d", seed)
	ws := []*worker{h.startWorker("d1", flags...), h.startWorker("d2", flags...), h.startWorker("d3", flags...)}
	begin := time.Now()
	elapsed := func() string { return fmt.Sprintf("%6.2fs", time.Since(begin).Seconds()) }

	set := workloads.New(workloads.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	poison, err := set.Poison.RunNoWait(ctx, h.client, "poison", 0)
	require.NoError(t, err)

	// Three runs every 500ms for 130s: 780 runs of 6 steps, 36 steps a
	// second, well within what two workers do, so that a step that runs
	// again is not queued behind a backlog.
	const (
		perTick = 3
		ticks   = 260
		runs    = perTick * ticks
	)
	triggered := make(chan error, 1)
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for n := 0; n < runs; n += perTick {
			for k := n; k < n+perTick; k++ {
				if _, err := set.Steady.RunNoWait(ctx, h.client, fmt.Sprintf("tenant-%d", k%5), k); err != nil {
					triggered <- err
					return
				}
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				triggered <- ctx.Err()
				return
			}
		}
		triggered <- nil
	}()

	var kills, terms, died int
	// supervise starts again the workers that ended by themselves (the
	// poison step ends the process that runs it).
	supervise := func() {
		for _, w := range ws {
			if !w.running() {
				died++
				t.Logf("%s %s ended by itself (%v): starting it again", elapsed(), w.id, w.exitState())
				w.start()
			}
		}
	}
	// The rolling restart waits for the poison run to settle (about three
	// rescues, a few seconds past 3×DeadAfter), so that no worker it
	// drains ends by the poison step meanwhile.
	poisoned := func() bool {
		res, err := h.client.Get(ctx, poison)
		require.NoError(t, err)
		return res.Status != durabletype.RunRunning
	}
	triggerDone, rolled := false, false
	deadline := time.Now().Add(5 * time.Minute)
	for action := 0; !triggerDone || !rolled || action < 14; action++ {
		// The chaos's own rhythm, not a synchronisation.
		rest(t, time.Duration(5000+rng.IntN(3000))*time.Millisecond, &triggered, func() {
			triggerDone = true
			t.Logf("%s all %d runs triggered", elapsed(), runs)
		})
		require.True(t, time.Now().Before(deadline), "the chaos ran for 4 minutes")
		supervise()
		if !rolled && poisoned() {
			// A rolling restart: each worker drains and starts again.
			rolled = true
			t.Logf("%s the poison run settled; a rolling restart", elapsed())
			for _, w := range ws {
				if !w.running() {
					continue
				}
				code := w.terminate(time.Minute)
				t.Logf("%s SIGTERM %s: exit %d", elapsed(), w.id, code)
				require.Equal(t, 0, code, "a drained worker exits 0")
				terms++
				w.start()
			}
			continue
		}
		// A random worker, but not one whose kill would be the third in
		// a row of a steady step: that step would fail as a poison step,
		// as the defaults say it must (DefaultLostLimit), and making
		// poison steps is the poison run's part, not the chaos's.
		w := ws[rng.IntN(len(ws))]
		if lastLoss(w, poison) {
			t.Logf("%s %s runs a steady step at its last loss: no kill this time", elapsed(), w.id)
			continue
		}
		running := len(w.runningOf())
		w.kill()
		kills++
		t.Logf("%s SIGKILL %s with %d steps running", elapsed(), w.id, running)
		w.start()
	}

	// Every run settles, the poison run included (its last lost attempt
	// may still be waiting for the leader to take it back), while the
	// workers it kills are started again.
	settle := time.Now().Add(3 * time.Minute)
	for {
		total, settled, open, err := h.counts(ctx)
		require.NoError(t, err)
		if total >= runs+1 && open == 0 {
			break
		}
		if time.Now().After(settle) {
			require.Failf(t, "runs did not settle", "%d of %d settled, %d open\n%s", settled, total, open, h.diagnose(ctx))
		}
		supervise()
		time.Sleep(200 * time.Millisecond) // polling a condition
	}
	t.Logf("%s all runs settled", elapsed())
	for _, w := range ws {
		require.Equal(t, 0, w.terminate(time.Minute), "%s exits 0 on SIGTERM", w.id)
	}

	// The poison run failed as a poison step, after its lost limit.
	res, err := h.client.Get(ctx, poison)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunFailed, res.Status)
	require.ErrorIs(t, res.Err, durable.ErrPoisonStep)
	require.ErrorIs(t, res.Err, durable.ErrRunFailed)
	poisonEvents, err := h.client.Events(ctx, poison)
	require.NoError(t, err)
	lost := 0
	for _, ev := range poisonEvents {
		if ev.Type == durabletype.EventLost {
			lost++
		}
	}
	require.Equal(t, durable.DefaultLostLimit, lost, "the poison step failed after its lost limit")
	var boomRuns int
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM `+h.table("chaos_executions")+` WHERE run_id = $1`,
		poison).Scan(&boomRuns))
	// Each lost attempt ran the step once, unless a SIGKILL of the test
	// caught its worker before the step recorded it.
	require.LessOrEqual(t, boomRuns, durable.DefaultLostLimit, "the poison step ran at most once per lost attempt")
	require.NotZero(t, boomRuns, "the poison step never ran")
	require.NotZero(t, died, "the poison step ended no worker")

	// Every steady run completed, every outcome recorded once, and no
	// attempt failed.
	s := h.snapshot()
	s.drop(poison)
	rs := verifyRecorded(t, s, runs)
	var lostSteps, failed int
	var failures []string
	for k, evs := range s.events {
		for _, ev := range evs {
			switch ev.typ {
			case "LOST":
				lostSteps++
			case "RETRYING", "FAILED":
				failed++
				if len(failures) < 5 {
					failures = append(failures, fmt.Sprintf("%s/%s: %s attempt %d: %s", k.run, k.step, ev.typ, ev.attempt, ev.detail))
				}
			}
		}
	}
	t.Logf("runs %d (all COMPLETED), tasks %d, recorded outcomes %d, recorded duplicates %d", rs.runs, rs.tasks, rs.outcomes, rs.duplicates)
	t.Logf("kills %d, SIGTERMs %d, workers ended by the poison step %d; steady attempts lost %d, failed %d; poison: %s",
		kills, terms, died, lostSteps, failed, res.Err)
	require.Zero(t, failed, "attempts failed under the defaults:\n%s", strings.Join(failures, "\n"))
	require.NotZero(t, lostSteps, "no kill caught a steady step running: the test proved nothing about lost workers")
}

// drop removes a run, its tasks and their events from the snapshot.
func (s *snapshot) drop(id uuid.UUID) {
	run := id.String()
	for i := range s.runs {
		if s.runs[i].id == run {
			s.runs = append(s.runs[:i], s.runs[i+1:]...)
			break
		}
	}
	for k := range s.tasks {
		if k.run == run {
			delete(s.tasks, k)
		}
	}
	for k := range s.events {
		if k.run == run {
			delete(s.events, k)
		}
	}
}

// lastLoss reports whether w runs a step, of a run other than poison,
// that has lost DefaultLostLimit-1 attempts in a row: killing w would make
// it fail as a poison step.
func lastLoss(w *worker, poison uuid.UUID) bool {
	h := w.h
	h.t.Helper()
	w.mu.Lock()
	id, since := w.id, w.started
	w.mu.Unlock()
	var at bool
	require.NoError(h.t, h.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM `+h.table("tasks")+
		` WHERE state = 'RUNNING' AND worker = $1 AND started_at >= $2 AND run_id <> $3 AND coalesce(lost, 0) >= $4)`,
		id, since, poison, durabletype.DefaultLostLimit-1).Scan(&at))
	return at
}
