package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Concurrency keys and rate limits (see internal/core/dag/flow.go and
// docs/semantics.md, "Concurrency keys and rate limits").

// capped returns a step with a concurrency cap.
func capped(name string, max int, parents ...string) durabletype.StepSpec {
	s := step(name, parents...)
	s.Concurrency = max
	return s
}

// keyedRun returns a new run whose steps all have concurrency key key (and
// rate key rate).
func keyedRun(sh *durabletype.Shape, key, rate string) store.NewRun {
	r := newRun("wf", "t", sh)
	r.Keys = make([]store.TaskKeys, len(sh.Steps))
	for i := range r.Keys {
		r.Keys[i] = store.TaskKeys{Concurrency: key, Rate: rate}
	}
	return r
}

// claimedRuns claims everything claimable and returns the claims by run.
func claimedRuns(t *testing.T, s store.Store, now time.Time) map[uuid.UUID]*store.ClaimedTask {
	t.Helper()
	out := map[uuid.UUID]*store.ClaimedTask{}
	for _, c := range claim(t, s, now, 100) {
		out[c.RunID] = c
	}
	return out
}

func onlyRun(t *testing.T, got map[uuid.UUID]*store.ClaimedTask, want uuid.UUID, msg string) *store.ClaimedTask {
	t.Helper()
	require.Len(t, got, 1, msg)
	c, ok := got[want]
	require.True(t, ok, "%s: claimed another run than the oldest parked one", msg)
	return c
}

// testConcurrencyCap: at most max tasks of a key hold slots (ready or
// running); the others park and are admitted in FIFO order as slots free;
// other keys and unkeyed runs are not held back.
func testConcurrencyCap(t *testing.T, s store.Store) {
	sh := shape(capped("a", 2))
	var rs []store.NewRun
	for range 5 {
		rs = append(rs, keyedRun(sh, "wf@a@k", ""))
	}
	other := keyedRun(sh, "wf@a@other", "")
	plain := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, rs[0], rs[1], rs[2])
	create(t, s, at(time.Second), rs[3], rs[4], other, plain)

	got := claimedRuns(t, s, at(2*time.Second))
	require.Len(t, got, 4, "two of key k, the other key, the run without a key")
	require.Contains(t, got, rs[0].ID)
	require.Contains(t, got, rs[1].ID)
	require.Contains(t, got, other.ID)
	require.Contains(t, got, plain.ID)
	for _, r := range rs[2:] {
		tk := tasks(t, s, r.ID)["a"]
		require.Equal(t, durabletype.TaskQueued, tk.State, "a parked task is QUEUED")
		require.True(t, tk.DueAt.IsZero(), "a parked task has no timer")
		require.Equal(t, "wf@a@k", tk.ConcurrencyKey)
	}
	require.Empty(t, claim(t, s, at(3*time.Second), 10), "parked tasks are not claimable")
	st, err := s.Stats(ctx, &store.StatsParams{Now: at(3 * time.Second), Window: time.Hour})
	require.NoError(t, err)
	require.Len(t, st.Queues, 1)
	require.Equal(t, 3, st.Queues[0].Waiting, "parked tasks count as waiting")
	require.Equal(t, 4, st.Queues[0].Running)
	runs, err := s.ListRuns(ctx, &store.ListRunsParams{Filter: store.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunRunning}}, Limit: 100})
	require.NoError(t, err)
	require.Len(t, runs.Runs, 7, "runs whose only task is parked are in flight")

	// One completes: the oldest parked task takes its slot.
	mustApply(t, s, at(4*time.Second), complete(got[rs[0].ID], `1`))
	c2 := onlyRun(t, claimedRuns(t, s, at(5*time.Second)), rs[2].ID, "after a completion")
	// Two finish in one call: both of the next take their slots, in order.
	mustApply(t, s, at(6*time.Second), complete(got[rs[1].ID], `1`), complete(c2, `1`))
	got = claimedRuns(t, s, at(7*time.Second))
	require.Len(t, got, 2)
	require.Contains(t, got, rs[3].ID)
	require.Contains(t, got, rs[4].ID)
	for _, c := range got {
		mustApply(t, s, at(8*time.Second), complete(c, `1`))
	}
	for _, r := range rs {
		require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
	}
}

// testConcurrencyFIFOAcrossSteps: a step's arrivals queue behind tasks
// parked before them, and a cap of 1 serialises a chain across runs.
func testConcurrencyFIFOAcrossSteps(t *testing.T, s store.Store) {
	sh := shape(capped("a", 1), capped("b", 1, "a"))
	r1, r2 := keyedRun(sh, "wf@@k", ""), keyedRun(sh, "wf@@k", "")
	create(t, s, T0, r1, r2)
	c := onlyRun(t, claimedRuns(t, s, T0), r1.ID, "first")
	require.Equal(t, "a", c.Step)
	// r1.a completes: its slot goes to r2.a (parked first), and r1.b parks.
	mustApply(t, s, at(time.Second), complete(c, `1`))
	c = onlyRun(t, claimedRuns(t, s, at(time.Second)), r2.ID, "the parked task goes first")
	require.Equal(t, "a", c.Step)
	mustApply(t, s, at(2*time.Second), complete(c, `1`))
	c = onlyRun(t, claimedRuns(t, s, at(2*time.Second)), r1.ID, "then r1.b")
	require.Equal(t, "b", c.Step)
	mustApply(t, s, at(3*time.Second), complete(c, `1`))
	c = onlyRun(t, claimedRuns(t, s, at(3*time.Second)), r2.ID, "then r2.b")
	mustApply(t, s, at(4*time.Second), complete(c, `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r1.ID).Status)
	require.Equal(t, durabletype.RunCompleted, run(t, s, r2.ID).Status)
}

// testConcurrencyReleasePaths: every way a task leaves RUNNING or the
// queue frees its slot, and a parked task that is cancelled frees its
// place without taking a slot: fail, retry backoff, release, rescue,
// cancel (running, ready and parked), and the failure of its run.
func testConcurrencyReleasePaths(t *testing.T, s store.Store) {
	retry := durabletype.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Minute, Factor: 1}
	sh := shape(durabletype.StepSpec{Name: "a", Retry: retry, Concurrency: 1})
	mk := func() store.NewRun { return keyedRun(sh, "wf@a@k", "") }
	now := T0
	tick := func() time.Time { now = now.Add(time.Second); return now }
	holder := mk()
	create(t, s, tick(), holder)
	c := onlyRun(t, claimedRuns(t, s, tick()), holder.ID, "holder")

	steps := []struct {
		what string
		exit func(c *store.ClaimedTask)
	}{
		{"retry backoff", func(c *store.ClaimedTask) { mustApply(t, s, tick(), failed(c, "again", false)) }},
		{"terminal failure", func(c *store.ClaimedTask) { mustApply(t, s, tick(), failed(c, "fatal", true)) }},
		{"rescue", func(c *store.ClaimedTask) {
			res, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: now.Add(time.Hour), DeadAfter: time.Minute, Limit: 10})
			require.NoError(t, err)
			require.Len(t, res.Rescued, 1)
			now = now.Add(time.Hour)
			// A lost attempt is no failure: the task comes back as an
			// arrival at once, behind the parked one, which takes the
			// slot. It leaves the queue here, so that the cases after
			// this one find only their own task parked.
			require.NoError(t, cancelOne(t, s, tick(), c.RunID, ""))
		}},
		{"cancel", func(c *store.ClaimedTask) { require.NoError(t, cancelOne(t, s, tick(), c.RunID, "")) }},
		{"complete", func(c *store.ClaimedTask) { mustApply(t, s, tick(), complete(c, `1`)) }},
		// Last: the released task comes back as an arrival, behind the
		// parked one.
		{"release", func(c *store.ClaimedTask) {
			mustApply(t, s, tick(), store.Outcome{Task: c.Ref(), Kind: store.OutcomeRelease})
		}},
	}
	for _, st := range steps {
		r := mk()
		create(t, s, tick(), r)
		require.Empty(t, claim(t, s, tick(), 10), "%s: the key is full", st.what)
		st.exit(c)
		c = onlyRun(t, claimedRuns(t, s, tick()), r.ID, st.what+": the parked task takes the slot")
	}
	// The released task is parked behind c; the retried ones wait for
	// their timers.
	mustApply(t, s, tick(), complete(c, `1`))

	// Drain: everything left completes, one at a time.
	for range 10 {
		fireAll(t, s, now.Add(time.Hour))
		now = now.Add(time.Hour)
		cs := claim(t, s, tick(), 10)
		if len(cs) == 0 {
			break
		}
		require.Len(t, cs, 1, "never more than the cap")
		mustApply(t, s, tick(), complete(cs[0], `1`))
	}
	require.Empty(t, claim(t, s, tick(), 10))

	// A parked task cancelled leaves the FIFO without taking a slot; a
	// ready (admitted) one cancelled frees its slot.
	a, b, d := mk(), mk(), mk()
	create(t, s, tick(), a, b, d)
	require.NoError(t, cancelOne(t, s, tick(), b.ID, "")) // parked
	require.NoError(t, cancelOne(t, s, tick(), a.ID, "")) // admitted, not claimed
	c = onlyRun(t, claimedRuns(t, s, tick()), d.ID, "after cancelling a parked and an admitted task")

	// The failure of a run cancels its parked tasks, which free their place.
	two := shape(durabletype.StepSpec{Name: "x", Retry: once()}, capped("a", 1))
	f := newRun("wf", "t", two)
	f.Keys = []store.TaskKeys{{}, {Concurrency: "wf@a@k"}}
	g := mk()
	create(t, s, tick(), f, g)
	cs := claim(t, s, tick(), 10)
	require.Len(t, cs, 1, "only f.x: f.a and g.a are parked behind d")
	require.Equal(t, "x", cs[0].Step)
	mustApply(t, s, tick(), failed(cs[0], "fatal", true))
	require.Equal(t, durabletype.TaskCancelled, states(t, s, f.ID)["a"])
	mustApply(t, s, tick(), complete(c, `1`))
	onlyRun(t, claimedRuns(t, s, tick()), g.ID, "g, not the cancelled f.a")
}

// testConcurrencyKeysInvalid: keys that do not match the shape are refused
// and nothing is created.
func testConcurrencyKeysInvalid(t *testing.T, s store.Store) {
	sh := shape(capped("a", 1))
	r := keyedRun(sh, "k", "")
	r.Keys = append(r.Keys, store.TaskKeys{})
	_, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{r}})
	require.ErrorIs(t, err, durabletype.ErrInvalidKey)
	_, err = s.GetRun(ctx, r.ID)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	bad := shape(capped("a", -1))
	_, err = s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{keyedRun(bad, "k", "")}})
	require.ErrorIs(t, err, durabletype.ErrInvalidRun)
}

// testRateLimit: at most N admissions per window per key; the others wait
// as timers for the next window, and are admitted then.
func testRateLimit(t *testing.T, s store.Store) {
	sh := shape(durabletype.StepSpec{Name: "a", Retry: once(), Rate: &durabletype.RateLimit{N: 2, Per: time.Minute}})
	w0 := T0.Truncate(time.Minute)
	var rs []store.NewRun
	for range 5 {
		rs = append(rs, keyedRun(sh, "", "wf@a@r"))
	}
	other := keyedRun(sh, "", "wf@a@other")
	create(t, s, w0.Add(time.Second), append(rs, other)...)
	got := claimedRuns(t, s, w0.Add(2*time.Second))
	require.Len(t, got, 3, "two of key r, one of the other key")
	require.Contains(t, got, rs[0].ID)
	require.Contains(t, got, rs[1].ID)
	for _, r := range rs[2:] {
		tk := tasks(t, s, r.ID)["a"]
		require.Equal(t, durabletype.TaskQueued, tk.State)
		requireTime(t, w0.Add(time.Minute), tk.DueAt, "waits for the next window")
	}
	for _, c := range got {
		mustApply(t, s, w0.Add(3*time.Second), complete(c, `1`))
	}
	require.Empty(t, claim(t, s, w0.Add(59*time.Second), 10), "not before the next window")
	require.Equal(t, 3, fireAll(t, s, w0.Add(time.Minute)))
	got = claimedRuns(t, s, w0.Add(time.Minute+time.Second))
	require.Len(t, got, 2, "two more in the next window")
	for _, c := range got {
		mustApply(t, s, w0.Add(time.Minute+2*time.Second), complete(c, `1`))
	}
	require.Equal(t, 1, fireAll(t, s, w0.Add(2*time.Minute)))
	got = claimedRuns(t, s, w0.Add(2*time.Minute))
	require.Len(t, got, 1, "the last one")
	for _, c := range got {
		mustApply(t, s, w0.Add(2*time.Minute+time.Second), complete(c, `1`))
	}
	for _, r := range rs {
		require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status, fmt.Sprint(r.ID))
	}
	// Admissions per window, from the log: the QUEUED events without a
	// rate-limit wait are the admissions.
	perWindow := map[time.Time]int{}
	for _, r := range rs {
		evs, err := s.ListEvents(ctx, r.ID)
		require.NoError(t, err)
		for _, e := range evs {
			if e.Type == durabletype.EventQueued && e.DueAt.IsZero() {
				perWindow[e.At.Truncate(time.Minute)]++
			}
		}
	}
	for w, n := range perWindow {
		require.LessOrEqual(t, n, 2, "window %s", w)
	}
}

// testRateLimitStarts: a task admitted under a rate limit starts within
// the window that counted it or not at all: once that window has ended it
// is passed over by claims and, when the window's end fires, admitted
// again, counted in the window then current. So no more than N tasks of a
// key start in any window, even when no worker claimed them in time.
func testRateLimitStarts(t *testing.T, s store.Store) {
	sh := shape(durabletype.StepSpec{Name: "a", Retry: once(), Rate: &durabletype.RateLimit{N: 2, Per: time.Minute}})
	w0 := T0.Truncate(time.Minute)
	var rs []store.NewRun
	for range 4 {
		rs = append(rs, keyedRun(sh, "", "wf@a@r"))
	}
	// Two admitted in window 0, two wait for window 1; no worker claims
	// anything in window 0.
	create(t, s, w0.Add(50*time.Second), rs...)
	// Window 1 begins: the two admitted in window 0 may no longer start.
	require.Empty(t, claim(t, s, w0.Add(time.Minute), 10), "the window that admitted them ended")
	// The timers fire: the two waiting ones and the two lapsed ones come
	// back; window 1 admits two of them, the other two wait for window 2.
	require.Equal(t, 4, fireAll(t, s, w0.Add(time.Minute)))
	got := claimedRuns(t, s, w0.Add(time.Minute+time.Second))
	require.Len(t, got, 2, "two starts in window 1")
	require.Empty(t, claim(t, s, w0.Add(time.Minute+2*time.Second), 10))
	for _, c := range got {
		mustApply(t, s, w0.Add(time.Minute+3*time.Second), complete(c, `1`))
	}
	require.Equal(t, 2, fireAll(t, s, w0.Add(2*time.Minute)))
	got = claimedRuns(t, s, w0.Add(2*time.Minute+time.Second))
	require.Len(t, got, 2, "two starts in window 2")
	for _, c := range got {
		mustApply(t, s, w0.Add(2*time.Minute+2*time.Second), complete(c, `1`))
	}
	for _, r := range rs {
		require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
	}
	// STARTED events per window, from the log.
	perWindow := map[time.Time]int{}
	for _, r := range rs {
		evs, err := s.ListEvents(ctx, r.ID)
		require.NoError(t, err)
		for _, e := range evs {
			if e.Type == durabletype.EventStarted {
				perWindow[e.At.UTC().Truncate(time.Minute)]++
			}
		}
	}
	require.Equal(t, map[time.Time]int{w0.Add(time.Minute): 2, w0.Add(2 * time.Minute): 2}, perWindow)
	require.Zero(t, fireAll(t, s, w0.Add(time.Hour)), "no timer is left")
}
