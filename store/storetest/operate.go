package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Tests of what operators do with runs: list, cancel, replay, stats and
// prune, including the races between them and the engine's transitions.

func listAll(t *testing.T, s store.Store, f store.RunFilter, page int) []durabletype.RunSummary {
	t.Helper()
	var out []durabletype.RunSummary
	var after *store.RunKey
	for {
		res, err := s.ListRuns(ctx, &store.ListRunsParams{Filter: f, After: after, Limit: page})
		require.NoError(t, err)
		require.LessOrEqual(t, len(res.Runs), page)
		out = append(out, res.Runs...)
		if !res.More {
			return out
		}
		require.NotEmpty(t, res.Runs, "More without runs")
		last := res.Runs[len(res.Runs)-1]
		after = &store.RunKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

func ids(rs []durabletype.RunSummary) []uuid.UUID {
	out := make([]uuid.UUID, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func cancelOne(t *testing.T, s store.Store, now time.Time, id uuid.UUID, tenant string) error {
	t.Helper()
	res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionCancel, Now: now, IDs: []uuid.UUID{id}, Tenant: tenant, Reason: "test"})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, id, res[0].ID)
	return res[0].Err
}

func replayOne(t *testing.T, s store.Store, now time.Time, id uuid.UUID, tenant, from string) error {
	t.Helper()
	res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionReplay, Now: now, IDs: []uuid.UUID{id}, Tenant: tenant, FromStep: from})
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[0].Err
}

// testListRuns: newest first, keyset pages that neither repeat nor skip,
// every filter, and the summary of a failed run.
func testListRuns(t *testing.T, s store.Store) {
	type made struct {
		id                 uuid.UUID
		wf, tenant         string
		created            time.Time
		status             durabletype.RunStatus
		finished           time.Time
		failedStep, errMsg string
	}
	var all []made
	for i := range 30 {
		wf, tenant := "wf", fmt.Sprintf("t%d", i%3)
		if i%4 == 0 {
			wf = "other"
		}
		created := at(time.Duration(i/2) * time.Second) // pairs share a creation time: ties go by ID
		r := newRun(wf, tenant, shape(step("a")))
		create(t, s, created, r)
		all = append(all, made{id: r.ID, wf: wf, tenant: tenant, created: created, status: durabletype.RunRunning})
	}
	// Settle some: every third completes, every fifth fails.
	for i := range all {
		m := &all[i]
		if i%3 != 0 && i%5 != 0 {
			continue
		}
		cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: T0, WorkerID: worker, Limit: 100, Workflows: []string{"wf", "other"}})
		require.NoError(t, err)
		var c *store.ClaimedTask
		for _, x := range cs {
			if x.RunID == m.id {
				c = x
			} else {
				mustApply(t, s, T0, store.Outcome{Task: x.Ref(), Kind: store.OutcomeRelease})
			}
		}
		require.NotNil(t, c)
		m.finished = at(time.Hour + time.Duration(i)*time.Second)
		if i%5 == 0 {
			mustApply(t, s, m.finished, failed(c, "boom", true))
			m.status, m.failedStep, m.errMsg = durabletype.RunFailed, "a", "boom"
		} else {
			mustApply(t, s, m.finished, complete(c, `1`))
			m.status = durabletype.RunCompleted
		}
	}
	want := func(keep func(m made) bool) []uuid.UUID {
		var ms []made
		for _, m := range all {
			if keep(m) {
				ms = append(ms, m)
			}
		}
		slices.SortFunc(ms, func(a, b made) int {
			if c := b.created.Compare(a.created); c != 0 {
				return c
			}
			return slices.Compare(b.id[:], a.id[:])
		})
		out := []uuid.UUID{}
		for _, m := range ms {
			out = append(out, m.id)
		}
		return out
	}
	for _, page := range []int{1, 4, 7, 100} {
		got := listAll(t, s, store.RunFilter{}, page)
		require.Equal(t, want(func(made) bool { return true }), ids(got), "page size %d", page)
	}
	byID := map[uuid.UUID]made{}
	for _, m := range all {
		byID[m.id] = m
	}
	for _, r := range listAll(t, s, store.RunFilter{}, 10) {
		m := byID[r.ID]
		require.Equal(t, m.wf, r.Workflow)
		require.Equal(t, m.tenant, r.Tenant)
		require.Equal(t, m.status, r.Status)
		requireTime(t, m.created, r.CreatedAt)
		require.Equal(t, m.finished.IsZero(), r.FinishedAt.IsZero())
		if !m.finished.IsZero() {
			requireTime(t, m.finished, r.FinishedAt)
		}
		require.Equal(t, m.failedStep, r.FailedStep)
		require.Equal(t, m.errMsg, r.Error)
	}
	filters := []struct {
		f    store.RunFilter
		keep func(m made) bool
	}{
		{store.RunFilter{Tenant: "t1"}, func(m made) bool { return m.tenant == "t1" }},
		{store.RunFilter{Workflow: "other"}, func(m made) bool { return m.wf == "other" }},
		{store.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunFailed}}, func(m made) bool { return m.status == durabletype.RunFailed }},
		{store.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunRunning, durabletype.RunCompleted}, Tenant: "t0"},
			func(m made) bool { return m.tenant == "t0" && m.status != durabletype.RunFailed }},
		{store.RunFilter{CreatedAfter: at(3 * time.Second), CreatedBefore: at(9 * time.Second)},
			func(m made) bool { return !m.created.Before(at(3*time.Second)) && m.created.Before(at(9*time.Second)) }},
		{store.RunFilter{FinishedAfter: at(time.Hour + 10*time.Second)},
			func(m made) bool { return !m.finished.IsZero() && !m.finished.Before(at(time.Hour+10*time.Second)) }},
		{store.RunFilter{FinishedBefore: at(time.Hour + 10*time.Second)},
			func(m made) bool { return !m.finished.IsZero() && m.finished.Before(at(time.Hour+10*time.Second)) }},
	}
	for i, tc := range filters {
		require.Equal(t, want(tc.keep), ids(listAll(t, s, tc.f, 3)), "filter %d: %+v", i, tc.f)
	}
	res, err := s.ListRuns(ctx, &store.ListRunsParams{Filter: store.RunFilter{Tenant: "nobody"}, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, res.Runs)
	require.False(t, res.More)
}

// testListWhileSettling: pages listed while the runs settle still hold each
// run exactly once.
func testListWhileSettling(t *testing.T, s store.Store) {
	var runs []store.NewRun
	for range 200 {
		runs = append(runs, newRun("wf", "t", shape(step("a"))))
	}
	create(t, s, T0, runs...)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: T0, WorkerID: worker, Limit: 17, Workflows: []string{"wf"}})
			if err != nil || len(cs) == 0 {
				return
			}
			outs := make([]store.Outcome, len(cs))
			for i, c := range cs {
				outs[i] = complete(c, `1`)
			}
			if _, err := s.FinishTasks(ctx, &store.FinishTasksParams{Now: T0, Outcomes: outs}); err != nil {
				return
			}
		}
	}()
	got := listAll(t, s, store.RunFilter{}, 9)
	<-done
	require.Len(t, got, 200)
	seen := map[uuid.UUID]bool{}
	for _, r := range got {
		require.False(t, seen[r.ID], "run %s listed twice", r.ID)
		seen[r.ID] = true
	}
	require.Len(t, listAll(t, s, store.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunCompleted}}, 50), 200)
}

// testCancel: every kind of unfinished task is cancelled, timers never
// fire, the running claim is lost (as cancelled) and its late outcome is
// rejected; the on-failure handler does not run; cancelling again, or an
// unknown run, or another tenant's run, is refused.
func testCancel(t *testing.T, s store.Store) {
	sh := &durabletype.Shape{
		Steps: []durabletype.StepSpec{
			step("run"), step("queued"), sleepStep("nap", time.Hour),
			{Name: "backoff", Retry: durabletype.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Minute, Factor: 1}},
			step("after", "run", "queued"),
		},
		OnFailure: &durabletype.OnFailureSpec{Retry: once()},
	}
	r := newRun("wf", "acme", sh)
	create(t, s, T0, r)
	cs := claim(t, s, T0, 10)
	var running *store.ClaimedTask
	for _, c := range cs {
		switch c.Step {
		case "run":
			running = c
		case "backoff":
			mustApply(t, s, T0, failed(c, "later", false))
		default:
			mustApply(t, s, T0, store.Outcome{Task: c.Ref(), Kind: store.OutcomeRelease})
		}
	}
	require.NotNil(t, running)
	require.Equal(t, map[string]durabletype.TaskState{"run": durabletype.TaskRunning, "queued": durabletype.TaskQueued, "nap": durabletype.TaskSleeping,
		"backoff": durabletype.TaskQueued, "after": durabletype.TaskPending}, states(t, s, r.ID))

	require.ErrorIs(t, cancelOne(t, s, at(time.Second), r.ID, "other-tenant"), durabletype.ErrRunNotFound, "scoped to another tenant")
	require.Equal(t, durabletype.RunRunning, run(t, s, r.ID).Status, "nothing changed")
	require.ErrorIs(t, cancelOne(t, s, at(time.Second), uuid.New(), ""), durabletype.ErrRunNotFound)

	require.NoError(t, cancelOne(t, s, at(2*time.Second), r.ID, "acme"))
	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunCancelled, got.Status)
	require.Equal(t, "test", got.Error)
	requireTime(t, at(2*time.Second), got.FinishedAt, "a cancelled run settles at once")
	for name, st := range states(t, s, r.ID) {
		require.Equal(t, durabletype.TaskCancelled, st, name)
	}
	require.Empty(t, claim(t, s, at(time.Hour), 10), "nothing is left to claim")
	require.Zero(t, fireAll(t, s, at(2*time.Hour)), "no timer fires")
	hb, err := s.Heartbeat(ctx, &store.HeartbeatParams{Now: at(3 * time.Second), WorkerID: worker, Tasks: []store.TaskRef{running.Ref()}})
	require.NoError(t, err)
	require.Equal(t, []store.TaskRef{running.Ref()}, hb.Lost)
	require.Equal(t, []store.TaskRef{running.Ref()}, hb.Cancelled, "the worker learns the run was cancelled")
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, at(4*time.Second), complete(running, `"late"`)))
	require.Nil(t, tasks(t, s, r.ID)["run"].Output, "the late outcome is not recorded")
	require.ErrorIs(t, cancelOne(t, s, at(5*time.Second), r.ID, ""), durabletype.ErrRunSettled)
	require.Equal(t, []string{"QUEUED:0", "STARTED:1", "CANCELLED:1"}, stepEvents(t, s, r.ID, "run"))
	require.Equal(t, []string{"SLEEPING:0", "CANCELLED:0"}, stepEvents(t, s, r.ID, "nap"))
	res, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: at(time.Hour), DeadAfter: time.Second, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, res.Rescued, "a cancelled task is not rescued")

	// A run that failed and whose handler waits is not settled: it can be
	// cancelled, and its handler is cancelled too.
	r2 := newRun("wf", "acme", sh)
	create(t, s, T0, r2)
	for _, c := range claim(t, s, T0, 10) {
		if c.RunID == r2.ID && c.Step == "run" {
			mustApply(t, s, T0, failed(c, "fatal", true))
		} else {
			mustApply(t, s, T0, store.Outcome{Task: c.Ref(), Kind: store.OutcomeRelease})
		}
	}
	require.Equal(t, durabletype.RunFailed, run(t, s, r2.ID).Status)
	require.Equal(t, durabletype.TaskQueued, states(t, s, r2.ID)[durabletype.OnFailureTask])
	require.NoError(t, cancelOne(t, s, T0, r2.ID, ""))
	require.Equal(t, durabletype.RunCancelled, run(t, s, r2.ID).Status)
	require.Equal(t, durabletype.TaskCancelled, states(t, s, r2.ID)[durabletype.OnFailureTask])
}

// testCancelRacesLastStep: a cancel and the outcome of a run's last step,
// at once: exactly one wins, and the run ends consistent.
func testCancelRacesLastStep(t *testing.T, s store.Store) {
	for range 30 {
		r := newRun("wf", "t", shape(step("a")))
		create(t, s, T0, r)
		c := claimOne(t, s, T0)
		var wg sync.WaitGroup
		var fin []store.FinishStatus
		var cancelErr error
		wg.Go(func() {
			res, err := s.FinishTasks(ctx, &store.FinishTasksParams{Now: T0, Outcomes: []store.Outcome{complete(c, `1`)}})
			if err == nil {
				fin = []store.FinishStatus{res[0].Status}
			}
		})
		wg.Go(func() {
			res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionCancel, Now: T0, IDs: []uuid.UUID{r.ID}})
			if err == nil {
				cancelErr = res[0].Err
			} else {
				cancelErr = err
			}
		})
		wg.Wait()
		require.Len(t, fin, 1)
		got := run(t, s, r.ID)
		switch got.Status {
		case durabletype.RunCompleted:
			require.Equal(t, store.FinishApplied, fin[0])
			require.ErrorIs(t, cancelErr, durabletype.ErrRunSettled)
			require.Equal(t, durabletype.TaskCompleted, states(t, s, r.ID)["a"])
		case durabletype.RunCancelled:
			require.NoError(t, cancelErr)
			require.Equal(t, store.FinishStale, fin[0])
			require.Equal(t, durabletype.TaskCancelled, states(t, s, r.ID)["a"])
		default:
			t.Fatalf("run ended %s", got.Status)
		}
		require.True(t, got.Settled())
	}
}

// testReplay: a failed run runs again from what failed; completed steps
// keep their outputs and are not run again; from a step, that step and its
// descendants run again; the refusals are typed.
func testReplay(t *testing.T, s store.Store) {
	// a -> b -> c; a -> d
	sh := &durabletype.Shape{
		Steps:     []durabletype.StepSpec{step("a"), step("b", "a"), step("c", "b"), step("d", "a")},
		OnFailure: &durabletype.OnFailureSpec{Retry: once()},
	}
	r := newRun("wf", "acme", sh)
	create(t, s, T0, r)
	mustApply(t, s, T0, complete(claimOne(t, s, T0), `"A"`))
	for _, c := range claim(t, s, T0, 10) {
		if c.Step == "b" {
			mustApply(t, s, T0, failed(c, "broken", true))
		} else {
			mustApply(t, s, T0, complete(c, `"D"`))
		}
	}
	h := claimOne(t, s, T0)
	require.Equal(t, durabletype.KindOnFailure, h.Kind)
	mustApply(t, s, T0, complete(h, `null`))
	require.True(t, run(t, s, r.ID).Settled())

	require.ErrorIs(t, replayOne(t, s, T0, r.ID, "other-tenant", ""), durabletype.ErrRunNotFound)
	require.ErrorIs(t, replayOne(t, s, T0, r.ID, "", "zz"), durabletype.ErrStepNotFound)
	require.ErrorIs(t, replayOne(t, s, T0, uuid.New(), "", ""), durabletype.ErrRunNotFound)
	require.NoError(t, replayOne(t, s, at(time.Minute), r.ID, "acme", ""))
	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunRunning, got.Status)
	require.Empty(t, got.Error)
	require.Empty(t, got.FailedStep)
	require.False(t, got.Settled())
	require.ErrorIs(t, replayOne(t, s, at(time.Minute), r.ID, "", ""), durabletype.ErrRunNotSettled)

	b := claimOne(t, s, at(time.Minute))
	require.Equal(t, "b", b.Step)
	require.Equal(t, 1, b.Attempt, "a fresh attempt count")
	require.Equal(t, map[string][]byte{"a": []byte(`"A"`)}, b.ParentOutputs, "a's output is kept")
	require.Empty(t, claim(t, s, at(time.Minute), 10), "a and d, completed, do not run again")
	mustApply(t, s, at(time.Minute), complete(b, `"B"`))
	c := claimOne(t, s, at(time.Minute))
	require.Equal(t, "c", c.Step)
	mustApply(t, s, at(2*time.Minute), complete(c, `"C"`))
	got = run(t, s, r.ID)
	require.Equal(t, durabletype.RunCompleted, got.Status)
	requireTime(t, at(2*time.Minute), got.FinishedAt)
	require.Equal(t, []string{"QUEUED:0", "STARTED:1", "FAILED:1", "REPLAYED:1", "QUEUED:0", "STARTED:1", "COMPLETED:1"},
		stepEvents(t, s, r.ID, "b"))
	require.Equal(t, []string{"REPLAYED:0", "QUEUED:0", "STARTED:1", "COMPLETED:1"}, stepEvents(t, s, r.ID, "c")[1:],
		"c was cancelled when b failed, then runs")
	require.Equal(t, `"D"`, string(tasks(t, s, r.ID)["d"].Output))

	require.ErrorIs(t, replayOne(t, s, T0, r.ID, "", ""), durabletype.ErrNothingToReplay)
	// From a completed step: it and its descendants run again.
	require.NoError(t, replayOne(t, s, at(3*time.Minute), r.ID, "", "b"))
	require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskQueued, "c": durabletype.TaskPending,
		"d": durabletype.TaskCompleted, durabletype.OnFailureTask: durabletype.TaskCompleted}, states(t, s, r.ID))
	require.Nil(t, tasks(t, s, r.ID)["b"].Output)
	b = claimOne(t, s, at(3*time.Minute))
	mustApply(t, s, at(3*time.Minute), failed(b, "again", true))
	h = claimOne(t, s, at(3*time.Minute))
	require.Equal(t, durabletype.KindOnFailure, h.Kind, "the on-failure handler runs again after a new failure")
	require.Equal(t, 1, h.Attempt)
	require.Equal(t, "again", h.Error)
	mustApply(t, s, at(3*time.Minute), complete(h, `null`))
	require.Equal(t, durabletype.RunFailed, run(t, s, r.ID).Status)
	require.Equal(t, []string{"QUEUED:0", "STARTED:1", "COMPLETED:1", "QUEUED:0", "STARTED:1", "COMPLETED:1"},
		stepEvents(t, s, r.ID, durabletype.OnFailureTask))
}

// testReplaysRace: two replays of one run at once: one wins.
func testReplaysRace(t *testing.T, s store.Store) {
	for range 20 {
		r := newRun("wf", "t", shape(step("a")))
		create(t, s, T0, r)
		mustApply(t, s, T0, failed(claimOne(t, s, T0), "x", true))
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for k := range errs {
			wg.Go(func() {
				res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionReplay, Now: T0, IDs: []uuid.UUID{r.ID}})
				if err != nil {
					errs[k] = err
					return
				}
				errs[k] = res[0].Err
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else {
				require.ErrorIs(t, err, durabletype.ErrRunNotSettled)
			}
		}
		require.Equal(t, 1, won)
		require.Equal(t, []string{"QUEUED:0", "STARTED:1", "FAILED:1", "REPLAYED:1", "QUEUED:0"}, stepEvents(t, s, r.ID, "a"))
		mustApply(t, s, T0, complete(claimOne(t, s, T0), `1`))
	}
}

// testReplayWithLateOutcome: a run cancelled while a step ran is replayed;
// the old attempt's outcome, arriving after, is rejected; the new one is
// recorded.
func testReplayWithLateOutcome(t *testing.T, s store.Store) {
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, r)
	old := claimOne(t, s, T0)
	require.NoError(t, cancelOne(t, s, T0, r.ID, ""))
	require.NoError(t, replayOne(t, s, T0, r.ID, "", ""))
	fresh := claimOne(t, s, T0)
	require.NotEqual(t, old.Token, fresh.Token)
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, T0, complete(old, `"old"`)))
	mustApply(t, s, T0, complete(fresh, `"new"`))
	require.Equal(t, `"new"`, string(tasks(t, s, r.ID)["a"].Output))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
}

// testPrune: settled runs that finished before the cutoff go, with their
// tasks and events, in batches of at most Limit; nothing else does.
func testPrune(t *testing.T, s store.Store) {
	var old, recent, inflight []uuid.UUID
	for i := range 7 {
		r := newRun("wf", "t", shape(step("a")))
		create(t, s, T0, r)
		mustApply(t, s, at(time.Duration(i)*time.Second), complete(claimOne(t, s, T0), `1`))
		old = append(old, r.ID)
	}
	for range 2 {
		r := newRun("wf", "t", shape(step("a")))
		create(t, s, T0, r)
		mustApply(t, s, at(time.Hour), failed(claimOne(t, s, T0), "x", true))
		recent = append(recent, r.ID)
	}
	r := newRun("wf", "t", shape(step("a"), sleepStep("nap", time.Hour, "a")))
	create(t, s, T0, r)
	mustApply(t, s, T0, complete(claimOne(t, s, T0), `1`))
	inflight = append(inflight, r.ID)

	// At 2h, runs that settled more than 1h59m ago: the first seven.
	prune := func(limit int) *store.PruneRunsResult {
		t.Helper()
		res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: at(2 * time.Hour), OlderThan: 2*time.Hour - time.Minute, Limit: limit})
		require.NoError(t, err)
		return res
	}
	require.Equal(t, 3, prune(3).Deleted)
	require.Equal(t, 3, prune(3).Deleted)
	res := prune(3)
	require.Equal(t, 1, res.Deleted, "fewer than Limit: none is left")
	for _, id := range old {
		_, err := s.GetRun(ctx, id)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
		_, err = s.ListTasks(ctx, id)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
		_, err = s.ListEvents(ctx, id)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	}
	for _, id := range append(recent, inflight...) {
		_, err := s.GetRun(ctx, id)
		require.NoError(t, err)
	}
	res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: at(365 * 24 * time.Hour), OlderThan: time.Hour, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, 2, res.Deleted, "a run in flight is never pruned, however old")
	_, err = s.GetRun(ctx, inflight[0])
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{inflight[0]}, ids(listAll(t, s, store.RunFilter{}, 10)))
}

// testPruneFinishedBeforeCreated: a run is pruned once it was both
// created and settled before the cutoff (dag.Expired). The two differ only
// when clocks disagree: a run created by an engine whose clock runs ahead
// and cancelled by one whose clock runs behind settles before it was
// created; it is kept until the cutoff passes its creation too. (memstore
// pruned it by its settlement alone, pgstore, which finds runs by creation
// time, kept it.)
func testPruneFinishedBeforeCreated(t *testing.T, s store.Store) {
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, at(2*time.Hour), r)
	require.NoError(t, cancelOne(t, s, T0, r.ID, ""))
	rec := run(t, s, r.ID)
	require.True(t, rec.Settled())
	requireTime(t, T0, rec.FinishedAt)
	prune := func(now time.Time) int {
		t.Helper()
		res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: now, OlderThan: time.Hour, Limit: 10})
		require.NoError(t, err)
		return res.Deleted
	}
	require.Zero(t, prune(at(3*time.Hour)), "settled before the cutoff, created after it: kept")
	run(t, s, r.ID)
	require.Equal(t, 1, prune(at(3*time.Hour+time.Second)), "created and settled before the cutoff: pruned")
	_, err := s.GetRun(ctx, r.ID)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
}

// testPruneLazy: the leader's retention (PruneRunsParams.Lazy) may keep a
// settled run past the cutoff, by at most a quarter of OlderThan, to delete
// whole periods (pgstore drops its partitions), but never deletes a run in
// flight or settled after the cutoff, and a run it keeps stays whole: a
// run in flight when its period goes still completes. Runs with
// time-ordered ids (the engine's) and others (a caller's UUIDv4) alike.
func testPruneLazy(t *testing.T, s store.Store) {
	prune := func(now time.Time) int {
		t.Helper()
		res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: now, OlderThan: time.Hour, Limit: 100, Lazy: true})
		require.NoError(t, err)
		return res.Deleted
	}
	require.Zero(t, prune(T0), "nothing to delete (a store may prepare its periods)")
	mk := func(timeOrdered bool) store.NewRun {
		r := newRun("wf", "t", shape(step("a")))
		if timeOrdered {
			r.ID = dag.TimeOrderedID(r.ID, at(time.Minute))
		}
		return r
	}
	done, flying, legacy := mk(true), mk(true), mk(false)
	create(t, s, at(time.Minute), done, flying, legacy)
	var flyingClaim *store.ClaimedTask
	for range 3 {
		c := claimOne(t, s, at(2*time.Minute))
		if c.RunID == flying.ID {
			flyingClaim = c
			continue
		}
		mustApply(t, s, at(2*time.Minute), complete(c, `1`))
	}
	require.NotNil(t, flyingClaim)

	// An hour after they settled, nothing has passed the cutoff long enough.
	prune(at(time.Hour + 2*time.Minute))
	for _, id := range []uuid.UUID{done.ID, flying.ID, legacy.ID} {
		run(t, s, id)
	}
	// A quarter of the retention later, the settled runs are gone.
	require.Equal(t, 2, prune(at(time.Hour+2*time.Minute+16*time.Minute)))
	for _, id := range []uuid.UUID{done.ID, legacy.ID} {
		_, err := s.GetRun(ctx, id)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	}
	require.Equal(t, durabletype.RunRunning, run(t, s, flying.ID).Status, "a run in flight is kept")
	mustApply(t, s, at(2*time.Hour), complete(flyingClaim, `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, flying.ID).Status)
	tasks, err := s.ListTasks(ctx, flying.ID)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Zero(t, prune(at(2*time.Hour+time.Minute)), "settled a minute ago")
	require.Equal(t, 1, prune(at(4*time.Hour)))
}

// testPruneRacesReplay: a prune and a replay of the same expired run at
// once: either the run is gone and the replay finds nothing, or it runs
// again and stays.
func testPruneRacesReplay(t *testing.T, s store.Store) {
	for range 20 {
		r := newRun("wf", "t", shape(step("a")))
		create(t, s, T0, r)
		mustApply(t, s, T0, failed(claimOne(t, s, T0), "x", true))
		var wg sync.WaitGroup
		var replayErr error
		var pruned int
		wg.Go(func() {
			res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionReplay, Now: at(time.Hour), IDs: []uuid.UUID{r.ID}})
			if err != nil {
				replayErr = err
				return
			}
			replayErr = res[0].Err
		})
		wg.Go(func() {
			res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: at(time.Minute), OlderThan: 0, Limit: 10})
			if err == nil {
				pruned = res.Deleted
			}
		})
		wg.Wait()
		_, getErr := s.GetRun(ctx, r.ID)
		if pruned == 1 {
			require.ErrorIs(t, replayErr, durabletype.ErrRunNotFound)
			require.ErrorIs(t, getErr, durabletype.ErrRunNotFound)
			continue
		}
		require.Zero(t, pruned)
		require.NoError(t, replayErr)
		require.NoError(t, getErr)
		require.Equal(t, durabletype.RunRunning, run(t, s, r.ID).Status)
		mustApply(t, s, at(time.Hour), complete(claimOne(t, s, at(time.Hour)), `1`))
	}
}

// testStats: tasks ready, waiting and running, the oldest ready task, runs
// in flight and settled, by workflow and tenant, and scoped to a tenant.
func testStats(t *testing.T, s store.Store) {
	flaky := durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Hour, Factor: 1}}
	create(t, s, at(time.Second), newRun("wf", "t1", shape(step("a"))), newRun("wf", "t1", shape(step("a"))))
	create(t, s, at(2*time.Second), newRun("wf", "t2", shape(sleepStep("a", time.Hour))))
	create(t, s, at(3*time.Second), newRun("other", "t1", shape(flaky)), newRun("other", "t1", shape(step("a"))))
	for _, c := range claim(t, s, at(4*time.Second), 10, "other") {
		if c.Retry.MaxAttempts == 3 { // the flaky one waits out a backoff; the other stays running
			mustApply(t, s, at(4*time.Second), failed(c, "x", false))
		}
	}
	done := newRun("wf", "t2", shape(step("a")))
	create(t, s, at(5*time.Second), done)
	for _, c := range claim(t, s, at(5*time.Second), 10, "wf") {
		if c.RunID == done.ID {
			mustApply(t, s, at(6*time.Second), complete(c, `1`))
		} else {
			mustApply(t, s, at(5*time.Second), store.Outcome{Task: c.Ref(), Kind: store.OutcomeRelease})
		}
	}
	st, err := s.Stats(ctx, &store.StatsParams{Now: at(time.Minute), Window: time.Hour})
	require.NoError(t, err)
	q := map[string]durabletype.QueueStats{}
	for _, x := range st.Queues {
		q[x.Workflow+"/"+x.Tenant] = x
	}
	require.Equal(t, 2, q["wf/t1"].Ready)
	require.Zero(t, q["wf/t1"].Running)
	requireTime(t, at(5*time.Second), q["wf/t1"].OldestReady, "released at 5s")
	require.Equal(t, 1, q["wf/t2"].Waiting, "the sleep")
	require.Equal(t, 1, q["other/t1"].Waiting, "the backoff")
	require.Equal(t, 1, q["other/t1"].Running)
	require.Zero(t, q["other/t1"].Ready)
	require.True(t, q["other/t1"].OldestReady.IsZero())
	counts := map[string]int{}
	for _, c := range st.Runs {
		counts[fmt.Sprintf("%s/%s/%s/%v", c.Workflow, c.Tenant, c.Status, c.Settled)] += c.Count
	}
	require.Equal(t, map[string]int{
		"wf/t1/RUNNING/false": 2, "wf/t2/RUNNING/false": 1, "other/t1/RUNNING/false": 2, "wf/t2/COMPLETED/true": 1,
	}, counts)

	scoped, err := s.Stats(ctx, &store.StatsParams{Now: at(time.Minute), Window: time.Hour, Tenant: "t2"})
	require.NoError(t, err)
	for _, x := range scoped.Queues {
		require.Equal(t, "t2", x.Tenant)
	}
	for _, c := range scoped.Runs {
		require.Equal(t, "t2", c.Tenant)
	}
	require.Len(t, scoped.Runs, 2)
	outside, err := s.Stats(ctx, &store.StatsParams{Now: at(10 * time.Hour), Window: time.Hour})
	require.NoError(t, err)
	for _, c := range outside.Runs {
		require.False(t, c.Settled, "a settled run created before the window is not counted: %+v", c)
	}
}

// testStatsCounts: runs in flight are counted by their status (a failed run
// whose handler still waits is in flight, FAILED); settled runs by the
// minute they settled in, the window starting at the beginning of its first
// minute; a replayed run is counted under its current status only (out of
// FAILED when replayed, in again when it settles again); a cancelled run is
// counted CANCELLED; once a prune finds nothing more to
// delete, the counts of minutes before its cutoff are gone too.
func testStatsCounts(t *testing.T, s store.Store) {
	base := T0.Truncate(time.Hour).Add(time.Hour) // a whole hour: minutes are whole
	m := func(minutes int, seconds int) time.Time {
		return base.Add(time.Duration(minutes)*time.Minute + time.Duration(seconds)*time.Second)
	}
	counts := func(now time.Time, window time.Duration, tenant string) map[string]int {
		t.Helper()
		st, err := s.Stats(ctx, &store.StatsParams{Now: now, Window: window, Tenant: tenant})
		require.NoError(t, err)
		out := map[string]int{}
		for _, c := range st.Runs {
			k := fmt.Sprintf("%s/%s/%s/%v", c.Workflow, c.Tenant, c.Status, c.Settled)
			require.NotContains(t, out, k, "one entry per workflow, tenant, status and settledness")
			out[k] = c.Count
		}
		for i := 1; i < len(st.Runs); i++ {
			a, b := st.Runs[i-1], st.Runs[i]
			require.LessOrEqual(t, a.Workflow+"\x00"+a.Tenant, b.Workflow+"\x00"+b.Tenant, "sorted")
		}
		return out
	}
	settle := func(at time.Time, r store.NewRun, outcome func(c *store.ClaimedTask) store.Outcome) {
		t.Helper()
		create(t, s, at, r)
		c := claimOne(t, s, at)
		require.Equal(t, r.ID, c.RunID)
		mustApply(t, s, at, outcome(c))
	}
	ok := func(c *store.ClaimedTask) store.Outcome { return complete(c, `1`) }
	boom := func(c *store.ClaimedTask) store.Outcome { return failed(c, "boom", true) }

	// Minute 0: a run of t1 completes at 0:10, one of t2 at 0:50. At 2:00 a
	// run fails and its handler waits: in flight, FAILED. A run of "idle",
	// which nobody claims here, stays RUNNING.
	settle(m(0, 10), newRun("wf", "t1", shape(step("a"))), ok)
	settle(m(0, 50), newRun("wf", "t2", shape(step("a"))), ok)
	failing := newRun("wf", "t1", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}, OnFailure: &durabletype.OnFailureSpec{Retry: once()}})
	settle(m(2, 0), failing, boom)
	idle := newRun("idle", "t1", shape(step("a")))
	create(t, s, m(2, 30), idle)

	require.Equal(t, map[string]int{
		"wf/t1/COMPLETED/true": 1, "wf/t2/COMPLETED/true": 1,
		"wf/t1/FAILED/false": 1, "idle/t1/RUNNING/false": 1,
	}, counts(m(3, 0), 3*time.Minute, ""))
	// The window's first minute is the one holding now-window: at 3:20
	// with 3 minutes, minute 0 is still in; at 4:00 it is out.
	require.Equal(t, 1, counts(m(3, 20), 3*time.Minute, "")["wf/t1/COMPLETED/true"])
	require.NotContains(t, counts(m(4, 0), 3*time.Minute, ""), "wf/t1/COMPLETED/true")
	require.Equal(t, map[string]int{"wf/t2/COMPLETED/true": 1}, counts(m(3, 0), time.Hour, "t2"))

	// The handler completes: the run settles FAILED at 4:00. Replayed at
	// 5:00, it is in flight again, and completes at 5:30.
	h := claimOne(t, s, m(4, 0))
	require.Equal(t, durabletype.KindOnFailure, h.Kind)
	mustApply(t, s, m(4, 0), complete(h, `null`))
	require.NoError(t, replayOne(t, s, m(5, 0), failing.ID, "", ""))
	require.Equal(t, map[string]int{
		"wf/t1/COMPLETED/true": 1, "wf/t1/RUNNING/false": 1, "idle/t1/RUNNING/false": 1,
	}, counts(m(5, 1), time.Hour, "t1"), "a replayed run is no longer counted FAILED")
	mustApply(t, s, m(5, 30), complete(claimOne(t, s, m(5, 30)), `1`))
	require.NoError(t, cancelOne(t, s, m(6, 0), idle.ID, ""))
	require.Equal(t, map[string]int{
		"wf/t1/COMPLETED/true": 2, "wf/t2/COMPLETED/true": 1, "idle/t1/CANCELLED/true": 1,
	}, counts(m(7, 0), time.Hour, ""), "the replayed run counted once, under its current status")

	// Prune at 10:00 what settled more than 7m30s ago (before 2:30): the
	// runs that completed in minute 0. The counts of minutes before 2:00 go
	// with them; minute 2 holds the cutoff and stays.
	res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: m(10, 0), OlderThan: 7*time.Minute + 30*time.Second, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, 2, res.Deleted)
	require.Equal(t, map[string]int{
		"wf/t1/COMPLETED/true": 1, "idle/t1/CANCELLED/true": 1,
	}, counts(m(10, 0), time.Hour, ""))
}

// testActionRefused: an action on a run whose status does not allow it is
// refused with the same error on every store (the core's rule: a run at
// another version first, then what its status allows, then the action's
// own transition), the run is left as it was, and a call over several
// runs reports each as a call over it alone would.
func testActionRefused(t *testing.T, s store.Store) {
	withHandler := versioned("1", step("a"))
	withHandler.OnFailure = &durabletype.OnFailureSpec{Retry: once()}
	to := versioned("2", step("a"), step("z", "a"))
	to.OnFailure = withHandler.OnFailure
	// mk creates a run of one step and ends that step with end (nil: it
	// stays ready).
	mk := func(sh *durabletype.Shape, end func(c *store.ClaimedTask) store.Outcome) uuid.UUID {
		r := newRun("wf", "t", sh)
		create(t, s, T0, r)
		if end != nil {
			c := claimOne(t, s, T0)
			require.Equal(t, r.ID, c.RunID)
			mustApply(t, s, T0, end(c))
		}
		return r.ID
	}
	fail := func(c *store.ClaimedTask) store.Outcome { return failed(c, "no", true) }
	completed := mk(versioned("1", step("a")), func(c *store.ClaimedTask) store.Outcome { return complete(c, "1") })
	failedRun := mk(versioned("1", step("a")), fail)
	failing := mk(withHandler, fail) // FAILED, its on-failure handler queued: not settled
	running := mk(versioned("1", step("a")), nil)
	cancelled := mk(versioned("1", step("a")), nil)
	require.NoError(t, cancelOne(t, s, T0, cancelled, ""))
	require.Equal(t, durabletype.RunFailed, run(t, s, failing).Status)
	require.False(t, run(t, s, failing).Settled())

	type refusal struct {
		id   uuid.UUID
		want error
	}
	tests := []struct {
		p       store.ActOnRunsParams
		refused []refusal
	}{
		{store.ActOnRunsParams{Action: durabletype.ActionCancel}, []refusal{
			{completed, durabletype.ErrRunSettled}, {failedRun, durabletype.ErrRunSettled}, {cancelled, durabletype.ErrRunSettled},
		}},
		{store.ActOnRunsParams{Action: durabletype.ActionCancel, Version: "9"}, []refusal{
			{running, durabletype.ErrVersionMismatch}, {failing, durabletype.ErrVersionMismatch},
		}},
		{store.ActOnRunsParams{Action: durabletype.ActionReplay}, []refusal{
			{running, durabletype.ErrRunNotSettled}, {failing, durabletype.ErrRunNotSettled}, {completed, durabletype.ErrNothingToReplay},
		}},
		{store.ActOnRunsParams{Action: durabletype.ActionReplay, FromStep: "nope"}, []refusal{
			{running, durabletype.ErrRunNotSettled}, {completed, durabletype.ErrStepNotFound},
		}},
		{store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Version: "1", To: to}, []refusal{
			{completed, durabletype.ErrRunSettled}, {failedRun, durabletype.ErrRunSettled}, {cancelled, durabletype.ErrRunSettled},
			{failing, durabletype.ErrIncompatible},
		}},
		{store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Version: "0", To: to}, []refusal{
			{completed, durabletype.ErrVersionMismatch}, {running, durabletype.ErrVersionMismatch},
		}},
	}
	type state struct {
		rec    store.Run
		events []string
	}
	snapshot := func(id uuid.UUID) state {
		rec := *run(t, s, id)
		rec.Shape = nil
		return state{rec, events(t, s, id)}
	}
	for _, tt := range tests {
		before := map[uuid.UUID]state{}
		var ids []uuid.UUID
		for _, r := range tt.refused {
			before[r.id] = snapshot(r.id)
			ids = append(ids, r.id)
		}
		p := tt.p
		p.Now, p.IDs = at(time.Minute), ids
		res, err := s.ActOnRuns(ctx, &p)
		require.NoError(t, err)
		require.Len(t, res, len(ids))
		for k, r := range tt.refused {
			require.Equal(t, r.id, res[k].ID)
			require.ErrorIs(t, res[k].Err, r.want, "%s (version %q) of run %d", p.Action, p.Version, k)
			require.Equal(t, before[r.id], snapshot(r.id), "%s of run %d: refused, it is left as it was", p.Action, k)
			alone := p
			alone.IDs = []uuid.UUID{r.id}
			one, err := s.ActOnRuns(ctx, &alone)
			require.NoError(t, err)
			require.ErrorIs(t, one[0].Err, r.want, "%s of run %d alone", p.Action, k)
		}
		require.Empty(t, res[0].Settled)
	}

	_, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Now: at(time.Minute), Action: "no-such-action", IDs: []uuid.UUID{running}})
	require.ErrorIs(t, err, durabletype.ErrInvalidRun, "an action the core does not know")
	none, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Now: at(time.Minute), Action: durabletype.ActionCancel})
	require.NoError(t, err)
	require.Empty(t, none, "no run, no result")
	require.Equal(t, durabletype.RunRunning, run(t, s, running).Status)
}

// testActionAtomic pins what one ActOnRuns call is: one atomic unit for
// all its runs. A reader listing the runs while a call cancels many of
// them sees none of them cancelled or all, never some; a run named twice
// meets the change the call made to it first.
func testActionAtomic(t *testing.T, s store.Store) {
	const n = 100
	var ids []uuid.UUID
	for range n {
		r := newRun("wf", "t", shape(step("a"), step("b", "a")))
		create(t, s, T0, r)
		ids = append(ids, r.ID)
	}
	cancelled := func() int {
		res, err := s.ListRuns(ctx, &store.ListRunsParams{Filter: store.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunCancelled}}, Limit: n + 1})
		require.NoError(t, err)
		return len(res.Runs)
	}
	done := make(chan struct{})
	first := make(chan struct{})
	var seen []int
	var wg sync.WaitGroup
	wg.Go(func() {
		for k := 0; ; k++ {
			seen = append(seen, cancelled())
			if k == 0 {
				close(first)
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	<-first
	res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Now: at(time.Second), Action: durabletype.ActionCancel, IDs: append(ids, ids[0])})
	close(done)
	wg.Wait()
	require.NoError(t, err)
	require.Len(t, res, n+1)
	for k := range n {
		require.NoError(t, res[k].Err, "run %d", k)
	}
	require.ErrorIs(t, res[n].Err, durabletype.ErrRunSettled, "named again: cancelled by the same call")
	require.Len(t, res[0].Settled, n, "the call settled every run")
	for _, c := range seen {
		require.True(t, c == 0 || c == n, "a reader saw %d of %d runs cancelled: the call is not one unit (saw %v)", c, n, seen)
	}
	require.Equal(t, n, cancelled())
}
