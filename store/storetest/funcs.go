package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Durable functions (internal/core/dag/func.go): a function's body is a
// task of kind func; its calls are its records; what it waits for is its
// own state.

func funcShape() *durabletype.Shape {
	return shape(durabletype.StepSpec{Name: "main", Func: &durabletype.FuncSpec{}, Retry: once()})
}

// startFunc creates a function's run and claims its body.
func startFunc(t *testing.T, s store.Store, now time.Time) (store.NewRun, *store.ClaimedTask) {
	t.Helper()
	r := newRun("wf", "acme", funcShape())
	create(t, s, now, r)
	c := claimOne(t, s, now)
	require.Equal(t, durabletype.KindFunc, c.Kind)
	require.Equal(t, "main", c.Step)
	return r, c
}

func checkpoint(c *store.ClaimedTask, recs ...store.Record) store.Outcome {
	return store.Outcome{Task: c.Ref(), Kind: store.OutcomeCheckpoint, Records: recs}
}

func suspend(c *store.ClaimedTask, await []int, anyOf bool, recs ...store.Record) store.Outcome {
	return store.Outcome{Task: c.Ref(), Kind: store.OutcomeSuspend, Records: recs, Await: await, AwaitAny: anyOf}
}

func doneStep(seq int, name, output string) store.Record {
	return store.Record{Seq: seq, Name: name, Kind: durabletype.KindStep, State: durabletype.TaskCompleted, Attempt: 1, Output: []byte(output)}
}

// recordNames lists a run's tasks by name, in the store's order.
func recordNames(t *testing.T, s store.Store, id uuid.UUID) []string {
	t.Helper()
	ts, err := s.ListTasks(ctx, id)
	require.NoError(t, err)
	var out []string
	for _, tk := range ts {
		out = append(out, tk.Name)
	}
	return out
}

func testFuncCheckpoint(t *testing.T, s store.Store) {
	r, c := startFunc(t, s, at(0))
	require.Empty(t, c.Records, "a new function has no history")
	failedStep := store.Record{Seq: 1, Name: "charge", Kind: durabletype.KindStep, State: durabletype.TaskFailed, Attempt: 3, Error: "declined"}
	mustApply(t, s, at(time.Second), checkpoint(c, doneStep(0, "price", `12`), failedStep))
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskRunning, ts["main"].State, "a checkpoint keeps the claim")
	p := ts[dag.RecordName("main", 0, "price")]
	require.Equal(t, durabletype.TaskCompleted, p.State)
	require.Equal(t, `12`, string(p.Output))
	require.Equal(t, durabletype.KindStep, p.Kind)
	ch := ts[dag.RecordName("main", 1, "charge")]
	require.Equal(t, durabletype.TaskFailed, ch.State)
	require.Equal(t, "declined", ch.Error)
	require.Equal(t, 3, ch.Attempt)
	require.Equal(t, []string{"main", "~main[0:price]", "~main[1:charge]"}, recordNames(t, s, r.ID), "the calls follow the body, in their order")

	// The same checkpoint again (its result lost on the way) records
	// nothing twice.
	require.Equal(t, []store.FinishStatus{store.FinishDuplicate}, finish(t, s, at(2*time.Second), checkpoint(c, doneStep(0, "price", `12`))))
	require.Equal(t, []string{"main:QUEUED:0", "main:STARTED:1", "~main[0:price]:COMPLETED:1", "~main[1:charge]:FAILED:3"}, events(t, s, r.ID))

	// Recorded out of order (steps run in parallel): a gap until its
	// call is recorded.
	mustApply(t, s, at(3*time.Second), checkpoint(c, doneStep(3, "b", `"B"`)))
	mustApply(t, s, at(3*time.Second), checkpoint(c, doneStep(2, "a", `"A"`)))
	require.Equal(t, []string{"main", "~main[0:price]", "~main[1:charge]", "~main[2:a]", "~main[3:b]"}, recordNames(t, s, r.ID))

	mustApply(t, s, at(4*time.Second), complete(c, `"done"`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
	require.Equal(t, `"done"`, string(tasks(t, s, r.ID)["main"].Output))
	// A checkpoint of a claim that ended is refused.
	require.Equal(t, []store.FinishStatus{store.FinishDuplicate}, finish(t, s, at(5*time.Second), checkpoint(c, doneStep(4, "late", `1`))))
	require.NotContains(t, tasks(t, s, r.ID), dag.RecordName("main", 4, "late"))
}

func testFuncSleep(t *testing.T, s store.Store) {
	r, c := startFunc(t, s, at(0))
	mustApply(t, s, at(0), checkpoint(c, doneStep(0, "a", `1`)))
	mustApply(t, s, at(time.Second), suspend(c, []int{1}, false,
		store.Record{Seq: 1, Name: "nap", Kind: durabletype.KindSleep, After: time.Hour}))
	ts := tasks(t, s, r.ID)
	body := ts["main"]
	require.Equal(t, durabletype.TaskSleeping, body.State, "the body sleeps: no claim, no slot")
	requireTime(t, at(time.Second+time.Hour), body.DueAt)
	require.Equal(t, durabletype.TaskSleeping, ts[dag.RecordName("main", 1, "nap")].State)
	require.Empty(t, claim(t, s, at(time.Hour), 10))
	require.Zero(t, fireAll(t, s, at(time.Hour)))

	require.Equal(t, 1, fireAll(t, s, at(time.Second+time.Hour)))
	require.Equal(t, durabletype.TaskCompleted, tasks(t, s, r.ID)[dag.RecordName("main", 1, "nap")].State)
	c2 := claimOne(t, s, at(2*time.Hour))
	require.Equal(t, "main", c2.Step)
	require.NotEqual(t, c.Token, c2.Token)
	require.Len(t, c2.Records, 2, "the body's history comes with its claim")
	require.Equal(t, dag.RecordName("main", 0, "a"), c2.Records[0].Name)
	require.Equal(t, `1`, string(c2.Records[0].Output))
	require.Equal(t, 0, c2.Records[0].Item)
	require.Equal(t, dag.RecordName("main", 1, "nap"), c2.Records[1].Name)
	require.Equal(t, durabletype.TaskCompleted, c2.Records[1].State)
	require.Equal(t, 1, c2.Records[1].Item)
	// The old claim's late checkpoint is stale.
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, at(2*time.Hour), checkpoint(c, doneStep(2, "x", `1`))))
	mustApply(t, s, at(2*time.Hour), complete(c2, `"ok"`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
}

func testFuncEventWait(t *testing.T, s store.Store) {
	r, c := startFunc(t, s, at(0))
	mustApply(t, s, at(0), suspend(c, []int{0}, false,
		store.Record{Seq: 0, Name: "paid", Kind: durabletype.KindEvent, Key: "paid:o1", Timeout: time.Hour}))
	body := tasks(t, s, r.ID)["main"]
	require.Equal(t, durabletype.TaskWaiting, body.State)
	require.Equal(t, "paid:o1", body.WaitKey)
	require.Equal(t, []int{0}, send(t, s, at(time.Second), event("globex", "paid:o1", `"no"`)), "another tenant's event reaches nothing")
	require.Equal(t, []int{1}, send(t, s, at(2*time.Second), event("acme", "paid:o1", `"bank"`)))
	rec := tasks(t, s, r.ID)[dag.RecordName("main", 0, "paid")]
	require.Equal(t, durabletype.TaskCompleted, rec.State)
	require.Equal(t, `"bank"`, string(rec.Output))
	c2 := claimOne(t, s, at(3*time.Second))
	require.Equal(t, `"bank"`, string(c2.Records[0].Output))
	require.Zero(t, fireAll(t, s, at(2*time.Hour)), "the wait's timeout went with it")

	// A wait that times out fails its call; the body runs again.
	mustApply(t, s, at(4*time.Second), suspend(c2, []int{1}, false,
		store.Record{Seq: 1, Name: "approve", Kind: durabletype.KindEvent, Key: "approve", Signal: true, Timeout: time.Minute}))
	require.Equal(t, 1, fireAll(t, s, at(4*time.Second+time.Minute)))
	rec = tasks(t, s, r.ID)[dag.RecordName("main", 1, "approve")]
	require.Equal(t, durabletype.TaskFailed, rec.State)
	require.True(t, strings.HasPrefix(rec.Error, dag.WaitTimeoutText), rec.Error)
	c3 := claimOne(t, s, at(5*time.Minute))

	// A signal sent before the wait begins is received at once.
	mustSignal(t, s, &store.SignalParams{Now: at(6 * time.Minute), RunID: r.ID, Name: "go", Payload: []byte(`true`)})
	mustApply(t, s, at(7*time.Minute), suspend(c3, []int{2}, false,
		store.Record{Seq: 2, Name: "go", Kind: durabletype.KindEvent, Key: "go", Signal: true}))
	require.Equal(t, durabletype.TaskCompleted, tasks(t, s, r.ID)[dag.RecordName("main", 2, "go")].State)
	require.Equal(t, durabletype.TaskQueued, tasks(t, s, r.ID)["main"].State)

	// An event sent within the lookback is received at once.
	c4 := claimOne(t, s, at(8*time.Minute))
	send(t, s, at(9*time.Minute), event("acme", "late", `7`))
	mustApply(t, s, at(10*time.Minute), suspend(c4, []int{3}, false,
		store.Record{Seq: 3, Name: "late", Kind: durabletype.KindEvent, Key: "late", Lookback: 5 * time.Minute}))
	require.Equal(t, `7`, string(tasks(t, s, r.ID)[dag.RecordName("main", 3, "late")].Output))
}

func testFuncRetry(t *testing.T, s store.Store) {
	r, c := startFunc(t, s, at(0))
	mustApply(t, s, at(0), suspend(c, []int{0}, false,
		store.Record{Seq: 0, Name: "flaky", Kind: durabletype.KindStep, State: durabletype.TaskPending, Attempt: 1, Error: "boom", After: 10 * time.Second}))
	body := tasks(t, s, r.ID)["main"]
	require.Equal(t, durabletype.TaskQueued, body.State)
	requireTime(t, at(10*time.Second), body.DueAt, "the body waits for the retry's time")
	require.Empty(t, claim(t, s, at(5*time.Second), 10))
	require.Equal(t, 1, fireAll(t, s, at(10*time.Second)))
	c2 := claimOne(t, s, at(11*time.Second))
	require.Equal(t, durabletype.TaskPending, c2.Records[0].State)
	require.Equal(t, 1, c2.Records[0].Attempt)
	mustApply(t, s, at(12*time.Second), checkpoint(c2, store.Record{Seq: 0, Name: "flaky", Kind: durabletype.KindStep,
		State: durabletype.TaskCompleted, Attempt: 2, Output: []byte(`"ok"`)}))
	rec := tasks(t, s, r.ID)[dag.RecordName("main", 0, "flaky")]
	require.Equal(t, durabletype.TaskCompleted, rec.State, "the retry's result replaces the failed attempt")
	require.Equal(t, 2, rec.Attempt)
	require.Equal(t, []string{"RETRYING:1", "COMPLETED:2"}, stepEvents(t, s, r.ID, dag.RecordName("main", 0, "flaky")))

	// A retry recorded while the body runs on (a step started with Go),
	// recorded again (its result lost on the way), is a duplicate: its
	// due time and its log stay as they were.
	retry := store.Record{Seq: 1, Name: "bg", Kind: durabletype.KindStep, State: durabletype.TaskPending, Attempt: 1, Error: "boom", After: 10 * time.Second}
	mustApply(t, s, at(14*time.Second), checkpoint(c2, retry))
	require.Equal(t, []store.FinishStatus{store.FinishDuplicate}, finish(t, s, at(15*time.Second), checkpoint(c2, retry)))
	mustApply(t, s, at(16*time.Second), suspend(c2, []int{1}, false))
	requireTime(t, at(24*time.Second), tasks(t, s, r.ID)["main"].DueAt, "the retry is due as first recorded")
	require.Equal(t, []string{"RETRYING:1"}, stepEvents(t, s, r.ID, dag.RecordName("main", 1, "bg")))
}

func testFuncChildren(t *testing.T, s store.Store) {
	r, c := startFunc(t, s, at(0))
	kid := func(seq int, in string) store.Record {
		return store.Record{Seq: seq, Name: "kid", Kind: durabletype.KindChild, Result: "c2",
			Child: &store.NewRun{Workflow: "child", Input: []byte(in), Shape: childShape()}}
	}
	mustApply(t, s, at(0), checkpoint(c, kid(0, `1`), kid(1, `2`)))
	ids := []uuid.UUID{dag.ChildID(r.ID, dag.RecordName("main", 0, "kid"), c.Token, c.ClaimedAt), dag.ChildID(r.ID, dag.RecordName("main", 1, "kid"), c.Token, c.ClaimedAt)}
	for k, id := range ids {
		child := run(t, s, id)
		require.Equal(t, "acme", child.Tenant)
		require.Equal(t, &durabletype.ParentRef{RunID: r.ID, Step: dag.RecordName("main", k, "kid"), Result: "c2"}, child.Parent)
		require.Equal(t, id, tasks(t, s, r.ID)[dag.RecordName("main", k, "kid")].Child)
	}
	mustApply(t, s, at(time.Second), suspend(c, []int{0, 1}, false))
	body := tasks(t, s, r.ID)["main"]
	require.Equal(t, durabletype.TaskWaiting, body.State)
	require.Equal(t, 2, body.Left)

	// The first child settles: the body waits on for the second.
	cs := claim(t, s, at(2*time.Second), 10, "child")
	require.Len(t, cs, 2)
	slices.SortFunc(cs, func(a, b *store.ClaimedTask) int { return strings.Compare(string(a.Input), string(b.Input)) })
	mustApply(t, s, at(2*time.Second), complete(cs[0], `"c1 of 1"`))
	c1b := claim(t, s, at(2*time.Second), 1, "child")[0]
	mustApply(t, s, at(2*time.Second), complete(c1b, `"one"`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, ids[0]).Status)
	ts := tasks(t, s, r.ID)
	require.Equal(t, `"one"`, string(ts[dag.RecordName("main", 0, "kid")].Output), "the child's result step's output")
	require.Equal(t, durabletype.TaskWaiting, ts["main"].State)
	require.Equal(t, 1, ts["main"].Left)

	// The second fails: its call fails, and the body runs again.
	mustApply(t, s, at(3*time.Second), failed(cs[1], "broke", true))
	ts = tasks(t, s, r.ID)
	rec := ts[dag.RecordName("main", 1, "kid")]
	require.Equal(t, durabletype.TaskFailed, rec.State)
	require.Contains(t, rec.Error, "broke")
	require.Equal(t, durabletype.TaskQueued, ts["main"].State)

	// The first of several: a child run that settled already resumes at once.
	c2 := claimOne(t, s, at(4*time.Second))
	mustApply(t, s, at(4*time.Second), checkpoint(c2, kid(2, `3`)))
	mustApply(t, s, at(4*time.Second), suspend(c2, []int{0, 2}, true))
	require.Equal(t, durabletype.TaskQueued, tasks(t, s, r.ID)["main"].State)
	c3 := claimOne(t, s, at(5*time.Second))
	mustApply(t, s, at(5*time.Second), suspend(c3, []int{2}, true))
	require.Equal(t, 1, tasks(t, s, r.ID)["main"].Left)

	// The body returns without waiting for it: the child run is cancelled.
	c4 := claim(t, s, at(6*time.Second), 10, "child")
	require.Len(t, c4, 1)
	mustApply(t, s, at(6*time.Second), complete(c4[0], `1`))
	c5 := claim(t, s, at(6*time.Second), 1, "child")[0]
	require.Equal(t, "c2", c5.Step)
	mustApply(t, s, at(7*time.Second), complete(c5, `"three"`))
	c6 := claimOne(t, s, at(8*time.Second))
	require.Equal(t, "main", c6.Step)
	mustApply(t, s, at(8*time.Second), checkpoint(c6, kid(3, `4`)))
	mustApply(t, s, at(9*time.Second), complete(c6, `"done"`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
	orphan := dag.ChildID(r.ID, dag.RecordName("main", 3, "kid"), c6.Token, c6.ClaimedAt)
	require.Equal(t, durabletype.TaskCancelled, tasks(t, s, r.ID)[dag.RecordName("main", 3, "kid")].State)
	s.ApplyInbox(ctx, &store.ApplyInboxParams{Now: at(10 * time.Second)}) //nolint:errcheck // a store applies its own messages; this is belt and braces
	require.Equal(t, durabletype.RunCancelled, run(t, s, orphan).Status, "a call's child run ends with the function")
}

func testFuncCancel(t *testing.T, s store.Store) {
	r, c := startFunc(t, s, at(0))
	mustApply(t, s, at(0), checkpoint(c, store.Record{Seq: 0, Name: "kid", Kind: durabletype.KindChild, Result: "c2",
		Child: &store.NewRun{Workflow: "child", Input: []byte(`1`), Shape: childShape()}}))
	mustApply(t, s, at(0), suspend(c, []int{0}, false))
	require.NoError(t, cancelOne(t, s, at(time.Second), r.ID, ""))
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskCancelled, ts["main"].State)
	require.Equal(t, durabletype.TaskCancelled, ts[dag.RecordName("main", 0, "kid")].State)
	child := dag.ChildID(r.ID, dag.RecordName("main", 0, "kid"), c.Token, c.ClaimedAt)
	s.ApplyInbox(ctx, &store.ApplyInboxParams{Now: at(2 * time.Second)}) //nolint:errcheck // as above
	require.Equal(t, durabletype.RunCancelled, run(t, s, child).Status)
}

func testFuncReplay(t *testing.T, s store.Store) {
	r, c := startFunc(t, s, at(0))
	mustApply(t, s, at(0), checkpoint(c, doneStep(0, "a", `1`), doneStep(1, "b", `2`),
		store.Record{Seq: 2, Name: "c", Kind: durabletype.KindStep, State: durabletype.TaskFailed, Attempt: 1, Error: "no"},
		doneStep(3, "d", `4`)))
	mustApply(t, s, at(time.Second), failed(c, "gave up", true))
	require.Equal(t, durabletype.RunFailed, run(t, s, r.ID).Status)

	replay := func(from string) error {
		res, err := s.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionReplay, Now: at(2 * time.Second), IDs: []uuid.UUID{r.ID}, FromStep: from})
		require.NoError(t, err)
		return res[0].Err
	}
	require.ErrorIs(t, replay("nope"), durabletype.ErrStepNotFound)
	require.NoError(t, replay(""))
	require.Equal(t, []string{"main", "~main[0:a]", "~main[1:b]"}, recordNames(t, s, r.ID),
		"the calls before the first that did not complete are kept; it and the later ones go")
	c2 := claimOne(t, s, at(3*time.Second))
	require.Len(t, c2.Records, 2)
	mustApply(t, s, at(3*time.Second), complete(c2, `"ok"`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)

	require.ErrorIs(t, replay(""), durabletype.ErrNothingToReplay)
	require.NoError(t, replay("b"))
	require.Equal(t, []string{"main", "~main[0:a]"}, recordNames(t, s, r.ID), "replay from a call runs it again, and every later one")
}

func testFuncRescue(t *testing.T, s store.Store) {
	r, c := startFunc(t, s, at(0))
	mustApply(t, s, at(time.Second), checkpoint(c, doneStep(0, "a", `1`)))
	res, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: at(time.Hour), DeadAfter: time.Minute, Limit: 10})
	require.NoError(t, err)
	require.Len(t, res.Rescued, 1)
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, at(time.Hour), checkpoint(c, doneStep(1, "b", `2`))),
		"a rescued body's checkpoint is refused")
	fireAll(t, s, at(2*time.Hour))
	c2 := claimOne(t, s, at(2*time.Hour))
	require.Len(t, c2.Records, 1, "what the lost execution recorded stays")
	require.NotContains(t, tasks(t, s, r.ID), dag.RecordName("main", 1, "b"))
}

func testFuncRecordsInvalid(t *testing.T, s store.Store) {
	r, c := startFunc(t, s, at(0))
	mustApply(t, s, at(0), checkpoint(c, store.Record{Seq: 0, Name: "bad name!", Kind: durabletype.KindStep, State: durabletype.TaskCompleted}))
	require.Equal(t, durabletype.RunFailed, run(t, s, r.ID).Status, "a worker's bad record fails the function, without retry")
	require.Contains(t, run(t, s, r.ID).Error, "call name")
	_, c2 := startFunc(t, s, at(0))
	mustApply(t, s, at(0), suspend(c2, []int{7}, false))
	require.Contains(t, run(t, s, c2.RunID).Error, "never made")

	// A call recorded under one name is not recorded again under another.
	r3, c3 := startFunc(t, s, at(0))
	mustApply(t, s, at(0), checkpoint(c3, doneStep(0, "a", `1`)))
	mustApply(t, s, at(time.Second), checkpoint(c3, doneStep(0, "b", `2`)))
	require.Equal(t, durabletype.RunFailed, run(t, s, r3.ID).Status)
	require.Contains(t, run(t, s, r3.ID).Error, `call 0 is recorded as step "a", the worker reports step "b"`)
	require.Equal(t, []string{"main", "~main[0:a]"}, recordNames(t, s, r3.ID))
}

func testReleaseLater(t *testing.T, s store.Store) {
	r, c := startFunc(t, s, at(0))
	mustApply(t, s, at(time.Second), store.Outcome{Task: c.Ref(), Kind: store.OutcomeRelease, Delay: 10 * time.Second})
	body := tasks(t, s, r.ID)["main"]
	require.Equal(t, durabletype.TaskQueued, body.State)
	requireTime(t, at(11*time.Second), body.DueAt, "given back for later")
	require.Equal(t, 0, body.Attempt, "a release spends no attempt")
	require.Empty(t, claim(t, s, at(5*time.Second), 10))
	require.Equal(t, 1, fireAll(t, s, at(11*time.Second)))
	c2 := claimOne(t, s, at(12*time.Second))
	require.Equal(t, 1, c2.Attempt)
}
