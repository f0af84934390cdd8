package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Flow control: idempotent triggers, delayed starts, timeouts, deadlines
// and priorities.

func createResult(t *testing.T, s store.Store, now time.Time, runs ...store.NewRun) []store.CreatedRun {
	t.Helper()
	res, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: now, Runs: runs})
	require.NoError(t, err)
	require.Len(t, res.Runs, len(runs))
	return res.Runs
}

func testIdempotencyKey(t *testing.T, s store.Store) {
	first := newRun("wf", "t", shape(step("a")))
	first.IdempotencyKey = "order-1"
	got := createResult(t, s, T0, first)
	require.Equal(t, []store.CreatedRun{{ID: first.ID}}, got)
	require.Equal(t, "order-1", run(t, s, first.ID).IdempotencyKey)

	// The same key again, alone and in a batch with a fresh run and a
	// second copy of itself: the first run is reported, nothing else of
	// that key is created.
	again := newRun("wf", "t", shape(step("a")))
	again.IdempotencyKey = "order-1"
	fresh := newRun("wf", "t", shape(step("a")))
	fresh.IdempotencyKey = "order-2"
	twin := newRun("wf", "t", shape(step("a")))
	twin.IdempotencyKey = "order-2"
	got = createResult(t, s, T0, again, fresh, twin)
	require.Equal(t, []store.CreatedRun{{ID: first.ID, Duplicate: true}, {ID: fresh.ID}, {ID: fresh.ID, Duplicate: true}}, got)
	for _, id := range []uuid.UUID{again.ID, twin.ID} {
		_, err := s.GetRun(ctx, id)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	}

	// Keys are per workflow and tenant.
	otherTenant := newRun("wf", "u", shape(step("a")))
	otherTenant.IdempotencyKey = "order-1"
	otherWf := newRun("wf2", "t", shape(step("a")))
	otherWf.IdempotencyKey = "order-1"
	got = createResult(t, s, T0, otherTenant, otherWf)
	require.False(t, got[0].Duplicate)
	require.False(t, got[1].Duplicate)
	claimed := claim(t, s, T0, 10, "wf", "wf2")
	require.Len(t, claimed, 4, "one task per created run")

	// Bad keys are refused and create nothing.
	for _, k := range []string{strings.Repeat("k", 256), "a\x00b", "\xff"} {
		bad := newRun("wf", "t", shape(step("a")))
		bad.IdempotencyKey = k
		_, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{bad}})
		require.ErrorIs(t, err, durabletype.ErrInvalidRun, "key %q", k)
	}

	// Concurrent creators of one key: exactly one run.
	var wg sync.WaitGroup
	results := make([]store.CreatedRun, 10)
	for i := range results {
		wg.Go(func() {
			nr := newRun("wf", "t", shape(step("a")))
			nr.IdempotencyKey = "race"
			res, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{nr}})
			if err != nil {
				t.Errorf("create %d: %v", i, err)
				return
			}
			results[i] = res.Runs[0]
		})
	}
	wg.Wait()
	created := 0
	for _, r := range results {
		require.Equal(t, results[0].ID, r.ID)
		if !r.Duplicate {
			created++
		}
	}
	require.Equal(t, 1, created, "%+v", results)

	// The key goes with the run: once pruned, it can be used again.
	claimed = append(claimed, claimOne(t, s, T0))
	for _, c := range claimed {
		mustApply(t, s, T0, complete(c, `1`))
	}
	pr, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: at(time.Hour), OlderThan: time.Minute, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, 5, pr.Deleted)
	reuse := newRun("wf", "t", shape(step("a")))
	reuse.IdempotencyKey = "order-1"
	require.Equal(t, []store.CreatedRun{{ID: reuse.ID}}, createResult(t, s, at(time.Hour), reuse))
}

func testRunIDDuplicate(t *testing.T, s store.Store) {
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, r)
	// The same ID, workflow and tenant: a duplicate, reported, not created.
	require.Equal(t, []store.CreatedRun{{ID: r.ID, Duplicate: true}}, createResult(t, s, T0, r))
	require.Len(t, claim(t, s, T0, 10), 1)
	// The same ID for another workflow: a conflict, and the batch fails.
	clash := newRun("wf2", "t", shape(step("a")))
	clash.ID = r.ID
	fresh := newRun("wf2", "t", shape(step("a")))
	_, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{fresh, clash}})
	require.ErrorIs(t, err, durabletype.ErrRunExists)
	_, err = s.GetRun(ctx, fresh.ID)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
}

func testDelayedStart(t *testing.T, s store.Store) {
	r := newRun("wf", "t", shape(step("a"), sleepStep("nap", time.Minute), step("b", "a")))
	r.StartAt = at(time.Hour)
	create(t, s, T0, r)
	tk := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskQueued, tk["a"].State)
	requireTime(t, at(time.Hour), tk["a"].DueAt)
	require.Equal(t, durabletype.TaskSleeping, tk["nap"].State)
	requireTime(t, at(time.Hour+time.Minute), tk["nap"].DueAt, "a sleep root sleeps from the start time")
	require.Equal(t, durabletype.RunRunning, run(t, s, r.ID).Status)
	require.Empty(t, claim(t, s, at(time.Hour), 10), "not claimable before its timer fires")

	fr, err := s.FireTimers(ctx, &store.FireTimersParams{Now: at(time.Minute), Limit: 10})
	require.NoError(t, err)
	require.Zero(t, fr.Fired)
	require.True(t, fr.HasNext)
	require.Equal(t, 59*time.Minute, fr.Next)

	require.Equal(t, 1, fireAll(t, s, at(time.Hour)))
	c := claimOne(t, s, at(time.Hour))
	require.Equal(t, "a", c.Step)
	require.Equal(t, 1, c.Attempt)
	require.Equal(t, []string{"QUEUED:0", "QUEUED:0", "STARTED:1"}, stepEvents(t, s, r.ID, "a"))

	// A start time in the past starts at once.
	now := newRun("wf", "t", shape(step("a")))
	now.StartAt = T0.Add(-time.Hour)
	create(t, s, T0, now)
	require.Len(t, claim(t, s, T0, 10), 1)
}

func timeoutStep(name string, timeout time.Duration, attempts int) durabletype.StepSpec {
	return durabletype.StepSpec{Name: name, Timeout: timeout, Retry: durabletype.RetryPolicy{MaxAttempts: attempts, Factor: 1}}
}

func testStepTimeout(t *testing.T, s store.Store) {
	r := newRun("wf", "t", shape(timeoutStep("slow", time.Minute, 2)))
	create(t, s, T0, r)
	c1 := claimOne(t, s, T0)
	require.Equal(t, time.Minute, c1.Timeout)
	tk := tasks(t, s, r.ID)["slow"]
	requireTime(t, at(time.Minute), tk.TimeoutAt)

	fr, err := s.FireTimers(ctx, &store.FireTimersParams{Now: at(time.Second), Limit: 10})
	require.NoError(t, err)
	require.Zero(t, fr.Fired)
	require.True(t, fr.HasNext, "the timeout is a timer")
	require.Equal(t, 59*time.Second, fr.Next)

	// The step ignores its context: the timer fails the attempt, which is
	// retried; the late outcome of the first claim is stale.
	require.Equal(t, 1, fireAll(t, s, at(time.Minute)))
	tk = tasks(t, s, r.ID)["slow"]
	require.Equal(t, durabletype.TaskQueued, tk.State)
	require.True(t, tk.TimeoutAt.IsZero())
	require.Contains(t, tk.Error, "timed out")
	hb, err := s.Heartbeat(ctx, &store.HeartbeatParams{Now: at(time.Minute), WorkerID: worker, Tasks: []store.TaskRef{c1.Ref()}})
	require.NoError(t, err)
	require.Equal(t, []store.TaskRef{c1.Ref()}, hb.Lost, "its worker learns the claim is lost")
	require.Equal(t, []store.TaskRef{c1.Ref()}, hb.TimedOut, "to a timeout")
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, at(time.Minute), complete(c1, `"late"`)))

	// The second attempt completes in time.
	c2 := claimOne(t, s, at(time.Minute))
	require.Equal(t, 2, c2.Attempt)
	mustApply(t, s, at(time.Minute+time.Second), complete(c2, `"ok"`))
	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunCompleted, got.Status)
	require.True(t, tasks(t, s, r.ID)["slow"].TimeoutAt.IsZero())
	fr, err = s.FireTimers(ctx, &store.FireTimersParams{Now: at(time.Hour), Limit: 10})
	require.NoError(t, err)
	require.False(t, fr.HasNext, "no timer is left")
}

func testStepTimeoutLateOutcome(t *testing.T, s store.Store) {
	// An outcome that arrives after the timeout, before the leader fired it,
	// is a failed attempt: never a completion.
	r := newRun("wf", "t", shape(timeoutStep("slow", time.Minute, 1)))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	mustApply(t, s, at(2*time.Minute), complete(c, `"late"`))
	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunFailed, got.Status)
	require.Equal(t, "slow", got.FailedStep)
	require.Contains(t, got.Error, "timed out")
	require.Nil(t, tasks(t, s, r.ID)["slow"].Output)
	require.Zero(t, fireAll(t, s, at(time.Hour)), "the timer went with the attempt")
}

func testQueueTimeout(t *testing.T, s store.Store) {
	sh := shape(durabletype.StepSpec{Name: "a", QueueTimeout: time.Minute, Retry: durabletype.RetryPolicy{MaxAttempts: 3, Factor: 1}},
		durabletype.StepSpec{Name: "b", Parents: []string{"a"}, QueueTimeout: time.Minute, Retry: once()})
	late := newRun("wf", "t", sh)
	prompt := newRun("wf", "t", sh)
	create(t, s, T0, late)
	create(t, s, at(30*time.Second), prompt)
	requireTime(t, at(time.Minute), tasks(t, s, late.ID)["a"].TimeoutAt)

	// Nobody claims late's "a" within a minute: the step fails for good.
	require.Equal(t, 1, fireAll(t, s, at(time.Minute)))
	got := run(t, s, late.ID)
	require.Equal(t, durabletype.RunFailed, got.Status)
	require.Equal(t, "a", got.FailedStep)
	require.Contains(t, got.Error, "queue timeout")
	require.Equal(t, durabletype.TaskCancelled, tasks(t, s, late.ID)["b"].State)

	// prompt's "a" is claimed in time: its queue timeout goes with the
	// claim, and "b" gets its own when it becomes ready.
	c := claimOne(t, s, at(time.Minute))
	require.Equal(t, prompt.ID, c.RunID)
	require.True(t, tasks(t, s, prompt.ID)["a"].TimeoutAt.IsZero())
	mustApply(t, s, at(2*time.Minute), complete(c, `1`))
	requireTime(t, at(3*time.Minute), tasks(t, s, prompt.ID)["b"].TimeoutAt)
	cb := claimOne(t, s, at(2*time.Minute+time.Second))
	mustApply(t, s, at(2*time.Minute+time.Second), complete(cb, `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, prompt.ID).Status)
	require.Zero(t, fireAll(t, s, at(time.Hour)))
}

func testRunDeadline(t *testing.T, s store.Store) {
	sh := shape(step("a"), step("b"), sleepStep("nap", time.Hour), step("c", "a"))
	sh.OnFailure = &durabletype.OnFailureSpec{Retry: once()}
	r := newRun("wf", "t", sh)
	r.Deadline = at(10 * time.Minute)
	create(t, s, T0, r)
	requireTime(t, at(10*time.Minute), run(t, s, r.ID).Deadline)
	ca := claimOne(t, s, T0)
	mustApply(t, s, T0, complete(ca, `1`))
	running := claim(t, s, T0, 1) // "b" runs past the deadline
	require.Len(t, running, 1)

	fr, err := s.FireTimers(ctx, &store.FireTimersParams{Now: at(time.Minute), Limit: 10})
	require.NoError(t, err)
	require.True(t, fr.HasNext)
	require.Equal(t, 9*time.Minute, fr.Next, "the deadline is the next timer")

	require.Equal(t, 1, fireAll(t, s, at(10*time.Minute)))
	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunFailed, got.Status)
	require.Equal(t, "run deadline exceeded", got.Error)
	require.Empty(t, got.FailedStep)
	st := states(t, s, r.ID)
	require.Equal(t, durabletype.TaskCompleted, st["a"])
	require.Equal(t, durabletype.TaskCancelled, st["b"])
	require.Equal(t, durabletype.TaskCancelled, st["nap"])
	require.Equal(t, durabletype.TaskCancelled, st["c"])
	require.Equal(t, durabletype.TaskQueued, st[durabletype.OnFailureTask])

	// The running step's claim is lost; its late outcome is stale.
	hb, err := s.Heartbeat(ctx, &store.HeartbeatParams{Now: at(10 * time.Minute), WorkerID: worker, Tasks: []store.TaskRef{running[0].Ref()}})
	require.NoError(t, err)
	require.Len(t, hb.Lost, 1)
	require.Equal(t, []store.TaskRef{running[0].Ref()}, hb.Cancelled, "lost to the run giving it up")
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, at(10*time.Minute), complete(running[0], `1`)))

	// The on-failure handler runs and the run settles; no timer is left.
	h := claimOne(t, s, at(10*time.Minute))
	require.Equal(t, durabletype.OnFailureTask, h.Step)
	require.Equal(t, "run deadline exceeded", h.Error)
	mustApply(t, s, at(11*time.Minute), complete(h, `1`))
	got = run(t, s, r.ID)
	require.True(t, got.Settled())
	require.True(t, got.Deadline.IsZero(), "cleared once settled")
	require.Zero(t, fireAll(t, s, at(24*time.Hour)))

	// A run that settles before its deadline is left alone.
	quick := newRun("wf", "t", shape(step("a")))
	quick.Deadline = at(time.Hour)
	create(t, s, at(time.Hour-time.Minute), quick)
	mustApply(t, s, at(time.Hour-time.Minute), complete(claimOne(t, s, at(time.Hour-time.Minute)), `1`))
	require.Zero(t, fireAll(t, s, at(2*time.Hour)))
	require.Equal(t, durabletype.RunCompleted, run(t, s, quick.ID).Status)
}

func prioRun(tenant string, priority int) store.NewRun {
	r := newRun("wf", tenant, shape(step("a")))
	r.Priority = priority
	r.Input = []byte(`"` + tenant + `"`)
	return r
}

func testPriority(t *testing.T, s store.Store) {
	// One tenant enqueues normal runs, then higher ones: the higher are
	// claimed first, highest first; runs of one priority in order.
	var ids []uuid.UUID
	for _, p := range []int{0, 0, 0, 2, 1, 3, 2} {
		r := prioRun("t", p)
		create(t, s, T0, r)
		ids = append(ids, r.ID)
	}
	var order []uuid.UUID
	for range ids {
		order = append(order, claimOne(t, s, T0).RunID)
	}
	require.Equal(t, ids[5], order[0], "priority 3 first")
	require.ElementsMatch(t, []uuid.UUID{ids[3], ids[6]}, order[1:3], "then priority 2")
	require.Equal(t, ids[4], order[3], "then priority 1")
	require.ElementsMatch(t, ids[0:3], order[4:], "then the normal ones")

	bad := prioRun("t", store.PriorityMax+1)
	_, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{bad}})
	require.ErrorIs(t, err, durabletype.ErrInvalidRun)
	bad.Priority = -1
	_, err = s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{bad}})
	require.ErrorIs(t, err, durabletype.ErrInvalidRun)
}

func testPriorityOrder(t *testing.T, s store.Store) {
	// The full order of a tenant's runs by the rule of priorities
	// (fairq.Displace): 4 normal runs, then a high one; claimed one at a
	// time, the high one takes the first slot and the normal run it
	// displaces takes the high one's, last: h, n2, n3, n4, n1. Claimed in
	// one call, the same order.
	for _, limit := range []int{1, 5} {
		var ids []uuid.UUID
		tenant := fmt.Sprintf("order-%d", limit)
		for _, p := range []int{0, 0, 0, 0, 2} {
			r := prioRun(tenant, p)
			create(t, s, T0, r)
			ids = append(ids, r.ID)
		}
		var order []uuid.UUID
		for len(order) < len(ids) {
			got := claim(t, s, T0, limit)
			require.NotEmpty(t, got, "claimed %d of %d", len(order), len(ids))
			for _, c := range got {
				order = append(order, c.RunID)
				mustApply(t, s, T0, complete(c, `1`))
			}
		}
		require.Equal(t, []uuid.UUID{ids[4], ids[1], ids[2], ids[3], ids[0]}, order, "claims of %d", limit)
	}

	// Two levels: n1 n2 a(1) b(2) c(1): b takes n1's slot, a n2's; n2,
	// displaced to a's slot, is displaced again by c: b, a, c, n1, n2.
	var ids []uuid.UUID
	for _, p := range []int{0, 0, 1, 2, 1} {
		r := prioRun("levels", p)
		create(t, s, T0, r)
		ids = append(ids, r.ID)
	}
	var order []uuid.UUID
	for range ids {
		c := claimOne(t, s, T0)
		order = append(order, c.RunID)
		mustApply(t, s, T0, complete(c, `1`))
	}
	require.Equal(t, []uuid.UUID{ids[3], ids[2], ids[4], ids[0], ids[1]}, order)

	// The same when the store knows of priorities before the claim (a
	// claim has seen one still queued) and claims many at once.
	create(t, s, T0, prioRun("warm", 1), prioRun("warm", 1))
	mustApply(t, s, T0, complete(claimOne(t, s, T0), `1`))
	ids = nil
	for _, p := range []int{0, 0, 0, 0, 2} {
		r := prioRun("deep", p)
		create(t, s, T0, r)
		ids = append(ids, r.ID)
	}
	order = nil
	for range 10 {
		for _, c := range claim(t, s, T0, 10) {
			if c.Tenant == "deep" {
				order = append(order, c.RunID)
			}
			mustApply(t, s, T0, complete(c, `1`))
		}
	}
	require.Equal(t, []uuid.UUID{ids[4], ids[1], ids[2], ids[3], ids[0]}, order)
}

func testPriorityKeepsFairness(t *testing.T, s store.Store) {
	// A has a backlog of normal runs and then of urgent ones; B a backlog
	// of normal runs. Claims alternate between the tenants as without
	// priorities, and A's urgent runs go first among A's.
	var runs []store.NewRun
	for range 20 {
		runs = append(runs, prioRun("A", 0))
	}
	for range 20 {
		runs = append(runs, prioRun("B", 0))
	}
	create(t, s, T0, runs...)
	var urgent []store.NewRun
	for range 10 {
		urgent = append(urgent, prioRun("A", 3))
	}
	create(t, s, T0, urgent...)
	isUrgent := map[uuid.UUID]bool{}
	for _, r := range urgent {
		isUrgent[r.ID] = true
	}
	counts := map[string]int{}
	var aOrder []bool
	for range 10 {
		for _, c := range claim(t, s, T0, 4) {
			counts[c.Tenant]++
			if c.Tenant == "A" {
				aOrder = append(aOrder, isUrgent[c.RunID])
			}
		}
	}
	require.Equal(t, map[string]int{"A": 20, "B": 20}, counts, "fair shares")
	for i, u := range aOrder {
		require.Equal(t, i < 10, u, "A's claim %d: urgent ones first: %v", i, aOrder)
	}
}

func testFlowWithConcurrencyKeys(t *testing.T, s store.Store) {
	// A parked task (its key's only slot is held) times out in the queue:
	// it fails its run and leaves the key's FIFO; the next one behind it is
	// promoted when the slot frees, with its priority.
	sh := shape(durabletype.StepSpec{Name: "a", Concurrency: 1, QueueTimeout: time.Minute, Retry: once()})
	holder := keyedRun(sh, "k", "")
	parked := keyedRun(sh, "k", "")
	next := keyedRun(sh, "k", "")
	next.Priority = 2
	create(t, s, T0, holder)
	running := claimOne(t, s, T0)
	require.Equal(t, holder.ID, running.RunID)
	create(t, s, at(30*time.Second), parked)
	create(t, s, at(90*time.Second), next)
	require.Empty(t, claim(t, s, at(90*time.Second), 10), "the key's slot is held")

	require.Equal(t, 1, fireAll(t, s, at(90*time.Second)), "parked's queue timeout")
	got := run(t, s, parked.ID)
	require.Equal(t, durabletype.RunFailed, got.Status)
	require.Contains(t, got.Error, "queue timeout")

	mustApply(t, s, at(100*time.Second), complete(running, `1`))
	c := claimOne(t, s, at(100*time.Second))
	require.Equal(t, next.ID, c.RunID, "promoted behind the timed-out one")
	mustApply(t, s, at(100*time.Second), complete(c, `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, next.ID).Status)

	// A delayed start of a keyed run takes its slot when it starts, not
	// before.
	later := keyedRun(sh, "k2", "")
	later.StartAt = at(time.Hour)
	now := keyedRun(sh, "k2", "")
	create(t, s, at(2*time.Minute), later, now)
	c = claimOne(t, s, at(2*time.Minute))
	require.Equal(t, now.ID, c.RunID, "the delayed run holds no slot while it waits")
	mustApply(t, s, at(3*time.Minute), complete(c, `1`))
	require.Equal(t, 1, fireAll(t, s, at(time.Hour)))
	c = claimOne(t, s, at(time.Hour))
	require.Equal(t, later.ID, c.RunID)
}
