package dag

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

func TestItemNames(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"a", "charge-lines", "a/b:c.d_e", "9"} {
		for _, k := range []int{0, 7, 10, 99_999} {
			name := ItemName(step, k)
			got, n, ok := ParseItem(name)
			require.True(t, ok, name)
			require.Equal(t, step, got)
			require.Equal(t, k, n)
			require.Greater(t, name, "z", "items sort after every step name: %s", name)
			require.Greater(t, name, durabletype.OnFailureTask)
			require.Equal(t, step+"["+itoa(k)+"]", DisplayName(name))
		}
	}
	for _, bad := range []string{"a", "~a", "~a[", "~a[]", "~[1]", "~a[-1]", "~a[01]", "~a[1", "a[1]", "~a[x]"} {
		_, _, ok := ParseItem(bad)
		require.False(t, ok, bad)
		require.Equal(t, bad, DisplayName(bad))
	}
	require.Equal(t, "~a[", ItemPrefix("a"))
}

func itoa(k int) string {
	return ItemName("x", k)[3 : len(ItemName("x", k))-1]
}

func TestFits(t *testing.T) {
	t.Parallel()
	kinds := []durabletype.TaskKind{durabletype.KindStep, durabletype.KindOnFailure, durabletype.KindEvent, durabletype.KindChild, durabletype.KindMap, durabletype.KindItem}
	fitting := map[store.OutcomeKind][]durabletype.TaskKind{
		store.OutcomeComplete: {durabletype.KindStep, durabletype.KindOnFailure, durabletype.KindItem},
		store.OutcomeFail:     kinds,
		store.OutcomeRelease:  kinds,
		store.OutcomeSkip:     {durabletype.KindStep, durabletype.KindOnFailure, durabletype.KindEvent, durabletype.KindChild, durabletype.KindMap},
		store.OutcomeWait:     {durabletype.KindEvent},
		store.OutcomeSpawn:    {durabletype.KindChild},
		store.OutcomeFanOut:   {durabletype.KindMap},
	}
	for o, ok := range fitting {
		for _, k := range kinds {
			want := false
			for _, f := range ok {
				want = want || f == k
			}
			require.Equal(t, want, fits(k, o), "kind %s, outcome %d", k, o)
		}
	}
}

func TestChildID(t *testing.T) {
	t.Parallel()
	p := uuid.New()
	a := ChildID(p, "ship", 7, t0)
	require.Equal(t, a, ChildID(p, "ship", 7, t0), "deterministic")
	require.NotEqual(t, a, ChildID(p, "ship", 8, t0), "per claim")
	require.NotEqual(t, a, ChildID(p, "ship2", 7, t0), "per step")
	require.NotEqual(t, a, ChildID(uuid.New(), "ship", 7, t0), "per parent")
	require.Equal(t, uuid.Version(7), a.Version())
	require.Equal(t, uuid.RFC4122, a.Variant())
	// Its time is the attempt's, to the millisecond, and IDs sort by it.
	sec, nsec := a.Time().UnixTime()
	require.Equal(t, t0.UnixMilli(), time.Unix(sec, nsec).UnixMilli())
	later := ChildID(p, "ship", 7, t0.Add(time.Millisecond))
	require.Negative(t, bytes.Compare(a[:], later[:]))
	hour := ChildID(p, "ship", 7, t0.Add(time.Hour))
	require.Equal(t, a[6:], hour[6:], "the hash bits do not depend on the time")
}

func TestSignalKeys(t *testing.T) {
	t.Parallel()
	k, sig := ParseWaitKey(SignalKey("go"))
	require.True(t, sig)
	require.Equal(t, "go", k)
	k, sig = ParseWaitKey("go")
	require.False(t, sig)
	require.Equal(t, "go", k)
	require.False(t, ValidEventKey(SignalKey("go")), "no event key is a signal's")
}

func TestCompileKinds(t *testing.T) {
	t.Parallel()
	waiting := st("w")
	waiting.Wait = &durabletype.WaitSpec{Timeout: time.Hour, SkipOnTimeout: true, Lookback: time.Minute}
	child := st("c")
	child.Child = &durabletype.ChildSpec{Workflow: "other", Result: "r"}
	mapped := st("m", "l")
	mapped.Map = &durabletype.MapSpec{Over: "l"}
	c, err := Compile(&durabletype.Shape{Steps: []durabletype.StepSpec{waiting, child, st("l"), mapped}})
	require.NoError(t, err)
	require.Equal(t, durabletype.KindEvent, c.Kind(0))
	require.Equal(t, durabletype.KindChild, c.Kind(1))
	require.Equal(t, durabletype.KindStep, c.Kind(2))
	require.Equal(t, durabletype.KindMap, c.Kind(3))

	bad := map[string]durabletype.StepSpec{}
	two := st("x")
	two.Wait, two.Child = &durabletype.WaitSpec{}, &durabletype.ChildSpec{Workflow: "o", Result: "r"}
	bad["two kinds"] = two
	neg := st("x")
	neg.Wait = &durabletype.WaitSpec{Timeout: -1}
	bad["negative timeout"] = neg
	skip := st("x")
	skip.Wait = &durabletype.WaitSpec{SkipOnTimeout: true}
	bad["skip without timeout"] = skip
	sig := st("x")
	sig.Wait = &durabletype.WaitSpec{Signal: "a\nb"}
	bad["bad signal"] = sig
	noWf := st("x")
	noWf.Child = &durabletype.ChildSpec{Workflow: "", Result: "r"}
	bad["no child workflow"] = noWf
	over := st("x")
	over.Map = &durabletype.MapSpec{Over: "nope"}
	bad["map over a non-parent"] = over
	for name, spec := range bad {
		_, err := Compile(&durabletype.Shape{Steps: []durabletype.StepSpec{st("l"), spec}})
		require.ErrorIs(t, err, ErrInvalidKind, name)
	}
}

// startSteps starts a run of steps for the wait tests.
func startSteps(t *testing.T, steps ...durabletype.StepSpec) *Run {
	t.Helper()
	c, err := Compile(&durabletype.Shape{Steps: steps})
	require.NoError(t, err)
	r, _ := Start(store.Run{ID: uuid.New(), Workflow: "wf", Tenant: "acme"}, c, t0, time.Time{})
	return r
}

func claimed(t *testing.T, r *Run, i int, token int64) {
	t.Helper()
	_, ok := r.Claim(i, token, "w", t0)
	require.True(t, ok)
}

func TestDeliverOnlyToTheWaitingClaim(t *testing.T) {
	t.Parallel()
	w := st("w")
	w.Wait = &durabletype.WaitSpec{Lookback: time.Minute}
	r := startSteps(t, w, st("after", "w"))
	claimed(t, r, 0, 10)
	fx, status := r.Finish(0, &store.Outcome{Task: store.TaskRef{RunID: r.Rec.ID, Step: "w", Token: 10}, Kind: store.OutcomeWait, Key: "k"}, t0)
	require.Equal(t, store.FinishApplied, status)
	require.Equal(t, []int{0}, fx.Waits)
	require.Equal(t, durabletype.TaskWaiting, r.Tasks[0].State)
	require.Equal(t, WaitQuery{I: 0, Run: r.Rec.ID, Tenant: "acme", Key: "k", Since: t0.Add(-time.Minute)}, r.WaitQuery(0, t0))

	_, ok := r.Deliver(0, 11, []byte(`1`), t0) // another claim's
	require.False(t, ok)
	fx, ok = r.Deliver(0, 10, []byte(`1`), t0.Add(time.Second))
	require.True(t, ok)
	require.Equal(t, durabletype.TaskCompleted, r.Tasks[0].State)
	require.Equal(t, []int{1}, fx.Enqueued)
	_, ok = r.Deliver(0, 10, []byte(`2`), t0.Add(2*time.Second)) // once
	require.False(t, ok)
	require.Equal(t, `1`, string(r.Tasks[0].Output))
}

func TestFanOutKeepsCompletedItemsOfTheSameInput(t *testing.T) {
	t.Parallel()
	m := st("m", "l")
	m.Map = &durabletype.MapSpec{Over: "l"}
	r := startSteps(t, st("l"), m)
	r.Tasks[0].State = durabletype.TaskCompleted
	r.Tasks[1].State = durabletype.TaskQueued
	claimed(t, r, 1, 5)
	ref := store.TaskRef{RunID: r.Rec.ID, Step: "m", Token: 5}
	fx, _ := r.Finish(1, &store.Outcome{Task: ref, Kind: store.OutcomeFanOut, Items: [][]byte{[]byte(`a`), []byte(`b`), []byte(`c`)}}, t0)
	require.Len(t, fx.NewTasks, 3)
	require.Len(t, fx.Enqueued, 3)
	require.Equal(t, 3, r.Tasks[1].Left)

	// As stored after item 0 completed and item 1 failed, then a replay
	// fanned out again to a, B: item 0 keeps its output, item 1 runs again
	// with its new input, item 2 goes.
	stored := []store.Task{
		{RunID: r.Rec.ID, Name: ItemName("m", 0), Kind: durabletype.KindItem, State: durabletype.TaskCompleted, Item: 0, Input: []byte(`a`), Output: []byte(`A`)},
		{RunID: r.Rec.ID, Name: ItemName("m", 1), Kind: durabletype.KindItem, State: durabletype.TaskFailed, Item: 1, Input: []byte(`b`)},
		{RunID: r.Rec.ID, Name: ItemName("m", 2), Kind: durabletype.KindItem, State: durabletype.TaskCancelled, Item: 2, Input: []byte(`c`)},
	}
	r2, err := Load(r.Rec, r.Shape, []store.Task{r.Tasks[0], {RunID: r.Rec.ID, Name: "m", Kind: durabletype.KindMap, State: durabletype.TaskQueued, Items: 3}})
	require.NoError(t, err)
	r2.LoadItems = func(*Run, int) ([]store.Task, error) { return stored, nil }
	claimed(t, r2, 1, 6)
	fx, _ = r2.Finish(1, &store.Outcome{Task: store.TaskRef{RunID: r.Rec.ID, Step: "m", Token: 6}, Kind: store.OutcomeFanOut,
		Items: [][]byte{[]byte(`a`), []byte(`B`)}}, t0)
	require.NoError(t, r2.Err())
	require.Equal(t, 2, r2.Tasks[1].Items)
	require.Equal(t, 1, r2.Tasks[1].Left, "only item 1 runs again")
	require.Len(t, fx.Enqueued, 1)
	require.Len(t, fx.Deleted, 1)
	i0, _ := r2.ItemIndex(1, 0)
	i1, _ := r2.ItemIndex(1, 1)
	i2, _ := r2.ItemIndex(1, 2)
	require.Equal(t, []int{i1}, fx.Enqueued)
	require.Equal(t, []int{i2}, fx.Deleted)
	require.Equal(t, `A`, string(r2.Task(i0).Output))
	require.Equal(t, `B`, string(r2.Task(i1).Input))
	require.Equal(t, durabletype.TaskQueued, r2.Task(i1).State)
}

func TestMapOverTheInput(t *testing.T) {
	t.Parallel()
	// A map step with an empty Over maps over the run's input: it needs no
	// parent, and starts with the run.
	m := st("m")
	m.Map = &durabletype.MapSpec{}
	r := startSteps(t, m, st("join", "m"))
	require.Equal(t, durabletype.KindMap, r.Shape.Kind(0))
	require.Equal(t, durabletype.TaskQueued, r.Tasks[0].State, "a root map step is ready at once")
	claimed(t, r, 0, 2)
	fx, _ := r.Finish(0, &store.Outcome{Task: store.TaskRef{RunID: r.Rec.ID, Step: "m", Token: 2}, Kind: store.OutcomeFanOut,
		Items: [][]byte{[]byte(`1`), []byte(`2`)}}, t0)
	require.Len(t, fx.NewTasks, 2)
	require.Equal(t, durabletype.TaskWaiting, r.Tasks[0].State)
	require.Equal(t, 2, r.Tasks[0].Left)

	// With parents, it may still map over the input; a name that is not a
	// parent is still refused.
	after := st("m", "l")
	after.Map = &durabletype.MapSpec{}
	_, err := Compile(&durabletype.Shape{Steps: []durabletype.StepSpec{st("l"), after}})
	require.NoError(t, err)
	over := st("m", "l")
	over.Map = &durabletype.MapSpec{Over: "l"}
	require.Equal(t, `it maps over the run's input, and over "l" in the other version`, differs(&after, &over))
	require.Empty(t, differs(&after, &after))
}

func TestApplyChildSettled(t *testing.T) {
	t.Parallel()
	c := st("c")
	c.Child = &durabletype.ChildSpec{Workflow: "other", Result: "r"}
	c.Retry = durabletype.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Second, Factor: 1, Jitter: 1}
	r := startSteps(t, c)
	claimed(t, r, 0, 3)
	child := &store.NewRun{Workflow: "other", Shape: &durabletype.Shape{Steps: []durabletype.StepSpec{st("r")}}}
	fx, _ := r.Finish(0, &store.Outcome{Task: store.TaskRef{RunID: r.Rec.ID, Step: "c", Token: 3}, Kind: store.OutcomeSpawn, Child: child}, t0)
	require.Len(t, fx.Spawned, 1)
	kid := fx.Spawned[0]
	require.Equal(t, ChildID(r.Rec.ID, "c", 3, t0), kid.ID)
	require.Equal(t, &durabletype.ParentRef{RunID: r.Rec.ID, Step: "c", Result: "r"}, kid.Parent)

	// Another child's settlement, and a run settling while still running,
	// change nothing.
	_, ok := r.Apply(&Message{Kind: MsgChild, Run: r.Rec.ID, Step: "c", Child: uuid.New(), Status: durabletype.RunCompleted}, t0)
	require.False(t, ok)
	_, ok = r.Apply(&Message{Kind: MsgChild, Run: r.Rec.ID, Step: "c", Child: kid.ID, Status: durabletype.RunRunning}, t0)
	require.False(t, ok)
	// A failure retries, with a jitter that comes from the child's ID: the
	// same in every store.
	_, ok = r.Apply(&Message{Kind: MsgChild, Run: r.Rec.ID, Step: "c", Child: kid.ID, Status: durabletype.RunFailed, Error: "boom"}, t0)
	require.True(t, ok)
	require.Equal(t, durabletype.TaskQueued, r.Tasks[0].State)
	want := Timestamp(t0.Add(RetryDelay(c.Retry, 1, unitFloat(kid.ID))))
	require.Equal(t, want, r.Tasks[0].DueAt)
	require.Contains(t, r.Tasks[0].Error, "boom")
}
