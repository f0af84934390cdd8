package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Versions of workflows (see docs/semantics.md, "Versions and deploys"):
// runs pinned to their version at claim, moving runs between versions
// (ActOnRuns with ActionUpgrade), and the versions a store records.

func versioned(version string, steps ...durabletype.StepSpec) *durabletype.Shape {
	return &durabletype.Shape{Version: version, Input: "int", Steps: steps}
}

func typedStep(name, out string, parents ...string) durabletype.StepSpec {
	s := step(name, parents...)
	s.Output = out
	return s
}

// claimQueues claims for a worker serving the given queues (dag.Queue).
func claimQueues(t *testing.T, s store.Store, now time.Time, limit int, queues ...string) []*store.ClaimedTask {
	t.Helper()
	var names []string
	for _, q := range queues {
		w, _, _ := dag.SplitQueue(q)
		if !slices.Contains(names, w) {
			names = append(names, w)
		}
	}
	if queues == nil {
		queues = []string{}
	}
	c, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: now, WorkerID: worker, Limit: limit, Workflows: names, Queues: queues})
	require.NoError(t, err)
	return c
}

func versioner(t *testing.T, s store.Store) store.Versioner {
	t.Helper()
	v, ok := s.(store.Versioner)
	require.True(t, ok, "the store lists the versions it recorded")
	return v
}

// testClaimPinnedToVersion: a claim takes only the tasks of the versions
// its worker serves; a run recorded without a version is served as
// version ""; a claim without Queues takes every version.
func testClaimPinnedToVersion(t *testing.T, s store.Store) {
	v1 := newRun("wf", "t", versioned("1", step("a")))
	v2 := newRun("wf", "t", versioned("2", step("a")))
	legacy := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, v1, v2, legacy)
	require.Equal(t, "1", run(t, s, v1.ID).Version)
	require.Equal(t, "", run(t, s, legacy.ID).Version)

	require.Empty(t, claimQueues(t, s, at(time.Second), 10, dag.Queue("wf", "3")), "nobody serves version 3")
	got := claimQueues(t, s, at(time.Second), 10, dag.Queue("wf", "2"))
	require.Len(t, got, 1)
	require.Equal(t, v2.ID, got[0].RunID)
	require.Equal(t, "2", got[0].Version)

	got = claimQueues(t, s, at(2*time.Second), 10, dag.Queue("wf", "1"), dag.Queue("wf", ""))
	ids := []uuid.UUID{got[0].RunID, got[1].RunID}
	require.ElementsMatch(t, []uuid.UUID{v1.ID, legacy.ID}, ids)

	v3 := newRun("wf", "t", versioned("3", step("a")))
	create(t, s, at(3*time.Second), v3)
	got = claim(t, s, at(4*time.Second), 10) // no Queues: every version
	require.Len(t, got, 1)
	require.Equal(t, "3", got[0].Version)
}

// testVersionsListedAndCounted: runs list, filter and count by version;
// the store lists the versions it recorded with their shapes.
func testVersionsListedAndCounted(t *testing.T, s store.Store) {
	v1 := newRun("wf", "t", versioned("1", typedStep("a", "int")))
	v2 := newRun("wf", "t", versioned("2", typedStep("a", "int"), typedStep("b", "string", "a")))
	create(t, s, T0, v1, v2)
	res, err := s.ListRuns(ctx, &store.ListRunsParams{Filter: store.RunFilter{Workflow: "wf", Version: "2"}, Limit: 10})
	require.NoError(t, err)
	require.Len(t, res.Runs, 1)
	require.Equal(t, v2.ID, res.Runs[0].ID)
	require.Equal(t, "2", res.Runs[0].Version)
	res, err = s.ListRuns(ctx, &store.ListRunsParams{Filter: store.RunFilter{Version: "1", Statuses: []durabletype.RunStatus{durabletype.RunRunning}}, Limit: 10})
	require.NoError(t, err)
	require.Len(t, res.Runs, 1)
	require.Equal(t, v1.ID, res.Runs[0].ID)

	st, err := s.Stats(ctx, &store.StatsParams{Now: at(time.Second), Window: time.Hour})
	require.NoError(t, err)
	for i := range st.Queues {
		requireTime(t, T0, st.Queues[i].OldestReady)
		st.Queues[i].OldestReady = T0
	}
	require.Equal(t, []durabletype.QueueStats{
		{Workflow: "wf", Version: "1", Tenant: "t", Ready: 1, OldestReady: T0},
		{Workflow: "wf", Version: "2", Tenant: "t", Ready: 1, OldestReady: T0},
	}, st.Queues)
	require.Equal(t, []durabletype.RunCount{
		{Workflow: "wf", Version: "1", Tenant: "t", Status: durabletype.RunRunning, Count: 1},
		{Workflow: "wf", Version: "2", Tenant: "t", Status: durabletype.RunRunning, Count: 1},
	}, st.Runs)

	vs, err := versioner(t, s).ListVersions(ctx, &store.ListVersionsParams{Workflow: "wf"})
	require.NoError(t, err)
	var got []string
	for _, v := range vs.Versions {
		require.Equal(t, "wf", v.Workflow)
		require.Equal(t, v.Version, v.Shape.Version)
		got = append(got, v.Version)
	}
	require.ElementsMatch(t, []string{"1", "2"}, got)
	for _, v := range vs.Versions {
		if v.Version == "2" {
			require.Equal(t, "string", v.Shape.Steps[1].Output)
		}
	}
	none, err := versioner(t, s).ListVersions(ctx, &store.ListVersionsParams{Workflow: "other"})
	require.NoError(t, err)
	require.Empty(t, none.Versions)
}

// testUpgradeRuns: a run moved to a version that adds steps keeps what it
// did, gets the new steps (ready at once when their parents are done), and
// is claimed by the workers of its new version only; its log shows the
// move.
func testUpgradeRuns(t *testing.T, s store.Store) {
	from := versioned("1", typedStep("a", "int"), typedStep("b", "int", "a"))
	to := versioned("2", typedStep("a", "int"), typedStep("b", "int", "a"), typedStep("c", "int", "b"), typedStep("d", "int", "a"))
	r := newRun("wf", "t", from)
	create(t, s, T0, r)
	a := claimQueues(t, s, at(time.Second), 1, dag.Queue("wf", "1"))[0]
	mustApply(t, s, at(2*time.Second), complete(a, "1"))

	res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Now: at(3 * time.Second), IDs: []uuid.UUID{r.ID}, Version: "1", To: to})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.NoError(t, res[0].Err)

	rec := run(t, s, r.ID)
	require.Equal(t, "2", rec.Version)
	require.Equal(t, "2", rec.Shape.Version)
	require.Len(t, rec.Shape.Steps, 4)
	require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskQueued, "c": durabletype.TaskPending, "d": durabletype.TaskQueued},
		states(t, s, r.ID))
	require.Equal(t, []string{"UPGRADED:0"}, stepEvents(t, s, r.ID, "c"))
	require.Contains(t, stepEvents(t, s, r.ID, "b"), "UPGRADED:0")

	require.Empty(t, claimQueues(t, s, at(4*time.Second), 10, dag.Queue("wf", "1")), "no longer version 1's")
	got := claimQueues(t, s, at(4*time.Second), 10, dag.Queue("wf", "2"))
	require.Len(t, got, 2)
	for _, c := range got {
		require.Equal(t, "2", c.Version)
		if c.Step == "d" {
			require.JSONEq(t, "1", string(c.ParentOutputs["a"]), "a new step reads what its parent recorded before the move")
		}
		mustApply(t, s, at(5*time.Second), complete(c, "2"))
	}
	c := claimQueues(t, s, at(6*time.Second), 10, dag.Queue("wf", "2"))
	require.Len(t, c, 1)
	require.Equal(t, "c", c[0].Step)
	mustApply(t, s, at(7*time.Second), complete(c[0], "3"))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)

	vs, err := versioner(t, s).ListVersions(ctx, &store.ListVersionsParams{Workflow: "wf"})
	require.NoError(t, err)
	require.NotEmpty(t, vs.Versions)
}

// testUpgradeRefused: a run is refused, and left as it was, when a step it
// has not finished is missing or different in the version to move to, when
// it is at another version than the one moved from, when it settled, or
// when it is another tenant's.
func testUpgradeRefused(t *testing.T, s store.Store) {
	from := versioned("1", typedStep("a", "int"), typedStep("b", "int", "a"))
	removesB := versioned("2", typedStep("a", "int"))
	retypesB := versioned("3", typedStep("a", "int"), typedStep("b", "string", "a"))
	pending := newRun("wf", "t", from)
	other := newRun("wf", "t", versioned("9", step("a")))
	foreign := newRun("wf", "u", from)
	done := newRun("wf", "t", versioned("1", typedStep("a", "int")))
	create(t, s, T0, pending, other, foreign, done)
	for _, c := range claimQueues(t, s, at(time.Second), 10, dag.Queue("wf", "1")) {
		if c.RunID == done.ID {
			mustApply(t, s, at(2*time.Second), complete(c, "1"))
		}
	}
	ids := []uuid.UUID{pending.ID, other.ID, foreign.ID, done.ID, uuid.New()}
	res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Now: at(3 * time.Second), IDs: ids, Tenant: "t", Version: "1", To: removesB})
	require.NoError(t, err)
	require.Len(t, res, len(ids))
	for k, want := range []error{durabletype.ErrIncompatible, durabletype.ErrVersionMismatch, durabletype.ErrRunNotFound, durabletype.ErrRunSettled, durabletype.ErrRunNotFound} {
		require.Equal(t, ids[k], res[k].ID)
		require.ErrorIs(t, res[k].Err, want, "run %d", k)
	}
	var ue *dag.UpgradeError
	require.True(t, errors.As(res[0].Err, &ue))
	require.Equal(t, "b", ue.Step)

	res, err = s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Now: at(4 * time.Second), IDs: []uuid.UUID{pending.ID}, Version: "1", To: retypesB})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, durabletype.ErrIncompatible)
	require.Equal(t, "1", run(t, s, pending.ID).Version, "a refused run stays")
	require.Len(t, tasks(t, s, pending.ID), 2)

	_, err = s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionUpgrade, IDs: []uuid.UUID{pending.ID}, Version: "1", To: shape(step("a"))})
	require.ErrorIs(t, err, durabletype.ErrInvalidRun, "the shape to move to needs its version")
}

// testUpgradeMovesQueueRows: tasks that wait in a queue when their run
// moves (ready, parked behind a concurrency key, running, sleeping) go on
// at the new version: a parked task promoted later, a retried attempt and
// a woken sleep are claimed by the new version's workers.
func testUpgradeMovesQueueRows(t *testing.T, s store.Store) {
	mk := func(version string) *durabletype.Shape {
		return versioned(version, typedStep("a", "int"), capped("b", 1, "a"), sleepStep("nap", time.Minute, "a"))
	}
	sh1 := mk("1")
	sh2 := mk("2")
	sh2.Steps = append(sh2.Steps, typedStep("z", "int", "b", "nap"))
	holder, parked := keyedRun(sh1, "k", ""), keyedRun(sh1, "k", "")
	create(t, s, T0, holder)
	create(t, s, at(time.Millisecond), parked)
	for _, c := range claimQueues(t, s, at(time.Second), 10, dag.Queue("wf", "1")) {
		mustApply(t, s, at(2*time.Second), complete(c, "1")) // the two a's
	}
	// holder's b holds the key's slot; parked's b waits behind it.
	hb := claimQueues(t, s, at(3*time.Second), 10, dag.Queue("wf", "1"))
	require.Len(t, hb, 1)
	require.Equal(t, holder.ID, hb[0].RunID)

	res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Now: at(4 * time.Second),
		IDs: []uuid.UUID{holder.ID, parked.ID}, Version: "1", To: sh2})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)

	// The old version's claim of holder's b is still current: its worker
	// finishes it, and the slot goes to parked's b, at version 2.
	mustApply(t, s, at(5*time.Second), complete(hb[0], "2"))
	require.Empty(t, claimQueues(t, s, at(6*time.Second), 10, dag.Queue("wf", "1")))
	pb := claimQueues(t, s, at(6*time.Second), 10, dag.Queue("wf", "2"))
	require.Len(t, pb, 1)
	require.Equal(t, parked.ID, pb[0].RunID)
	require.Equal(t, "b", pb[0].Step)
	mustApply(t, s, at(7*time.Second), complete(pb[0], "3"))

	// The sleeps wake, and z runs at version 2 in both runs.
	fireAll(t, s, at(2*time.Minute))
	zs := claimQueues(t, s, at(3*time.Minute), 10, dag.Queue("wf", "2"))
	require.Len(t, zs, 2)
	for _, c := range zs {
		require.Equal(t, "z", c.Step)
		mustApply(t, s, at(4*time.Minute), complete(c, "4"))
	}
	require.Equal(t, durabletype.RunCompleted, run(t, s, holder.ID).Status)
	require.Equal(t, durabletype.RunCompleted, run(t, s, parked.ID).Status)
}

// testUpgradeReplayedRunWithHandler: a run replayed after its on-failure
// handler ran keeps that task after the steps when it moves to a version
// with more steps, and runs the handler again if it fails again.
func testUpgradeReplayedRunWithHandler(t *testing.T, s store.Store) {
	mk := func(version string, steps ...durabletype.StepSpec) *durabletype.Shape {
		sh := versioned(version, steps...)
		sh.OnFailure = &durabletype.OnFailureSpec{Retry: once()}
		return sh
	}
	r := newRun("wf", "t", mk("1", typedStep("a", "int")))
	create(t, s, T0, r)
	a := claimQueues(t, s, at(time.Second), 1, dag.Queue("wf", "1"))[0]
	mustApply(t, s, at(2*time.Second), failed(a, "boom", true))
	h := claimQueues(t, s, at(3*time.Second), 1, dag.Queue("wf", "1"))[0]
	require.Equal(t, durabletype.OnFailureTask, h.Step)
	mustApply(t, s, at(4*time.Second), complete(h, ""))
	rr, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionReplay, Now: at(5 * time.Second), IDs: []uuid.UUID{r.ID}})
	require.NoError(t, err)
	require.NoError(t, rr[0].Err)

	res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Now: at(6 * time.Second), IDs: []uuid.UUID{r.ID},
		Version: "1", To: mk("2", typedStep("a", "int"), typedStep("b", "int", "a"))})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	ts, err := s.ListTasks(ctx, r.ID)
	require.NoError(t, err)
	var names []string
	for _, tk := range ts {
		names = append(names, tk.Name)
	}
	require.Equal(t, []string{"a", "b", durabletype.OnFailureTask}, names, "the handler's task follows the steps")

	a = claimQueues(t, s, at(7*time.Second), 1, dag.Queue("wf", "2"))[0]
	mustApply(t, s, at(8*time.Second), failed(a, "boom again", true))
	h = claimQueues(t, s, at(9*time.Second), 1, dag.Queue("wf", "2"))[0]
	require.Equal(t, durabletype.OnFailureTask, h.Step)
	mustApply(t, s, at(10*time.Second), complete(h, ""))
	rec := run(t, s, r.ID)
	require.Equal(t, durabletype.RunFailed, rec.Status)
	require.True(t, rec.Settled())
}

// testPriorityWithinVersion: a task of a higher priority of a version no
// worker serves does not hold back the tasks of its lane of a version
// served.
func testPriorityWithinVersion(t *testing.T, s store.Store) {
	high := newRun("wf", "t", versioned("1", step("a")))
	high.Priority = store.PriorityMax
	low := newRun("wf", "t", versioned("2", step("a")))
	create(t, s, T0, low, high)
	got := claimQueues(t, s, at(time.Second), 10, dag.Queue("wf", "2"))
	require.Len(t, got, 1)
	require.Equal(t, low.ID, got[0].RunID)
	got = claimQueues(t, s, at(2*time.Second), 10, dag.Queue("wf", "1"))
	require.Len(t, got, 1)
	require.Equal(t, high.ID, got[0].RunID)
}

// testUpgradeMidMapAndChild: a run moves while a map step's items are half
// done and a child step waits for its child run: the items and the child
// go on, and the steps the new version adds after them run.
func testUpgradeMidMapAndChild(t *testing.T, s store.Store) {
	mk := func(version string, more ...durabletype.StepSpec) *durabletype.Shape {
		sh := mapShape()
		sh.Version = version
		sh.Steps = append(sh.Steps, childStep("kid", "c2", "list"))
		sh.Steps = append(sh.Steps, more...)
		return sh
	}
	from := mk("1")
	to := mk("2", step("after", "join", "kid"))
	r := newRun("wf", "acme", from)
	create(t, s, at(0), r)
	mustApply(t, s, at(0), complete(claimOne(t, s, at(0)), `["list"]`))
	cs := claim(t, s, at(0), 10)
	require.Len(t, cs, 2, "the map step and the child step")
	for _, c := range cs {
		switch c.Kind {
		case durabletype.KindMap:
			mustApply(t, s, at(0), fanOut(c, `"a"`, `"b"`))
		case durabletype.KindChild:
			mustApply(t, s, at(0), spawn(c, `"box"`))
		}
	}
	items := claim(t, s, at(time.Second), 10)
	require.Len(t, items, 2)
	slices.SortFunc(items, func(a, b *store.ClaimedTask) int { return a.Item - b.Item })
	mustApply(t, s, at(time.Second), complete(items[0], `"A"`))

	res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Now: at(2 * time.Second), IDs: []uuid.UUID{r.ID}, Version: "1", To: to})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	mustApply(t, s, at(3*time.Second), complete(items[1], `"B"`)) // claimed before the move
	workChild(t, s, at(3*time.Second), "")
	join := claim(t, s, at(4*time.Second), 10)
	require.Len(t, join, 1)
	require.Equal(t, "join", join[0].Step)
	require.Equal(t, "2", join[0].Version)
	require.Equal(t, [][]byte{[]byte(`"A"`), []byte(`"B"`)}, join[0].ParentItems["m"])
	mustApply(t, s, at(4*time.Second), complete(join[0], `1`))
	after := claimOne(t, s, at(5*time.Second))
	require.Equal(t, "after", after.Step)
	require.Equal(t, `{"step":"c2","input":"box"}`, string(after.ParentOutputs["kid"]))
	mustApply(t, s, at(5*time.Second), complete(after, `2`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
}
