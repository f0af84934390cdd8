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

// Tests of the steps that wait: for an event, a signal, a child run or the
// items of a map step. Each wait is a row; the transitions that begin and
// end it are the core's (dag.Run.Finish, Deliver, Apply, Wake).

func eventStep(name string, parents ...string) durabletype.StepSpec {
	s := step(name, parents...)
	s.Wait = &durabletype.WaitSpec{}
	return s
}

func signalStep(name, signal string, parents ...string) durabletype.StepSpec {
	s := step(name, parents...)
	s.Wait = &durabletype.WaitSpec{Signal: signal}
	return s
}

func waitFor(c *store.ClaimedTask, key string) store.Outcome {
	return store.Outcome{Task: c.Ref(), Kind: store.OutcomeWait, Key: key}
}

func send(t *testing.T, s store.Store, now time.Time, evs ...store.EventMessage) []int {
	t.Helper()
	res, err := s.SendEvents(ctx, &store.SendEventsParams{Now: now, Events: evs})
	require.NoError(t, err)
	require.Len(t, res.Delivered, len(evs))
	return res.Delivered
}

func event(tenant, key, payload string) store.EventMessage {
	return store.EventMessage{Tenant: tenant, Key: key, Payload: []byte(payload)}
}

// startWait creates a run of sh for tenant, claims its root (which must be
// an event step) and makes it wait for key at now.
func startWait(t *testing.T, s store.Store, now time.Time, tenant string, sh *durabletype.Shape, key string) store.NewRun {
	t.Helper()
	r := newRun("wf", tenant, sh)
	create(t, s, now, r)
	c := claimOne(t, s, now)
	require.Equal(t, r.ID, c.RunID)
	require.Equal(t, durabletype.KindEvent, c.Kind)
	mustApply(t, s, now, waitFor(c, key))
	return r
}

func testEventWait(t *testing.T, s store.Store) {
	sh := shape(eventStep("confirmed"), step("ship", "confirmed"))
	r := startWait(t, s, at(0), "acme", sh, "order-1")
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskWaiting, ts["confirmed"].State)
	require.Equal(t, "order-1", ts["confirmed"].WaitKey)
	require.Equal(t, []string{"QUEUED:0", "STARTED:1", "WAITING:1"}, stepEvents(t, s, r.ID, "confirmed"))
	require.Empty(t, claim(t, s, at(time.Second), 10), "a waiting task holds no claim and is not claimable")

	// Another tenant's event with the same key, and the tenant's event of
	// another key, reach nothing.
	require.Equal(t, []int{0, 0}, send(t, s, at(2*time.Second), event("other", "order-1", `"x"`), event("acme", "order-2", `"y"`)))
	require.Equal(t, durabletype.TaskWaiting, states(t, s, r.ID)["confirmed"])

	require.Equal(t, []int{1}, send(t, s, at(3*time.Second), event("acme", "order-1", `{"ok":true}`)))
	ts = tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskCompleted, ts["confirmed"].State)
	require.Equal(t, `{"ok":true}`, string(ts["confirmed"].Output))
	requireTime(t, at(3*time.Second), ts["confirmed"].FinishedAt)
	require.Equal(t, durabletype.TaskQueued, ts["ship"].State)

	// Delivered once: a second event finds nothing waiting.
	require.Equal(t, []int{0}, send(t, s, at(4*time.Second), event("acme", "order-1", `{"ok":false}`)))
	require.Equal(t, `{"ok":true}`, string(tasks(t, s, r.ID)["confirmed"].Output))

	c := claimOne(t, s, at(5*time.Second))
	require.Equal(t, "ship", c.Step)
	require.Equal(t, `{"ok":true}`, string(c.ParentOutputs["confirmed"]))
	mustApply(t, s, at(5*time.Second), complete(c, `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
}

func testEventBroadcast(t *testing.T, s store.Store) {
	sh := shape(eventStep("w"))
	var runs []store.NewRun
	for range 3 {
		runs = append(runs, startWait(t, s, at(0), "acme", sh, "go"))
	}
	other := startWait(t, s, at(0), "globex", sh, "go")
	// Two events with the key in one call: every waiting task receives the
	// first, exactly once; the second finds none waiting.
	require.Equal(t, []int{3, 0}, send(t, s, at(time.Second), event("acme", "go", `1`), event("acme", "go", `2`)))
	for _, r := range runs {
		require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
		require.Equal(t, `1`, string(tasks(t, s, r.ID)["w"].Output))
	}
	require.Equal(t, durabletype.TaskWaiting, states(t, s, other.ID)["w"])
	require.Equal(t, []int{1}, send(t, s, at(2*time.Second), event("globex", "go", `3`)))
	require.Equal(t, durabletype.RunCompleted, run(t, s, other.ID).Status)
}

func testEventLookback(t *testing.T, s store.Store) {
	send(t, s, at(0), event("acme", "k", `"early"`))
	send(t, s, at(time.Second), event("acme", "k", `"later"`))

	// Without a lookback an event sent before the wait began is not
	// delivered.
	plain := startWait(t, s, at(2*time.Second), "acme", shape(eventStep("w")), "k")
	require.Equal(t, durabletype.TaskWaiting, states(t, s, plain.ID)["w"])

	// With one, the first event sent within it is, at once.
	sh := shape(eventStep("w"))
	sh.Steps[0].Wait.Lookback = 1500 * time.Millisecond
	r := startWait(t, s, at(2*time.Second), "acme", sh, "k")
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskCompleted, ts["w"].State, "the event sent 1s before the wait is within the lookback")
	require.Equal(t, `"later"`, string(ts["w"].Output), "the first event within the lookback, not the earliest ever")
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)

	sh.Steps[0].Wait.Lookback = 5 * time.Second
	r = startWait(t, s, at(2*time.Second), "acme", sh, "k")
	require.Equal(t, `"early"`, string(tasks(t, s, r.ID)["w"].Output))

	// An event sent at the very moment the wait begins counts as sent
	// while it waits.
	send(t, s, at(3*time.Second), event("acme", "now", `"same instant"`))
	r = startWait(t, s, at(3*time.Second), "acme", shape(eventStep("w")), "now")
	require.Equal(t, durabletype.TaskCompleted, states(t, s, r.ID)["w"])

	// Events are kept until pruned.
	res, err := s.PruneEvents(ctx, &store.PruneEventsParams{Now: at(10 * time.Second), OlderThan: 8500 * time.Millisecond, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, 2, res.Deleted, "the events sent at 0s and 1s")
	r = startWait(t, s, at(10*time.Second), "acme", sh, "k")
	require.Equal(t, durabletype.TaskWaiting, states(t, s, r.ID)["w"], "the pruned events are gone")
}

func testEventTimeout(t *testing.T, s store.Store) {
	fails := shape(eventStep("w"), step("after", "w"))
	fails.Steps[0].Wait.Timeout = 10 * time.Second
	fails.OnFailure = &durabletype.OnFailureSpec{Retry: once()}
	rf := startWait(t, s, at(0), "acme", fails, "never")
	tf := tasks(t, s, rf.ID)["w"]
	requireTime(t, at(10*time.Second), tf.DueAt)

	skips := shape(eventStep("w"), step("other"), step("after", "w"), step("merge", "w", "other"))
	skips.Steps[0].Wait.Timeout = 10 * time.Second
	skips.Steps[0].Wait.SkipOnTimeout = true
	rs := newRun("wf", "acme", skips)
	create(t, s, at(0), rs)
	for _, c := range claim(t, s, at(0), 10) {
		if c.Step == "w" {
			mustApply(t, s, at(0), waitFor(c, "never"))
		} else {
			mustApply(t, s, at(0), complete(c, `1`))
		}
	}

	require.Equal(t, 0, fireAll(t, s, at(9*time.Second)), "nothing is due before the timeout")
	require.Equal(t, 2, fireAll(t, s, at(10*time.Second)))

	ts := tasks(t, s, rf.ID)
	require.Equal(t, durabletype.TaskFailed, ts["w"].State)
	require.Contains(t, ts["w"].Error, "no event")
	require.Equal(t, durabletype.TaskCancelled, ts["after"].State)
	rec := run(t, s, rf.ID)
	require.Equal(t, durabletype.RunFailed, rec.Status)
	require.Equal(t, "w", rec.FailedStep)

	st := states(t, s, rs.ID)
	require.Equal(t, durabletype.TaskSkipped, st["w"])
	require.Equal(t, durabletype.TaskSkipped, st["after"], "a child of the skipped wait alone is skipped")
	require.Equal(t, durabletype.TaskQueued, st["merge"], "a merge with a completed parent runs")

	// Too late: the event finds nothing waiting.
	require.Equal(t, []int{0}, send(t, s, at(11*time.Second), event("acme", "never", `1`)))
}

func testEventWaitCancelled(t *testing.T, s store.Store) {
	sh := shape(eventStep("w"))
	sh.Steps[0].Wait.Timeout = time.Hour
	r := startWait(t, s, at(0), "acme", sh, "k")
	require.NoError(t, cancelOne(t, s, at(time.Second), r.ID, ""))
	require.Equal(t, durabletype.TaskCancelled, states(t, s, r.ID)["w"])
	require.Equal(t, []int{0}, send(t, s, at(2*time.Second), event("acme", "k", `1`)))
	require.Equal(t, 0, fireAll(t, s, at(2*time.Hour)), "the wait's timeout went with it")
	require.Equal(t, durabletype.RunCancelled, run(t, s, r.ID).Status)
}

func testEventInvalid(t *testing.T, s store.Store) {
	for _, e := range []store.EventMessage{
		event("", "k", ``), event("acme", "", ``), event("acme", "a\x00b", ``), event("acme", "a\nb", ``),
		event("acme", string(make([]byte, 256)), ``), event("acme", "\xff", ``),
	} {
		_, err := s.SendEvents(ctx, &store.SendEventsParams{Now: at(0), Events: []store.EventMessage{event("acme", "fine", `1`), e}})
		require.ErrorIs(t, err, durabletype.ErrInvalidEvent, "%q/%q", e.Tenant, e.Key)
	}
	// Nothing of a refused call was kept: a wait with a lookback finds no
	// "fine" event.
	sh := shape(eventStep("w"))
	sh.Steps[0].Wait.Lookback = time.Hour
	r := startWait(t, s, at(time.Second), "acme", sh, "fine")
	require.Equal(t, durabletype.TaskWaiting, states(t, s, r.ID)["w"])

	// A worker's invalid key fails the step without retry.
	r2 := newRun("wf", "acme", shape(eventStep("w")))
	create(t, s, at(0), r2)
	c := claimOne(t, s, at(0))
	mustApply(t, s, at(0), waitFor(c, "bad\x01key"))
	ts := tasks(t, s, r2.ID)
	require.Equal(t, durabletype.TaskFailed, ts["w"].State)
	require.Contains(t, ts["w"].Error, "invalid event key")
}

func testSignal(t *testing.T, s store.Store) {
	sh := shape(step("a"), signalStep("approve", "approved", "a"), signalStep("also", "approved", "a"), step("done", "approve", "also"))
	r := newRun("wf", "acme", sh)
	create(t, s, at(0), r)

	// Sent before any step waits: kept with the run.
	mustSignal(t, s, &store.SignalParams{Now: at(time.Second), RunID: r.ID, Name: "approved", Payload: []byte(`"yes"`)})
	mustSignal(t, s, &store.SignalParams{Now: at(2 * time.Second), RunID: r.ID, Name: "approved", Payload: []byte(`"again"`)})
	c := claimOne(t, s, at(3*time.Second))
	mustApply(t, s, at(3*time.Second), complete(c, `1`))
	cs := claim(t, s, at(4*time.Second), 10)
	require.Len(t, cs, 2)
	for _, c := range cs {
		require.Equal(t, durabletype.KindEvent, c.Kind)
		mustApply(t, s, at(4*time.Second), waitFor(c, ""))
	}
	ts := tasks(t, s, r.ID)
	for _, name := range []string{"approve", "also"} {
		require.Equal(t, durabletype.TaskCompleted, ts[name].State, name)
		require.Equal(t, `"yes"`, string(ts[name].Output), "every wait on the signal receives the first one sent")
	}
	require.Equal(t, durabletype.TaskQueued, ts["done"].State)

	// Not found, another tenant's, invalid, settled.
	_, err := s.Signal(ctx, &store.SignalParams{Now: at(5 * time.Second), RunID: uuid.New(), Name: "approved"})
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	_, err = s.Signal(ctx, &store.SignalParams{Now: at(5 * time.Second), RunID: r.ID, Tenant: "globex", Name: "approved"})
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	_, err = s.Signal(ctx, &store.SignalParams{Now: at(5 * time.Second), RunID: r.ID, Name: "bad\x00name"})
	require.ErrorIs(t, err, durabletype.ErrInvalidEvent)
	mustApply(t, s, at(6*time.Second), complete(claimOne(t, s, at(6*time.Second)), `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
	_, err = s.Signal(ctx, &store.SignalParams{Now: at(7 * time.Second), RunID: r.ID, Name: "approved"})
	require.ErrorIs(t, err, durabletype.ErrRunSettled)

	// A signal sent while a step waits is delivered at once; an event with
	// the signal's name is not a signal.
	r2 := newRun("wf", "acme", shape(signalStep("s", "go")))
	create(t, s, at(0), r2)
	mustApply(t, s, at(0), waitFor(claimOne(t, s, at(0)), ""))
	require.Equal(t, []int{0}, send(t, s, at(time.Second), event("acme", "go", `1`)))
	require.Equal(t, durabletype.TaskWaiting, states(t, s, r2.ID)["s"])
	mustSignal(t, s, &store.SignalParams{Now: at(2 * time.Second), RunID: r2.ID, Tenant: "acme", Name: "go", Payload: []byte(`2`)})
	require.Equal(t, `2`, string(tasks(t, s, r2.ID)["s"].Output))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r2.ID).Status)
}

// ---- child runs ---------------------------------------------------------

func childShape() *durabletype.Shape { return shape(step("c1"), step("c2", "c1")) }

func childStep(name, result string, parents ...string) durabletype.StepSpec {
	s := step(name, parents...)
	s.Child = &durabletype.ChildSpec{Workflow: "child", Result: result}
	return s
}

func spawn(c *store.ClaimedTask, input string) store.Outcome {
	return store.Outcome{Task: c.Ref(), Kind: store.OutcomeSpawn,
		Child: &store.NewRun{Workflow: "child", Input: []byte(input), Shape: childShape()}}
}

// workChild claims and completes (or fails, at step fail) every task of
// child runs until none is left.
func workChild(t *testing.T, s store.Store, now time.Time, fail string) {
	t.Helper()
	for {
		cs := claim(t, s, now, 10, "child")
		if len(cs) == 0 {
			return
		}
		for _, c := range cs {
			if c.Step == fail {
				mustApply(t, s, now, failed(c, "child broke", true))
				continue
			}
			mustApply(t, s, now, complete(c, fmt.Sprintf(`{"step":%q,"input":%s}`, c.Step, c.Input)))
		}
	}
}

func testChildRun(t *testing.T, s store.Store) {
	sh := shape(childStep("ship", "c2"), step("after", "ship"))
	p := newRun("wf", "acme", sh)
	p.Priority = 2
	create(t, s, at(0), p)
	c := claimOne(t, s, at(0))
	require.Equal(t, durabletype.KindChild, c.Kind)
	mustApply(t, s, at(0), spawn(c, `"box"`))

	pt := tasks(t, s, p.ID)["ship"]
	require.Equal(t, durabletype.TaskWaiting, pt.State)
	childID := dag.ChildID(p.ID, "ship", c.Token, c.ClaimedAt)
	require.Equal(t, childID, pt.Child, "the child's ID comes from the parent, the step and the claim")
	child := run(t, s, childID)
	require.Equal(t, "child", child.Workflow)
	require.Equal(t, "acme", child.Tenant, "a child runs for its parent's tenant")
	require.Equal(t, 2, child.Priority, "and with its priority")
	require.Equal(t, &durabletype.ParentRef{RunID: p.ID, Step: "ship", Result: "c2"}, child.Parent)
	require.Equal(t, `"box"`, string(child.Input))

	// Recording the same outcome again starts no second child.
	require.Equal(t, []store.FinishStatus{store.FinishDuplicate}, finish(t, s, at(time.Second), spawn(c, `"box"`)))
	kids := listAll(t, s, store.RunFilter{Parent: p.ID}, 10)
	require.Equal(t, []uuid.UUID{childID}, ids(kids))
	require.Equal(t, p.ID, kids[0].ParentID)
	require.Equal(t, "ship", kids[0].ParentStep)
	require.Empty(t, listAll(t, s, store.RunFilter{Parent: childID}, 10))

	workChild(t, s, at(2*time.Second), "")
	require.Equal(t, durabletype.RunCompleted, run(t, s, childID).Status)
	pts := tasks(t, s, p.ID)
	require.Equal(t, durabletype.TaskCompleted, pts["ship"].State)
	require.Equal(t, `{"step":"c2","input":"box"}`, string(pts["ship"].Output), "the child's result step's output")
	require.Equal(t, durabletype.TaskQueued, pts["after"].State)
	c = claimOne(t, s, at(3*time.Second))
	require.Equal(t, `{"step":"c2","input":"box"}`, string(c.ParentOutputs["ship"]))
}

func testChildFailureRetries(t *testing.T, s store.Store) {
	sh := shape(childStep("ship", "c2"))
	sh.Steps[0].Retry = durabletype.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Second, Factor: 1}
	p := newRun("wf", "acme", sh)
	create(t, s, at(0), p)
	c1 := claimOne(t, s, at(0))
	mustApply(t, s, at(0), spawn(c1, `1`))
	first := dag.ChildID(p.ID, "ship", c1.Token, c1.ClaimedAt)
	workChild(t, s, at(time.Second), "c1")
	require.Equal(t, durabletype.RunFailed, run(t, s, first).Status)

	pt := tasks(t, s, p.ID)["ship"]
	require.Equal(t, durabletype.TaskQueued, pt.State, "a child's failure fails the attempt, retried per the step's policy")
	require.Contains(t, pt.Error, first.String())
	require.Contains(t, pt.Error, "child broke")
	require.Equal(t, 1, fireAll(t, s, at(2*time.Second)))
	c2 := claimOne(t, s, at(2*time.Second))
	require.Equal(t, 2, c2.Attempt)
	mustApply(t, s, at(2*time.Second), spawn(c2, `2`))
	second := dag.ChildID(p.ID, "ship", c2.Token, c2.ClaimedAt)
	require.NotEqual(t, first, second, "each attempt starts its own child")
	workChild(t, s, at(3*time.Second), "c1")
	rec := run(t, s, p.ID)
	require.Equal(t, durabletype.RunFailed, rec.Status, "the last attempt's child failed too")
	require.Equal(t, "ship", rec.FailedStep)
	require.Len(t, listAll(t, s, store.RunFilter{Parent: p.ID}, 10), 2)
}

func testChildResultSkipped(t *testing.T, s store.Store) {
	sh := shape(childStep("ship", "c2"), step("after", "ship"), step("other"), step("merge", "ship", "other"))
	p := newRun("wf", "acme", sh)
	create(t, s, at(0), p)
	for _, c := range claim(t, s, at(0), 10) {
		if c.Step == "ship" {
			mustApply(t, s, at(0), spawn(c, `1`))
		} else {
			mustApply(t, s, at(0), complete(c, `1`))
		}
	}
	c := claim(t, s, at(time.Second), 10, "child")
	require.Len(t, c, 1)
	mustApply(t, s, at(time.Second), complete(c[0], `1`))
	c = claim(t, s, at(time.Second), 10, "child")
	require.Len(t, c, 1)
	mustApply(t, s, at(time.Second), store.Outcome{Task: c[0].Ref(), Kind: store.OutcomeSkip, Reason: "nothing to do"})
	st := states(t, s, p.ID)
	require.Equal(t, durabletype.TaskSkipped, st["ship"], "the child's result step was skipped: so is the step")
	require.Equal(t, durabletype.TaskSkipped, st["after"])
	require.Equal(t, durabletype.TaskQueued, st["merge"])
}

func testCancelParentCancelsChildren(t *testing.T, s store.Store) {
	sh := shape(childStep("a", "c2"), childStep("b", "c2"))
	p := newRun("wf", "acme", sh)
	create(t, s, at(0), p)
	for _, c := range claim(t, s, at(0), 10) {
		mustApply(t, s, at(0), spawn(c, `1`))
	}
	kids := ids(listAll(t, s, store.RunFilter{Parent: p.ID}, 10))
	require.Len(t, kids, 2)
	running := claim(t, s, at(time.Second), 1, "child")
	require.Len(t, running, 1)

	require.NoError(t, cancelOne(t, s, at(2*time.Second), p.ID, ""))
	for _, id := range kids {
		rec := run(t, s, id)
		require.Equal(t, durabletype.RunCancelled, rec.Status, "cancelling the parent cancels its children")
		require.Contains(t, rec.Error, "parent")
	}
	hb, err := s.Heartbeat(ctx, &store.HeartbeatParams{Now: at(3 * time.Second), WorkerID: worker, Tasks: []store.TaskRef{running[0].Ref()}})
	require.NoError(t, err)
	require.Equal(t, []store.TaskRef{running[0].Ref()}, hb.Cancelled, "the child's running step learns it")
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, at(3*time.Second), complete(running[0], `1`)))
	require.Equal(t, durabletype.RunCancelled, run(t, s, p.ID).Status)

	// A failed parent gives its children up too.
	sh2 := shape(childStep("a", "c2"), step("boom"))
	p2 := newRun("wf", "acme", sh2)
	create(t, s, at(4*time.Second), p2)
	var boom *store.ClaimedTask
	for _, c := range claim(t, s, at(4*time.Second), 10) {
		if c.Step == "a" {
			mustApply(t, s, at(4*time.Second), spawn(c, `1`))
		} else {
			boom = c
		}
	}
	require.NotNil(t, boom)
	mustApply(t, s, at(5*time.Second), failed(boom, "no", true))
	kid := ids(listAll(t, s, store.RunFilter{Parent: p2.ID}, 10))
	require.Len(t, kid, 1)
	require.Equal(t, durabletype.RunCancelled, run(t, s, kid[0]).Status)
	require.Equal(t, durabletype.TaskCancelled, states(t, s, p2.ID)["a"])
}

func testChildSettlesAfterParentCancelled(t *testing.T, s store.Store) {
	// The child's last step runs while the parent is cancelled: the child's
	// late outcome is stale (its run was cancelled), and the parent stays
	// CANCELLED; both settle, neither waits for the other.
	sh := shape(childStep("a", "c1"))
	p := newRun("wf", "acme", sh)
	create(t, s, at(0), p)
	mustApply(t, s, at(0), spawn(claimOne(t, s, at(0)), `1`))
	c := claim(t, s, at(time.Second), 1, "child")
	require.Len(t, c, 1)
	var wg sync.WaitGroup
	wg.Go(func() { _ = cancelOne(t, s, at(2*time.Second), p.ID, "") })
	wg.Go(func() { finish(t, s, at(2*time.Second), complete(c[0], `"done"`)) })
	wg.Wait()
	require.Equal(t, durabletype.RunCancelled, run(t, s, p.ID).Status)
	require.Equal(t, durabletype.TaskCancelled, states(t, s, p.ID)["a"])
	kids := listAll(t, s, store.RunFilter{Parent: p.ID}, 10)
	require.Len(t, kids, 1)
	child := run(t, s, kids[0].ID)
	require.True(t, child.Settled(), "the child settled: %s", child.Status)
	res, err := s.ApplyInbox(ctx, &store.ApplyInboxParams{Now: at(3 * time.Second), Limit: 100})
	require.NoError(t, err)
	require.Zero(t, res.Applied, "nothing is left pending")
}

// ---- map steps ----------------------------------------------------------

func mapStep(name, over string, parents ...string) durabletype.StepSpec {
	s := step(name, append([]string{over}, parents...)...)
	s.Map = &durabletype.MapSpec{Over: over}
	return s
}

func fanOut(c *store.ClaimedTask, items ...string) store.Outcome {
	o := store.Outcome{Task: c.Ref(), Kind: store.OutcomeFanOut, Items: [][]byte{}}
	for _, it := range items {
		o.Items = append(o.Items, []byte(it))
	}
	return o
}

// startMap creates a run list → m (map over list) → join, completes list
// and fans m out to items.
func startMap(t *testing.T, s store.Store, now time.Time, tenant string, sh *durabletype.Shape, items ...string) store.NewRun {
	t.Helper()
	r := newRun("wf", tenant, sh)
	create(t, s, now, r)
	mustApply(t, s, now, complete(claimOne(t, s, now), `["list"]`))
	c := claimOne(t, s, now)
	require.Equal(t, durabletype.KindMap, c.Kind)
	require.Equal(t, `["list"]`, string(c.ParentOutputs["list"]))
	mustApply(t, s, now, fanOut(c, items...))
	return r
}

func mapShape() *durabletype.Shape {
	return shape(step("list"), mapStep("m", "list"), step("join", "m"))
}

func testMapStep(t *testing.T, s store.Store) {
	r := startMap(t, s, at(0), "acme", mapShape(), `"a"`, `"b"`, `"c"`)
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskWaiting, ts["m"].State)
	require.Equal(t, 3, ts["m"].Items)
	require.Equal(t, 3, ts["m"].Left)
	all, err := s.ListTasks(ctx, r.ID)
	require.NoError(t, err)
	var order []string
	for _, tk := range all {
		order = append(order, tk.Name)
	}
	require.Equal(t, []string{"list", "m", dag.ItemName("m", 0), dag.ItemName("m", 1), dag.ItemName("m", 2), "join"}, order,
		"a map step's items follow it, in item order")

	cs := claim(t, s, at(time.Second), 10)
	require.Len(t, cs, 3)
	slices.SortFunc(cs, func(a, b *store.ClaimedTask) int { return a.Item - b.Item })
	for k, c := range cs {
		require.Equal(t, durabletype.KindItem, c.Kind)
		require.Equal(t, "m", c.Map)
		require.Equal(t, k, c.Item)
		require.Equal(t, dag.ItemName("m", k), c.Step)
		require.Equal(t, []string{`"a"`, `"b"`, `"c"`}[k], string(c.Input), "an item's input is its element")
	}
	// Completed out of order.
	mustApply(t, s, at(2*time.Second), complete(cs[2], `"C"`), complete(cs[0], `"A"`))
	ts = tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskWaiting, ts["m"].State)
	require.Equal(t, 1, ts["m"].Left)
	mustApply(t, s, at(3*time.Second), complete(cs[1], `"B"`))
	ts = tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskCompleted, ts["m"].State)
	requireTime(t, at(3*time.Second), ts["m"].FinishedAt)
	join := claimOne(t, s, at(4*time.Second))
	require.Equal(t, "join", join.Step)
	require.Equal(t, [][]byte{[]byte(`"A"`), []byte(`"B"`), []byte(`"C"`)}, join.ParentItems["m"], "the join receives the outputs in item order")
	mustApply(t, s, at(4*time.Second), complete(join, `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
}

func testMapEmpty(t *testing.T, s store.Store) {
	r := startMap(t, s, at(0), "acme", mapShape())
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskCompleted, ts["m"].State, "no items: the map step completes at once")
	join := claimOne(t, s, at(time.Second))
	require.Contains(t, join.ParentItems, "m")
	require.Empty(t, join.ParentItems["m"])
}

// testMapOverInput: a map step over the run's input (MapSpec.Over empty,
// durable.MapInput) has no parent: it is ready when the run starts, its
// claim carries the run's input, and its fan-out, recorded once, works as
// any map step's.
func testMapOverInput(t *testing.T, s store.Store) {
	m := step("m")
	m.Map = &durabletype.MapSpec{}
	sh := shape(m, step("join", "m"))
	r := newRun("wf", "acme", sh)
	create(t, s, at(0), r)
	require.Equal(t, durabletype.TaskQueued, tasks(t, s, r.ID)["m"].State, "a root map step is ready at once")
	c := claimOne(t, s, at(0))
	require.Equal(t, durabletype.KindMap, c.Kind)
	require.Equal(t, "m", c.Step)
	require.Equal(t, string(r.Input), string(c.Input), "the map step's claim carries the run's input")
	require.Empty(t, c.ParentOutputs)
	mustApply(t, s, at(0), fanOut(c, `"a"`, `"b"`))
	require.Equal(t, []store.FinishStatus{store.FinishDuplicate}, finish(t, s, at(0), fanOut(c, `"x"`)),
		"the items are fixed when the step fans out")
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskWaiting, ts["m"].State)
	require.Equal(t, 2, ts["m"].Items)

	cs := claim(t, s, at(time.Second), 10)
	require.Len(t, cs, 2)
	slices.SortFunc(cs, func(a, b *store.ClaimedTask) int { return a.Item - b.Item })
	require.Equal(t, `"a"`, string(cs[0].Input))
	require.Equal(t, `"b"`, string(cs[1].Input))
	mustApply(t, s, at(2*time.Second), complete(cs[1], `"B"`), complete(cs[0], `"A"`))
	join := claimOne(t, s, at(3*time.Second))
	require.Equal(t, "join", join.Step)
	require.Equal(t, [][]byte{[]byte(`"A"`), []byte(`"B"`)}, join.ParentItems["m"])
	mustApply(t, s, at(3*time.Second), complete(join, `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)

	// An empty list completes the step at once.
	r = newRun("wf", "acme", sh)
	create(t, s, at(4*time.Second), r)
	mustApply(t, s, at(4*time.Second), fanOut(claimOne(t, s, at(4*time.Second))))
	require.Equal(t, durabletype.TaskCompleted, tasks(t, s, r.ID)["m"].State)
	join = claimOne(t, s, at(5*time.Second))
	require.Contains(t, join.ParentItems, "m")
	require.Empty(t, join.ParentItems["m"])
}

func testMapItemFailure(t *testing.T, s store.Store) {
	sh := mapShape()
	sh.Steps[1].Retry = durabletype.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Second, Factor: 1}
	sh.OnFailure = &durabletype.OnFailureSpec{Retry: once()}
	r := startMap(t, s, at(0), "acme", sh, `0`, `1`, `2`, `3`)
	cs := claim(t, s, at(0), 10)
	require.Len(t, cs, 4)
	slices.SortFunc(cs, func(a, b *store.ClaimedTask) int { return a.Item - b.Item })
	mustApply(t, s, at(time.Second), complete(cs[0], `0`), failed(cs[1], "flaky", false))
	it := tasks(t, s, r.ID)[dag.ItemName("m", 1)]
	require.Equal(t, durabletype.TaskQueued, it.State, "each item retries on its own")
	requireTime(t, at(2*time.Second), it.DueAt)
	require.Equal(t, 1, fireAll(t, s, at(2*time.Second)))
	again := claim(t, s, at(2*time.Second), 10)
	require.Len(t, again, 1)
	require.Equal(t, 2, again[0].Attempt)
	// Item 3 is still running (cs[3]); item 2 fails for good.
	mustApply(t, s, at(3*time.Second), failed(cs[2], "bad item", true))
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskFailed, ts[dag.ItemName("m", 2)].State)
	require.Equal(t, durabletype.TaskFailed, ts["m"].State)
	require.Contains(t, ts["m"].Error, "item 2")
	require.Contains(t, ts["m"].Error, "bad item")
	require.Equal(t, durabletype.TaskCompleted, ts[dag.ItemName("m", 0)].State)
	require.Equal(t, durabletype.TaskCancelled, ts[dag.ItemName("m", 1)].State)
	require.Equal(t, durabletype.TaskCancelled, ts[dag.ItemName("m", 3)].State, "running items are cancelled too")
	require.Equal(t, durabletype.TaskCancelled, ts["join"].State)
	rec := run(t, s, r.ID)
	require.Equal(t, durabletype.RunFailed, rec.Status)
	require.Equal(t, "m", rec.FailedStep)
	require.Equal(t, []store.FinishStatus{store.FinishStale, store.FinishStale},
		finish(t, s, at(4*time.Second), complete(cs[3], `3`), complete(again[0], `1`)))
	of := claimOne(t, s, at(4*time.Second))
	require.Equal(t, durabletype.OnFailureTask, of.Step)
	require.Equal(t, "m", of.FailedStep)
	mustApply(t, s, at(4*time.Second), complete(of, ``))

	// Replay: the completed item keeps its output, the others run again.
	require.NoError(t, replayOne(t, s, at(5*time.Second), r.ID, "", ""))
	c := claimOne(t, s, at(5*time.Second))
	require.Equal(t, "m", c.Step)
	mustApply(t, s, at(5*time.Second), fanOut(c, `0`, `1`, `2`, `3`))
	cs = claim(t, s, at(6*time.Second), 10)
	var redo []int
	for _, c := range cs {
		redo = append(redo, c.Item)
		mustApply(t, s, at(6*time.Second), complete(c, fmt.Sprintf(`%d`, c.Item*10)))
	}
	slices.Sort(redo)
	require.Equal(t, []int{1, 2, 3}, redo, "item 0 completed with the same input: it is kept")
	join := claimOne(t, s, at(7*time.Second))
	require.Equal(t, [][]byte{[]byte(`0`), []byte(`10`), []byte(`20`), []byte(`30`)}, join.ParentItems["m"])

	// A replay from the map step runs every item again, and a fan-out to
	// fewer items drops the rest.
	mustApply(t, s, at(7*time.Second), complete(join, `1`))
	require.NoError(t, replayOne(t, s, at(8*time.Second), r.ID, "", "m"))
	c = claimOne(t, s, at(8*time.Second))
	mustApply(t, s, at(8*time.Second), fanOut(c, `0`, `1`))
	cs = claim(t, s, at(9*time.Second), 10)
	require.Len(t, cs, 2)
	for _, c := range cs {
		mustApply(t, s, at(9*time.Second), complete(c, `"x"`))
	}
	require.NotContains(t, tasks(t, s, r.ID), dag.ItemName("m", 2))
	join = claimOne(t, s, at(10*time.Second))
	require.Equal(t, [][]byte{[]byte(`"x"`), []byte(`"x"`)}, join.ParentItems["m"])
}

func testMapCancel(t *testing.T, s store.Store) {
	r := startMap(t, s, at(0), "acme", mapShape(), `1`, `2`, `3`)
	running := claim(t, s, at(0), 1)
	require.Len(t, running, 1)
	require.NoError(t, cancelOne(t, s, at(time.Second), r.ID, ""))
	for name, st := range states(t, s, r.ID) {
		if name != "list" {
			require.Equal(t, durabletype.TaskCancelled, st, name)
		}
	}
	require.Empty(t, claim(t, s, at(2*time.Second), 10), "cancelled items left the queue")
	hb, err := s.Heartbeat(ctx, &store.HeartbeatParams{Now: at(2 * time.Second), WorkerID: worker, Tasks: []store.TaskRef{running[0].Ref()}})
	require.NoError(t, err)
	require.Equal(t, []store.TaskRef{running[0].Ref()}, hb.Cancelled)
}

func testMapFairness(t *testing.T, s store.Store) {
	// One tenant's map of 30 items does not crowd out another tenant's
	// runs: claims alternate while both have work.
	startMap(t, s, at(0), "big", mapShape(), slices.Repeat([]string{`1`}, 30)...)
	for range 5 {
		create(t, s, at(time.Second), newRun("wf", "small", shape(step("a"))))
	}
	var seq []string
	for range 10 {
		c := claimOne(t, s, at(2*time.Second))
		seq = append(seq, c.Tenant)
	}
	require.Equal(t, 5, countOf(seq[:10], "small"), "claims %v", seq)
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

func testWaitingStats(t *testing.T, s store.Store) {
	startWait(t, s, at(0), "acme", shape(eventStep("w")), "k")
	startMap(t, s, at(0), "acme", mapShape(), `1`)
	st, err := s.Stats(ctx, &store.StatsParams{Now: at(time.Second), Window: time.Hour})
	require.NoError(t, err)
	require.Len(t, st.Queues, 1)
	q := st.Queues[0]
	require.Equal(t, 2, q.Waiting, "the event wait and the map step wait")
	require.Equal(t, 1, q.Ready, "the item")
	running := 0
	for _, rc := range st.Runs {
		if rc.Status == durabletype.RunRunning && !rc.Settled {
			running += rc.Count
		}
	}
	require.Equal(t, 2, running, "runs that only wait are in flight")
	page := listAll(t, s, store.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunRunning}}, 10)
	require.Len(t, page, 2)
}

// mustSignal sends a signal that must be taken, and returns the result.
func mustSignal(t *testing.T, s store.Store, p *store.SignalParams) *store.SignalResult {
	t.Helper()
	res, err := s.Signal(ctx, p)
	require.NoError(t, err)
	return res
}

// testListTopLevel: the top-level filter keeps the runs no parent run
// started, with any other filter (runs in flight are found another way),
// across pages; with a parent it keeps nothing.
func testListTopLevel(t *testing.T, s store.Store) {
	p := newRun("wf", "acme", shape(childStep("ship", "c2"), step("after", "ship")))
	create(t, s, at(0), p)
	c := claimOne(t, s, at(0))
	require.Equal(t, durabletype.KindChild, c.Kind)
	mustApply(t, s, at(0), spawn(c, `"box"`))
	childID := dag.ChildID(p.ID, "ship", c.Token, c.ClaimedAt)
	other := newRun("wf", "acme", shape(step("a")))
	create(t, s, at(time.Second), other)
	lone := newRun("wf", "zeta", shape(step("a")))
	create(t, s, at(2*time.Second), lone)

	running := []durabletype.RunStatus{durabletype.RunRunning}
	require.Len(t, listAll(t, s, store.RunFilter{}, 10), 4, "the child is listed without the filter")
	for _, page := range []int{1, 2, 10} {
		require.Equal(t, []uuid.UUID{lone.ID, other.ID, p.ID}, ids(listAll(t, s, store.RunFilter{TopLevel: true}, page)), "page size %d", page)
		require.Equal(t, []uuid.UUID{lone.ID, other.ID, p.ID}, ids(listAll(t, s, store.RunFilter{TopLevel: true, Statuses: running}, page)),
			"runs in flight, page size %d", page)
	}
	require.Equal(t, []uuid.UUID{other.ID, p.ID}, ids(listAll(t, s, store.RunFilter{TopLevel: true, Tenant: "acme"}, 10)))
	require.Equal(t, []uuid.UUID{other.ID, p.ID}, ids(listAll(t, s, store.RunFilter{TopLevel: true, Tenant: "acme", Statuses: running}, 10)))
	require.Equal(t, []uuid.UUID{childID}, ids(listAll(t, s, store.RunFilter{Parent: p.ID}, 10)))
	require.Empty(t, listAll(t, s, store.RunFilter{Parent: p.ID, TopLevel: true}, 10))

	// Settled, a child is still not top-level: it fails, and its parent
	// with it.
	workChild(t, s, at(3*time.Second), "c1")
	require.Equal(t, durabletype.RunFailed, run(t, s, childID).Status)
	failedOnly := []durabletype.RunStatus{durabletype.RunFailed}
	require.ElementsMatch(t, []uuid.UUID{childID, p.ID}, ids(listAll(t, s, store.RunFilter{Statuses: failedOnly}, 10)))
	require.Equal(t, []uuid.UUID{p.ID}, ids(listAll(t, s, store.RunFilter{Statuses: failedOnly, TopLevel: true}, 10)))
}
