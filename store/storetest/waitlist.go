package storetest

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// waitLine describes a waiting task for comparisons: every field, the due
// time as an instant.
func waitLine(w store.WaitingTask) string {
	due := "-"
	if !w.DueAt.IsZero() {
		due = w.DueAt.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s kind=%s state=%s attempt=%d due=%s key=%q child=%s items=%d/%d",
		w.Name, w.Kind, w.State, w.Attempt, due, w.WaitKey, w.Child, w.Left, w.Items)
}

func waitLines(ws []store.WaitingTask) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = waitLine(w)
	}
	return out
}

// testListWaits: ListWaits lists, for many runs in one call, the steps
// that wait (for an event, a signal, a child run or items, asleep, in a
// retry's backoff or a delayed start) with what they wait for, and
// nothing else: no ready or pending step, no item of a map step, no run
// that waits for nothing, settled or unknown, none of another tenant's
// when scoped. It agrees with ListTasks.
func testListWaits(t *testing.T, s store.Store) {
	wl, ok := s.(store.WaitLister)
	if !ok {
		t.Skip("the store does not list waits")
	}
	now := at(0)
	waiter := startWait(t, s, now, "acme", shape(eventStep("confirmed"), step("ship", "confirmed")), "order-1")
	other := startWait(t, s, now, "globex", shape(eventStep("confirmed")), "order-1")

	signal := newRun("wf", "acme", shape(signalStep("approve", "approved")))
	create(t, s, now, signal)
	mustApply(t, s, now, waitFor(claimOne(t, s, now), ""))

	sleeper := newRun("wf", "acme", shape(step("a"), sleepStep("nap", time.Hour, "a")))
	create(t, s, now, sleeper)
	mustApply(t, s, now, complete(claimOne(t, s, now), `1`))

	retrier := newRun("wf", "acme", shape(durabletype.StepSpec{Name: "flaky", Retry: durabletype.RetryPolicy{
		MaxAttempts: 3, InitialDelay: time.Minute, Factor: 1}}))
	create(t, s, now, retrier)
	mustApply(t, s, now, failed(claimOne(t, s, now), "down", false))

	delayed := newRun("wf", "acme", shape(step("a")))
	delayed.StartAt = at(2 * time.Hour)
	create(t, s, now, delayed)

	msh := mapShape()
	msh.Steps[1].Retry = durabletype.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Minute, Factor: 1}
	mapped := startMap(t, s, now, "acme", msh, `0`, `1`)
	items := claim(t, s, now, 10)
	require.Len(t, items, 2)
	slices.SortFunc(items, func(a, b *store.ClaimedTask) int { return a.Item - b.Item })
	// Item 1 waits out a backoff: an item, not listed.
	mustApply(t, s, now, complete(items[0], `0`), failed(items[1], "flaky item", false))

	parent := newRun("wf", "acme", shape(childStep("sub", "c2")))
	create(t, s, now, parent)
	c := claimOne(t, s, now)
	mustApply(t, s, now, spawn(c, `"box"`))
	child := dag.ChildID(parent.ID, "sub", c.Token, c.ClaimedAt)

	done := newRun("wf", "acme", shape(step("a")))
	create(t, s, now, done)
	mustApply(t, s, now, complete(claimOne(t, s, now), `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, done.ID).Status)
	ready := newRun("wf", "acme", shape(step("a"), step("b", "a")))
	create(t, s, now, ready)

	all := []uuid.UUID{waiter.ID, other.ID, signal.ID, sleeper.ID, retrier.ID, delayed.ID, mapped.ID, parent.ID, child,
		done.ID, ready.ID, uuid.New(), waiter.ID}
	got, err := wl.ListWaits(ctx, &store.ListWaitsParams{RunIDs: all})
	require.NoError(t, err)
	due := func(d time.Duration) string { return at(d).UTC().Format(time.RFC3339Nano) }
	want := map[uuid.UUID][]string{
		waiter.ID:  {`confirmed kind=event state=WAITING attempt=1 due=- key="order-1" child=00000000-0000-0000-0000-000000000000 items=0/0`},
		other.ID:   {`confirmed kind=event state=WAITING attempt=1 due=- key="order-1" child=00000000-0000-0000-0000-000000000000 items=0/0`},
		signal.ID:  {fmt.Sprintf(`approve kind=event state=WAITING attempt=1 due=- key=%q child=00000000-0000-0000-0000-000000000000 items=0/0`, dag.SignalKey("approved"))},
		sleeper.ID: {`nap kind=sleep state=SLEEPING attempt=0 due=` + due(time.Hour) + ` key="" child=00000000-0000-0000-0000-000000000000 items=0/0`},
		retrier.ID: {`flaky kind=step state=QUEUED attempt=1 due=` + due(time.Minute) + ` key="" child=00000000-0000-0000-0000-000000000000 items=0/0`},
		delayed.ID: {`a kind=step state=QUEUED attempt=0 due=` + due(2*time.Hour) + ` key="" child=00000000-0000-0000-0000-000000000000 items=0/0`},
		mapped.ID:  {`m kind=map state=WAITING attempt=1 due=- key="" child=00000000-0000-0000-0000-000000000000 items=1/2`},
		parent.ID:  {`sub kind=child state=WAITING attempt=1 due=- key="" child=` + child.String() + ` items=0/0`},
	}
	gotLines := map[uuid.UUID][]string{}
	for id, ws := range got {
		gotLines[id] = waitLines(ws)
	}
	require.Equal(t, want, gotLines)

	// The same as the tasks that ListTasks says wait, items aside.
	for _, id := range all[:len(all)-2] {
		ts, err := s.ListTasks(ctx, id)
		require.NoError(t, err)
		var fromTasks []store.WaitingTask
		for _, tk := range ts {
			if tk.Kind != durabletype.KindItem && store.Waits(tk.State, tk.DueAt) {
				fromTasks = append(fromTasks, store.WaitingTask{Name: tk.Name, Kind: tk.Kind, State: tk.State, Attempt: tk.Attempt,
					DueAt: tk.DueAt, WaitKey: tk.WaitKey, Child: tk.Child, Items: tk.Items, Left: tk.Left})
			}
		}
		require.Equal(t, waitLines(fromTasks), waitLines(got[id]), "run %s", id)
	}

	// Scoped to a tenant: the other tenant's run is not there.
	got, err = wl.ListWaits(ctx, &store.ListWaitsParams{RunIDs: all, Tenant: "acme"})
	require.NoError(t, err)
	require.Len(t, got, len(want)-1)
	require.NotContains(t, got, other.ID)
	got, err = wl.ListWaits(ctx, &store.ListWaitsParams{RunIDs: all, Tenant: "globex"})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{other.ID}, slices.Collect(maps.Keys(got)))
	got, err = wl.ListWaits(ctx, &store.ListWaitsParams{})
	require.NoError(t, err)
	require.Empty(t, got)

	// A wait that ends leaves the listing; the step it released is ready,
	// not waiting.
	require.Equal(t, []int{1}, send(t, s, at(time.Second), event("acme", "order-1", `1`)))
	got, err = wl.ListWaits(ctx, &store.ListWaitsParams{RunIDs: []uuid.UUID{waiter.ID, other.ID}})
	require.NoError(t, err)
	require.NotContains(t, got, waiter.ID)
	require.Contains(t, got, other.ID)
}
