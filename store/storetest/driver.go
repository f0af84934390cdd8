package storetest

import (
	"context"
	"errors"
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

// The driver suite (in the spirit of River's riverdrivertest): tests of
// each driver's side of the core's runner, dag.Tx (internal/core/dag/runner.go),
// the I/O of one atomic unit. The conformance suite (Run) holds a store's
// calls to the semantics; this one holds the few methods through which the
// core reads and writes inside a unit to their contract, one by one: what
// FirstMessages finds, that the runs NewRun prepares are written with the
// unit and their shapes recorded once, what Counters reads, that what Write
// writes reads back through the Store, and that a unit that fails writes
// nothing.
//
// The tests seed state through the store's public calls, open units of the
// driver through the harness, apply the core's transitions to the runs
// loaded, and read the result back through the Store. The drivers are this
// module's: dag.Tx is internal, so only its stores can have a harness.

// DriverUnit is one open unit of a driver.
type DriverUnit struct {
	// Tx is the unit's I/O.
	Tx dag.Tx
	// Change is an empty change at the unit's time, for the transitions a
	// test applies to Runs; dag.Commit(ctx, Tx, Change) completes and
	// writes it.
	Change *dag.Change
	// Runs are the runs the unit locked and loaded, by ID.
	Runs map[uuid.UUID]*dag.Run
}

// QueueEntry names a task in a driver's queues.
type QueueEntry struct {
	RunID uuid.UUID
	Step  string
}

// DriverQueues are a driver's queue entries (DriverHarness.Queues).
type DriverQueues struct {
	Ready  []QueueEntry
	Parked map[string][]QueueEntry
}

// DriverHarness gives the driver suite one store and the units of its
// driver. Each store exposes one through its test files only.
type DriverHarness interface {
	// Store is the store whose driver is tested, for seeding state and
	// reading it back.
	Store() store.Store
	// Unit opens one unit of the driver at now, as the store's calls open
	// theirs: the runs of ids that exist are locked and loaded. It runs fn
	// with the unit and ends the unit: committed when fn returns nil (with
	// the messages the change left for other runs applied afterwards, as
	// the store's calls apply them), rolled back otherwise when the driver
	// can roll back (RollsBack). It returns fn's error, else the commit's.
	Unit(ctx context.Context, now time.Time, ids []uuid.UUID, fn func(u *DriverUnit) error) error
	// Queues returns the driver's queue entries: its ready queue, whose
	// entries a claim takes, in the order of their fair ids, and its
	// parked tasks, by concurrency key, oldest first. Claims pass over an
	// entry whose task is not claimable, so this is how the suite sees
	// that Write takes the entries of dequeued tasks out.
	Queues(ctx context.Context) (*DriverQueues, error)
	// RollsBack reports whether a unit that fails leaves nothing written,
	// whatever it wrote before failing. A driver that cannot undo its
	// writes (memstore: its unit is the store's lock, and Write changes
	// its maps in place) must fail only before it writes: the tests that
	// undo writes are skipped for it, and those that fail a unit before
	// Write run on every driver.
	RollsBack() bool
}

// Driver runs the driver suite against the drivers of the harnesses that
// newHarness makes, one per test.
func Driver(t *testing.T, newHarness func(t *testing.T) DriverHarness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h DriverHarness)
	}{
		{"FirstMessages", testDriverFirstMessages},
		{"NewRunChildren", testDriverNewRunChildren},
		{"NewRunNotWritten", testDriverNewRunNotWritten},
		{"NewRunExists", testDriverNewRunExists},
		{"SlotsBeforeAndCounters", testDriverCounters},
		{"CountersRateWindows", testDriverRateWindows},
		{"WriteRoundTrip", testDriverWrite},
		{"WriteMessages", testDriverMessages},
		{"FailBeforeCommit", testDriverFailBeforeCommit},
		{"FailInCommit", testDriverFailInCommit},
		{"Rollback", testDriverRollback},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newHarness(t))
		})
	}
}

// errAbort is what a test's unit returns to fail it.
var errAbort = errors.New("storetest: the test aborts the unit")

// finder returns the find function of dag.Change.Finish over the loaded
// runs.
func finder(runs map[uuid.UUID]*dag.Run) func(ref store.TaskRef) (*dag.Run, int, bool) {
	return func(ref store.TaskRef) (*dag.Run, int, bool) {
		r := runs[ref.RunID]
		if r == nil {
			return nil, 0, false
		}
		i, ok := r.Shape.Index(ref.Step)
		return r, i, ok && i < len(r.Tasks)
	}
}

// applyFinish applies outcomes to the loaded runs of u, and fails the unit
// unless each is applied.
func applyFinish(u *DriverUnit, outcomes ...store.Outcome) error {
	for k, res := range u.Change.Finish(outcomes, finder(u.Runs)) {
		if res.Status != store.FinishApplied {
			return fmt.Errorf("storetest: outcome %d: status %v, want applied", k, res.Status)
		}
	}
	return nil
}

// applyCancel cancels loaded run id in u.
func applyCancel(u *DriverUnit, id uuid.UUID, reason string) error {
	r := u.Runs[id]
	if r == nil {
		return durabletype.ErrRunNotFound
	}
	fx, err := r.Cancel(reason, u.Change.Now)
	if err != nil {
		return err
	}
	u.Change.Add(r, fx)
	return nil
}

// startRun adds new run nr to u's change as the runner creates a child
// run (NewRun, then StartKeyed).
func startRun(u *DriverUnit, nr *store.NewRun) error {
	shape, err := u.Tx.NewRun(ctx, nr, u.Change.Now)
	if err != nil {
		return err
	}
	r, fx := dag.StartKeyed(dag.NewRecord(nr, shape, u.Change.Now), shape, nr.Keys, u.Change.Now, time.Time{})
	u.Change.Add(r, fx)
	return nil
}

// spyTx records the calls of Counters the runner makes through it.
type spyTx struct {
	dag.Tx
	counters []countersCall
}

type countersCall struct {
	heads map[string]int
	got   dag.Counters
}

func (s *spyTx) Counters(ctx context.Context, w *dag.Admission, heads map[string]int) (*dag.Counters, error) {
	cn, err := s.Tx.Counters(ctx, w, heads)
	if err == nil {
		got := *cn
		got.Used, got.Held, got.Parked = maps.Clone(got.Used), maps.Clone(got.Held), maps.Clone(got.Parked)
		got.Admitted = maps.Clone(got.Admitted)
		s.counters = append(s.counters, countersCall{maps.Clone(heads), got})
	}
	return cn, err
}

// snapshot is what the Store says of some runs.
type snapshot struct {
	runs   []store.Run
	tasks  [][]store.Task
	events [][]durabletype.Event
}

func takeSnapshot(t *testing.T, s store.Store, ids ...uuid.UUID) snapshot {
	t.Helper()
	var snap snapshot
	for _, id := range ids {
		snap.runs = append(snap.runs, normRun(run(t, s, id)))
		ts, err := s.ListTasks(ctx, id)
		require.NoError(t, err)
		snap.tasks = append(snap.tasks, normTasks(ts))
		evs, err := s.ListEvents(ctx, id)
		require.NoError(t, err)
		snap.events = append(snap.events, normEvents(evs))
	}
	return snap
}

// queues returns the driver's queue entries, with an empty map when no
// task is parked.
func queues(t *testing.T, h DriverHarness) DriverQueues {
	t.Helper()
	q, err := h.Queues(ctx)
	require.NoError(t, err)
	out := DriverQueues{Ready: q.Ready, Parked: q.Parked}
	if out.Parked == nil {
		out.Parked = map[string][]QueueEntry{}
	}
	return out
}

// entry names task step of run id in a queue.
func entry(id uuid.UUID, step string) QueueEntry { return QueueEntry{RunID: id, Step: step} }

// unitState is what the Store says of some runs, and the driver's queues.
type unitState struct {
	snapshot
	queues DriverQueues
}

func takeState(t *testing.T, h DriverHarness, ids ...uuid.UUID) unitState {
	t.Helper()
	return unitState{takeSnapshot(t, h.Store(), ids...), queues(t, h)}
}

func versionsOf(t *testing.T, s store.Store, workflow string) []store.VersionRecord {
	t.Helper()
	v, ok := s.(store.Versioner)
	require.True(t, ok, "the store records versions")
	res, err := v.ListVersions(ctx, &store.ListVersionsParams{Workflow: workflow})
	require.NoError(t, err)
	return res.Versions
}

func requireNoRun(t *testing.T, s store.Store, id uuid.UUID, msg string) {
	t.Helper()
	_, err := s.GetRun(ctx, id)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound, msg)
}

// testDriverFirstMessages: FirstMessages answers each query, in order, with
// the first kept message the wait may receive: of events, the first of
// the query's tenant and key sent at or after Since, in the order sent; of
// signals, the first of the name sent to the query's run.
func testDriverFirstMessages(t *testing.T, h DriverHarness) {
	s := h.Store()
	t0, t1 := at(time.Second), at(2*time.Second)
	send(t, s, at(0), event("globex", "k", `"g0"`)) // another tenant's, sent first
	send(t, s, t0, event("acme", "k", `"e0"`))
	send(t, s, t1, event("acme", "k", `"e1"`), event("acme", "other", `"o1"`), event("acme", "k", `"e1b"`))
	ra, rb, rc := newRun("wf", "acme", shape(step("x"))), newRun("wf", "acme", shape(step("x"))), newRun("wf", "acme", shape(step("x")))
	create(t, s, at(0), ra, rb, rc)
	sig := func(r store.NewRun, now time.Time, name, payload string) {
		mustSignal(t, s, &store.SignalParams{Now: now, RunID: r.ID, Name: name, Payload: []byte(payload)})
	}
	sig(rb, t0, "go", `"b1"`)
	sig(ra, t0, "stop", `"a-stop"`)
	sig(ra, t1, "go", `"a1"`)
	sig(ra, t1, "go", `"a2"`)

	ev := func(tenant, key string, since time.Time) dag.WaitQuery {
		return dag.WaitQuery{Run: ra.ID, Tenant: tenant, Key: key, Since: since}
	}
	sg := func(r store.NewRun, name string) dag.WaitQuery {
		return dag.WaitQuery{Signal: true, Run: r.ID, Tenant: r.Tenant, Key: dag.SignalKey(name)}
	}
	micro, long := time.Microsecond, T0.Add(-time.Hour)
	cases := []struct {
		what string
		q    dag.WaitQuery
		want string // "": none
	}{
		{"since before t0", ev("acme", "k", t0.Add(-micro)), `"e0"`},
		{"a signal among events", sg(ra, "go"), `"a1"`},
		{"since at t0", ev("acme", "k", t0), `"e0"`},
		{"since between t0 and t1", ev("acme", "k", t0.Add(micro)), `"e1"`},
		{"since at t1: the first sent at t1", ev("acme", "k", t1), `"e1"`},
		{"since after t1", ev("acme", "k", t1.Add(micro)), ""},
		{"another run's signal", sg(rb, "go"), `"b1"`},
		{"a tenant without events of the key", ev("initech", "k", long), ""},
		{"the other tenant's", ev("globex", "k", long), `"g0"`},
		{"another key", ev("acme", "other", t0), `"o1"`},
		{"another signal of the run", sg(ra, "stop"), `"a-stop"`},
		{"a run without signals", sg(rc, "go"), ""},
		{"a signal is no event", ev("acme", "go", long), ""},
		{"an event is no signal", sg(ra, "k"), ""},
		{"the same query again", ev("acme", "k", t0.Add(-micro)), `"e0"`},
	}
	qs := make([]dag.WaitQuery, len(cases))
	for k, c := range cases {
		qs[k] = c.q
	}
	var all []dag.Found
	one := make([][]dag.Found, len(cases))
	require.NoError(t, h.Unit(ctx, at(3*time.Second), nil, func(u *DriverUnit) error {
		var err error
		if all, err = u.Tx.FirstMessages(ctx, qs); err != nil {
			return err
		}
		for k := range qs {
			if one[k], err = u.Tx.FirstMessages(ctx, qs[k:k+1]); err != nil {
				return err
			}
		}
		return nil
	}))
	require.Len(t, all, len(cases))
	for k, c := range cases {
		for _, got := range []dag.Found{all[k], one[k][0]} {
			if c.want == "" {
				require.False(t, got.OK, "%s: found %s", c.what, got.Payload)
				continue
			}
			require.True(t, got.OK, "%s: not found", c.what)
			require.Equal(t, c.want, string(got.Payload), c.what)
		}
	}
}

// parentShape has one child step, kid, whose result is the child's c2.
func parentShape() *durabletype.Shape { return shape(childStep("kid", "c2"), step("after", "kid")) }

// spawning creates n parent runs of tenant acme at now and claims their
// child steps; it returns the runs and their claims, in order.
func spawning(t *testing.T, s store.Store, now time.Time, n int) ([]store.NewRun, []*store.ClaimedTask) {
	t.Helper()
	var ps []store.NewRun
	for range n {
		ps = append(ps, newRun("wf", "acme", parentShape()))
	}
	create(t, s, now, ps...)
	byRun := claimedRuns(t, s, now)
	require.Len(t, byRun, n)
	cs := make([]*store.ClaimedTask, n)
	for k, p := range ps {
		cs[k] = byRun[p.ID]
		require.Equal(t, "kid", cs[k].Step)
	}
	return ps, cs
}

// testDriverNewRunChildren: the children a unit spawns (through NewRun)
// are written with it, read back whole, and claimable; their shape is
// recorded once, however many children share it, in one unit or later
// ones, and a new shape is recorded.
func testDriverNewRunChildren(t *testing.T, h DriverHarness) {
	s := h.Store()
	ps, cs := spawning(t, s, T0, 4)
	now := at(time.Second)
	require.NoError(t, h.Unit(ctx, now, []uuid.UUID{ps[0].ID, ps[1].ID}, func(u *DriverUnit) error {
		if err := applyFinish(u, spawn(cs[0], `"one"`), spawn(cs[1], `"two"`)); err != nil {
			return err
		}
		return dag.Commit(ctx, u.Tx, u.Change)
	}))
	var kids []uuid.UUID
	for k, p := range ps[:2] {
		kid := dag.ChildID(p.ID, "kid", cs[k].Token, cs[k].ClaimedAt)
		kids = append(kids, kid)
		pt := tasks(t, s, p.ID)["kid"]
		require.Equal(t, durabletype.TaskWaiting, pt.State)
		require.Equal(t, kid, pt.Child)
		c := run(t, s, kid)
		require.Equal(t, "child", c.Workflow)
		require.Equal(t, "acme", c.Tenant)
		require.Equal(t, durabletype.RunRunning, c.Status)
		require.Equal(t, &durabletype.ParentRef{RunID: p.ID, Step: "kid", Result: "c2"}, c.Parent)
		require.Equal(t, []string{`"one"`, `"two"`}[k], string(c.Input))
		requireTime(t, now, c.CreatedAt)
		require.NotNil(t, c.Shape)
		require.Equal(t, childShape().Steps, c.Shape.Steps, "the shape is read back")
		require.Equal(t, map[string]durabletype.TaskState{"c1": durabletype.TaskQueued, "c2": durabletype.TaskPending}, states(t, s, kid))
		require.Equal(t, []uuid.UUID{kid}, ids(listAll(t, s, store.RunFilter{Parent: p.ID}, 10)))
	}
	got := claim(t, s, at(2*time.Second), 10, "child")
	require.Len(t, got, 2, "the children's roots are claimable")
	for _, c := range got {
		require.Contains(t, kids, c.RunID)
		require.Equal(t, "c1", c.Step)
	}
	require.Len(t, versionsOf(t, s, "child"), 1, "two children of one shape in one unit: one version")

	// A later unit: the shape is known; a new shape is recorded.
	other := shape(step("c1"), step("c2", "c1"), step("c3", "c2"))
	require.NoError(t, h.Unit(ctx, at(3*time.Second), []uuid.UUID{ps[2].ID, ps[3].ID}, func(u *DriverUnit) error {
		o := spawn(cs[3], `"four"`)
		o.Child.Shape = other
		if err := applyFinish(u, spawn(cs[2], `"three"`), o); err != nil {
			return err
		}
		return dag.Commit(ctx, u.Tx, u.Change)
	}))
	vs := versionsOf(t, s, "child")
	require.Len(t, vs, 2, "the known shape again, and a new one")
	var shapes []int
	for _, v := range vs {
		shapes = append(shapes, len(v.Shape.Steps))
	}
	slices.Sort(shapes)
	require.Equal(t, []int{2, 3}, shapes)
	kid := dag.ChildID(ps[3].ID, "kid", cs[3].Token, cs[3].ClaimedAt)
	require.Len(t, run(t, s, kid).Shape.Steps, 3)
}

// testDriverNewRunNotWritten: a run NewRun prepared is created only by
// the unit's write: a unit that fails before it leaves no run, and
// records no shape.
func testDriverNewRunNotWritten(t *testing.T, h DriverHarness) {
	s := h.Store()
	nr := newRun("fresh", "acme", shape(step("a"), step("b", "a")))
	err := h.Unit(ctx, T0, nil, func(u *DriverUnit) error {
		if _, err := u.Tx.NewRun(ctx, &nr, u.Change.Now); err != nil {
			return err
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	requireNoRun(t, s, nr.ID, "a run prepared but not written")
	require.Empty(t, versionsOf(t, s, "fresh"), "a shape prepared but not written")
	require.Empty(t, claim(t, s, at(time.Second), 10, "fresh"))

	// The same, written: created, and its shape recorded.
	require.NoError(t, h.Unit(ctx, T0, nil, func(u *DriverUnit) error {
		if err := startRun(u, &nr); err != nil {
			return err
		}
		return dag.Commit(ctx, u.Tx, u.Change)
	}))
	require.Equal(t, "fresh", run(t, s, nr.ID).Workflow)
	require.Len(t, versionsOf(t, s, "fresh"), 1)
	got := claim(t, s, at(time.Second), 10, "fresh")
	require.Len(t, got, 1, "its root is claimable")
	require.Equal(t, "a", got[0].Step)
}

// testDriverNewRunExists: NewRun of a run whose ID exists fails the unit
// with ErrRunExists rather than replace the run.
func testDriverNewRunExists(t *testing.T, h DriverHarness) {
	s := h.Store()
	old := newRun("wf", "acme", shape(step("a")))
	create(t, s, T0, old)
	before := takeState(t, h, old.ID)
	nr := newRun("other", "acme", shape(step("x"), step("y", "x")))
	nr.ID = old.ID
	err := h.Unit(ctx, at(time.Second), nil, func(u *DriverUnit) error {
		if err := startRun(u, &nr); err != nil {
			return err
		}
		return dag.Commit(ctx, u.Tx, u.Change)
	})
	require.ErrorIs(t, err, durabletype.ErrRunExists)
	require.Equal(t, before, takeState(t, h, old.ID), "the run that existed is left as it was")
	require.Empty(t, versionsOf(t, s, "other"))
}

// Keys of the counters tests: k (cap 1, and a rate limit of 6 a minute,
// rate key r) and k2 (cap 1).
const (
	keyK  = "wf@a@k"
	keyK2 = "wf@a@k2"
	rateR = "wf@a@r"
)

func rated() *durabletype.Shape {
	return shape(durabletype.StepSpec{Name: "a", Retry: once(), Concurrency: 1, Rate: &durabletype.RateLimit{N: 6, Per: time.Minute}})
}

// testDriverCounters: SlotsBefore reports the keyed tasks RUNNING as
// loaded; Counters reads the admissions of the rate windows, the slots
// held and the parked tasks of the keys, as many as heads asks for at
// most, and tells of each dequeued keyed task whether it held a slot; what
// admission then decides is written, and read by the next unit.
func testDriverCounters(t *testing.T, h DriverHarness) {
	s := h.Store()
	w0 := T0.Truncate(time.Minute)
	// Key k: r0 admitted, r1-r5 parked; six admissions in window w0.
	var rs []store.NewRun
	for range 6 {
		rs = append(rs, keyedRun(rated(), keyK, rateR))
	}
	create(t, s, w0.Add(time.Second), rs...)
	// Key k2: q0 admitted, q1 parked.
	q0, q1 := keyedRun(shape(capped("a", 1)), keyK2, ""), keyedRun(shape(capped("a", 1)), keyK2, "")
	create(t, s, w0.Add(time.Second), q0, q1)
	c0 := claimOne(t, s, w0.Add(2*time.Second))
	require.Equal(t, rs[0].ID, c0.RunID, "r0 runs; q0 stays ready")
	parkedK := func(from int) []QueueEntry {
		var out []QueueEntry
		for _, r := range rs[from:] {
			out = append(out, entry(r.ID, "a"))
		}
		return out
	}
	require.Equal(t, DriverQueues{
		Ready:  []QueueEntry{entry(q0.ID, "a")},
		Parked: map[string][]QueueEntry{keyK: parkedK(1), keyK2: {entry(q1.ID, "a")}},
	}, queues(t, h), "as seeded")

	// One unit: r0 completes (frees a slot of k), r1 (parked) and q0 (ready)
	// are cancelled, and a new run of key k arrives (rate-limited: the
	// window's six are used).
	n := keyedRun(rated(), keyK, rateR)
	spy := &spyTx{}
	var before dag.SlotsBefore
	var loaded map[uuid.UUID]*dag.Run
	now := w0.Add(3 * time.Second)
	require.NoError(t, h.Unit(ctx, now, []uuid.UUID{rs[0].ID, rs[1].ID, q0.ID}, func(u *DriverUnit) error {
		loaded = u.Runs
		if err := applyFinish(u, complete(c0, `1`)); err != nil {
			return err
		}
		if err := applyCancel(u, rs[1].ID, "gone"); err != nil {
			return err
		}
		if err := applyCancel(u, q0.ID, "gone"); err != nil {
			return err
		}
		if err := startRun(u, &n); err != nil {
			return err
		}
		before = u.Tx.SlotsBefore(u.Change)
		spy.Tx = u.Tx
		return dag.Commit(ctx, spy, u.Change)
	}))
	require.Equal(t, dag.SlotsBefore{loaded[rs[0].ID]: {true}}, before, "r0 held its slot as loaded; nothing else did")
	require.Len(t, spy.counters, 1)
	call := spy.counters[0]
	require.Equal(t, map[string]int{keyK: 3, keyK2: 1}, call.heads, "k: r0's slot, r1's place, n; k2: q0's slot")
	cn := call.got
	require.Equal(t, map[dag.RateKey]int{{Key: rateR, Window: w0}: 6}, cn.Used, "the window's admissions")
	require.Equal(t, map[string]int{keyK: 1, keyK2: 1}, cn.Held, "the slots held")
	require.Equal(t, map[dag.TaskAt]bool{
		{R: loaded[rs[1].ID], I: 0}: false, // parked
		{R: loaded[q0.ID], I: 0}:    true,  // ready, holding a slot
	}, cn.Admitted)
	require.Equal(t, map[string]int{keyK: 3, keyK2: 1}, cn.Parked, "k: 4 parked, 3 asked for; k2: 1 parked")
	for k, p := range cn.Parked {
		require.LessOrEqual(t, p, call.heads[k], "no more parked than heads asks for")
	}

	// What admission decided was written: r2 and q1 (the oldest parked)
	// were promoted, in key order; n waits for the next window; r1 and q0
	// left the queues.
	require.Equal(t, DriverQueues{
		Ready:  []QueueEntry{entry(rs[2].ID, "a"), entry(q1.ID, "a")},
		Parked: map[string][]QueueEntry{keyK: parkedK(3)},
	}, queues(t, h))
	got := claimedRuns(t, s, now)
	require.Len(t, got, 2)
	require.Contains(t, got, rs[2].ID)
	require.Contains(t, got, q1.ID)
	nt := tasks(t, s, n.ID)["a"]
	require.Equal(t, durabletype.TaskQueued, nt.State)
	requireTime(t, w0.Add(time.Minute), nt.DueAt, "n waits for the next window")
	require.Equal(t, durabletype.TaskCancelled, tasks(t, s, rs[1].ID)["a"].State)

	// The next unit reads what this one wrote: k's slot held by r2, three
	// parked (r3, r4, r5), of which heads asks for one.
	spy = &spyTx{}
	now = w0.Add(4 * time.Second)
	require.NoError(t, h.Unit(ctx, now, []uuid.UUID{rs[2].ID}, func(u *DriverUnit) error {
		loaded = u.Runs
		if err := applyCancel(u, rs[2].ID, "gone"); err != nil {
			return err
		}
		spy.Tx = u.Tx
		return dag.Commit(ctx, spy, u.Change)
	}))
	require.Len(t, spy.counters, 1)
	call = spy.counters[0]
	require.Equal(t, map[string]int{keyK: 1}, call.heads)
	require.Empty(t, call.got.Used)
	require.Equal(t, map[string]int{keyK: 1}, call.got.Held)
	require.Empty(t, call.got.Admitted, "r2 was claimed: its cancellation frees its slot, it dequeues nothing")
	require.Equal(t, map[string]int{keyK: 1}, call.got.Parked)
	require.Equal(t, DriverQueues{
		Ready:  []QueueEntry{entry(rs[3].ID, "a")},
		Parked: map[string][]QueueEntry{keyK: parkedK(4)},
	}, queues(t, h))
	got = claimedRuns(t, s, now)
	require.Len(t, got, 1)
	require.Contains(t, got, rs[3].ID, "the oldest parked task is promoted: FIFO")
}

// testDriverRateWindows: the admissions counted in a window are written,
// and read back by the next unit; a new window starts from none.
func testDriverRateWindows(t *testing.T, h DriverHarness) {
	s := h.Store()
	w1 := T0.Truncate(time.Minute).Add(time.Minute)
	var used []map[dag.RateKey]int
	for k, now := range []time.Time{w1.Add(time.Second), w1.Add(2 * time.Second), w1.Add(time.Minute + time.Second)} {
		nr := keyedRun(shape(durabletype.StepSpec{Name: "a", Retry: once(), Rate: &durabletype.RateLimit{N: 6, Per: time.Minute}}), "", rateR)
		spy := &spyTx{}
		require.NoError(t, h.Unit(ctx, now, nil, func(u *DriverUnit) error {
			if err := startRun(u, &nr); err != nil {
				return err
			}
			spy.Tx = u.Tx
			return dag.Commit(ctx, spy, u.Change)
		}), "unit %d", k)
		require.Len(t, spy.counters, 1)
		used = append(used, spy.counters[0].got.Used)
		require.Equal(t, "a", claimOne(t, s, now).Step, "admitted")
	}
	require.Equal(t, []map[dag.RateKey]int{
		{{Key: rateR, Window: w1}: 0},
		{{Key: rateR, Window: w1}: 1},
		{{Key: rateR, Window: w1.Add(time.Minute)}: 0},
	}, used)
}

// testDriverWrite: what Write writes reads back through the Store: the
// runs and tasks as the transitions left them, the events appended in
// order with increasing IDs, the enqueued tasks claimable in the order
// they were enqueued, the dequeued ones no longer, and the runs settled
// counted.
func testDriverWrite(t *testing.T, h DriverHarness) {
	s := h.Store()
	sh := shape(step("a"), step("b", "a"), step("c", "a"), step("d", "b", "c"))
	r1, r2 := newRun("wf", "acme", sh), newRun("wf", "acme", sh)
	create(t, s, T0, r1, r2)
	byRun := claimedRuns(t, s, T0)
	require.Len(t, byRun, 2)

	// A unit completes the roots of both runs: their children are
	// enqueued.
	old := takeSnapshot(t, s, r1.ID, r2.ID)
	var w written
	require.NoError(t, h.Unit(ctx, at(time.Second), []uuid.UUID{r1.ID, r2.ID}, func(u *DriverUnit) error {
		if err := applyFinish(u, complete(byRun[r1.ID], `"A1"`), complete(byRun[r2.ID], `"A2"`)); err != nil {
			return err
		}
		if err := dag.Commit(ctx, u.Tx, u.Change); err != nil {
			return err
		}
		w = writtenBy(u, r1.ID, r2.ID)
		return nil
	}))
	w.check(t, s, old)
	require.Len(t, w.enqueued, 4)
	require.Equal(t, DriverQueues{Ready: w.enqueued, Parked: map[string][]QueueEntry{}}, queues(t, h),
		"the enqueued tasks are in the ready queue, in the order enqueued")
	require.Equal(t, `"A1"`, string(tasks(t, s, r1.ID)["a"].Output))
	var cs []*store.ClaimedTask
	for range 2 { // r2's tasks stay in the queue
		c := claim(t, s, at(2*time.Second), 1)
		require.Len(t, c, 1)
		cs = append(cs, c[0])
	}
	require.Equal(t, w.enqueued[:2], []QueueEntry{entry(cs[0].RunID, cs[0].Step), entry(cs[1].RunID, cs[1].Step)},
		"the enqueued tasks are claimable, in the order enqueued")
	require.Equal(t, w.enqueued[2:], queues(t, h).Ready)

	// Another fails r1's b for good (r1 fails; its c runs on) and cancels
	// r2 with its tasks still in the queue: dequeued, settled.
	old = takeSnapshot(t, s, r1.ID, r2.ID)
	now := at(3 * time.Second)
	require.NoError(t, h.Unit(ctx, now, []uuid.UUID{r1.ID, r2.ID}, func(u *DriverUnit) error {
		if err := applyFinish(u, failed(cs[0], "broke", true)); err != nil {
			return err
		}
		if err := applyCancel(u, r2.ID, "stop"); err != nil {
			return err
		}
		if err := dag.Commit(ctx, u.Tx, u.Change); err != nil {
			return err
		}
		w = writtenBy(u, r1.ID, r2.ID)
		return nil
	}))
	w.check(t, s, old)
	require.Empty(t, w.enqueued)
	require.Empty(t, queues(t, h).Ready, "the cancelled run's tasks left the queue")
	require.Empty(t, claim(t, s, at(4*time.Second), 10))
	require.Equal(t, durabletype.RunFailed, run(t, s, r1.ID).Status)
	rec := run(t, s, r2.ID)
	require.Equal(t, durabletype.RunCancelled, rec.Status)
	require.Equal(t, "stop", rec.Error)
	requireTime(t, now, rec.FinishedAt)
	for name, st := range states(t, s, r2.ID) {
		if name != "a" {
			require.Equal(t, durabletype.TaskCancelled, st, name)
		}
	}
	require.Equal(t, []uuid.UUID{r2.ID}, ids(listAll(t, s, store.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunCancelled}}, 10)))
	st, err := s.Stats(ctx, &store.StatsParams{Now: at(4 * time.Second), Window: time.Hour})
	require.NoError(t, err)
	var settled []durabletype.RunCount
	for _, rc := range st.Runs {
		if rc.Settled {
			settled = append(settled, rc)
		}
	}
	require.Equal(t, []durabletype.RunCount{{Workflow: "wf", Tenant: "acme", Status: durabletype.RunCancelled, Settled: true, Count: 1}}, settled,
		"the run settled is counted; the failed one has not settled (its c runs)")
}

// written is what a unit's change said to write, of some runs.
type written struct {
	runs     []*dag.Run
	tasks    [][]int // the tasks each changed, by index
	events   [][]durabletype.Event
	enqueued []QueueEntry
}

// writtenBy takes what u's change wrote of runs ids, once committed.
func writtenBy(u *DriverUnit, ids ...uuid.UUID) written {
	var w written
	for _, id := range ids {
		r := u.Runs[id]
		w.runs = append(w.runs, r)
		var evs []durabletype.Event
		var changed []int
		if fx := u.Change.Effects[r]; fx != nil {
			evs, changed = slices.Clone(fx.Events), slices.Clone(fx.Tasks)
		}
		w.tasks = append(w.tasks, changed)
		for i := range evs {
			evs[i].RunID = id
		}
		w.events = append(w.events, evs)
	}
	for _, e := range u.Change.Enqueued {
		w.enqueued = append(w.enqueued, entry(e.R.Rec.ID, e.R.Task(e.I).Name))
	}
	return w
}

// check requires the Store to read back what was written over old (a
// snapshot of the same runs): the runs' records and changed tasks as
// written (a driver need not load what no transition reads, such as the
// outputs of tasks left alone), and their events appended after the old
// ones, in order, with IDs that increase along each run's log and across
// the unit's runs in order.
func (w written) check(t *testing.T, s store.Store, old snapshot) {
	t.Helper()
	var lastID int64
	for k, r := range w.runs {
		require.Equal(t, runFields(&r.Rec), runFields(run(t, s, r.Rec.ID)), "the run as written")
		byName := tasks(t, s, r.Rec.ID)
		var want, got []*store.Task
		for _, i := range w.tasks[k] {
			want, got = append(want, r.Task(i)), append(got, byName[r.Task(i).Name])
		}
		require.Equal(t, normTasks(want), normTasks(got), "the tasks as written")

		evs, err := s.ListEvents(ctx, r.Rec.ID)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(evs), len(old.events[k]))
		require.Equal(t, old.events[k], normEvents(evs[:len(old.events[k])]), "the events before stay")
		added := evs[len(old.events[k]):]
		require.Equal(t, normEventList(w.events[k]), normEvents(added), "the events appended, in order")
		for i, e := range evs {
			require.Positive(t, e.ID)
			if i > 0 {
				require.Greater(t, e.ID, evs[i-1].ID, "event IDs increase along the log")
			}
		}
		if len(added) > 0 {
			require.Greater(t, added[0].ID, lastID, "the unit's events get IDs in the order of its runs")
			lastID = added[len(added)-1].ID
		}
	}
}

// runFields are the fields of a run's record that transitions change, and
// its identity.
func runFields(r *store.Run) store.Run {
	return store.Run{
		ID: r.ID, Workflow: r.Workflow, Version: r.Version, Tenant: r.Tenant, Status: r.Status,
		FailedStep: r.FailedStep, Error: r.Error, Priority: r.Priority, Parent: r.Parent,
		CreatedAt: normTime(r.CreatedAt), FinishedAt: normTime(r.FinishedAt), Deadline: normTime(r.Deadline),
	}
}

func normEventList(es []durabletype.Event) []durabletype.Event {
	ps := make([]*durabletype.Event, len(es))
	for i := range es {
		ps[i] = &es[i]
	}
	return normEvents(ps)
}

// testDriverMessages: the messages a unit's transitions leave for other
// runs are written with it and reach their runs: a cancelled parent's
// child is cancelled, a settled child's parent resumes.
func testDriverMessages(t *testing.T, h DriverHarness) {
	s := h.Store()
	ps, cs := spawning(t, s, T0, 2)
	mustApply(t, s, T0, spawn(cs[0], `"one"`), spawn(cs[1], `"two"`))
	kid0, kid1 := dag.ChildID(ps[0].ID, "kid", cs[0].Token, cs[0].ClaimedAt), dag.ChildID(ps[1].ID, "kid", cs[1].Token, cs[1].ClaimedAt)

	require.NoError(t, h.Unit(ctx, at(time.Second), []uuid.UUID{ps[0].ID}, func(u *DriverUnit) error {
		if err := applyCancel(u, ps[0].ID, "stop"); err != nil {
			return err
		}
		return dag.Commit(ctx, u.Tx, u.Change)
	}))
	require.Equal(t, durabletype.RunCancelled, run(t, s, kid0).Status, "the cancelled parent's child is cancelled")

	// kid1's c1 completes through the store, its c2 in a unit.
	c := claim(t, s, at(2*time.Second), 10, "child")
	require.Len(t, c, 1)
	require.Equal(t, kid1, c[0].RunID)
	mustApply(t, s, at(2*time.Second), complete(c[0], `1`))
	c = claim(t, s, at(2*time.Second), 10, "child")
	require.Len(t, c, 1)
	require.NoError(t, h.Unit(ctx, at(3*time.Second), []uuid.UUID{kid1}, func(u *DriverUnit) error {
		if err := applyFinish(u, complete(c[0], `"done"`)); err != nil {
			return err
		}
		return dag.Commit(ctx, u.Tx, u.Change)
	}))
	require.Equal(t, durabletype.RunCompleted, run(t, s, kid1).Status)
	pt := tasks(t, s, ps[1].ID)
	require.Equal(t, durabletype.TaskCompleted, pt["kid"].State, "the parent learns its child settled")
	require.Equal(t, `"done"`, string(pt["kid"].Output))
	require.Equal(t, durabletype.TaskQueued, pt["after"].State)
}

// testDriverFailBeforeCommit: a unit that applies transitions to the runs
// it loaded and fails before it commits them writes nothing: the runs it
// loaded are its own copies.
func testDriverFailBeforeCommit(t *testing.T, h DriverHarness) {
	s := h.Store()
	sh := shape(step("a"), step("b", "a"))
	r1, r2 := newRun("wf", "acme", sh), newRun("wf", "acme", sh)
	create(t, s, T0, r1)
	c := claimOne(t, s, T0)
	create(t, s, T0, r2) // its root stays in the queue
	before := takeState(t, h, r1.ID, r2.ID)
	err := h.Unit(ctx, at(time.Second), []uuid.UUID{r1.ID, r2.ID}, func(u *DriverUnit) error {
		if err := applyFinish(u, complete(c, `"A"`)); err != nil {
			return err
		}
		if err := applyCancel(u, r1.ID, "stop"); err != nil {
			return err
		}
		if err := applyCancel(u, r2.ID, "stop"); err != nil {
			return err
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	require.Equal(t, before, takeState(t, h, r1.ID, r2.ID), "nothing written")
	got := claimOne(t, s, at(2*time.Second))
	require.Equal(t, r2.ID, got.RunID, "the queue is as it was")
	mustApply(t, s, at(2*time.Second), complete(c, `"A"`))
}

// testDriverFailInCommit: a unit whose commit fails writes nothing, the
// children it prepared before the failure included: here the second
// child's ID is taken, after the first child (of a shape new to the
// store) was prepared.
func testDriverFailInCommit(t *testing.T, h DriverHarness) {
	s := h.Store()
	ps, cs := spawning(t, s, T0, 2)
	taken := newRun("squat", "acme", shape(step("a")))
	taken.ID = dag.ChildID(ps[1].ID, "kid", cs[1].Token, cs[1].ClaimedAt)
	create(t, s, T0, taken)
	before := takeState(t, h, ps[0].ID, ps[1].ID, taken.ID)
	o := spawn(cs[0], `"one"`) // of a shape new to the store
	err := h.Unit(ctx, at(time.Second), []uuid.UUID{ps[0].ID, ps[1].ID}, func(u *DriverUnit) error {
		if err := applyFinish(u, o, spawn(cs[1], `"two"`)); err != nil {
			return err
		}
		return dag.Commit(ctx, u.Tx, u.Change)
	})
	require.ErrorIs(t, err, durabletype.ErrRunExists)
	require.Equal(t, before, takeState(t, h, ps[0].ID, ps[1].ID, taken.ID), "nothing written")
	requireNoRun(t, s, dag.ChildID(ps[0].ID, "kid", cs[0].Token, cs[0].ClaimedAt), "the first child is not created")
	require.Empty(t, versionsOf(t, s, "child"), "nor its shape recorded")
	got := claim(t, s, at(2*time.Second), 10, "child", "squat", "wf")
	require.Len(t, got, 1, "the queue is as it was")
	require.Equal(t, taken.ID, got[0].RunID)
}

// testDriverRollback: a unit rolled back after it wrote leaves nothing
// written: runs, tasks, events, children, shapes, and admission's
// counters and queues (the dequeued parked task is parked again).
func testDriverRollback(t *testing.T, h DriverHarness) {
	if !h.RollsBack() {
		t.Skip("the driver cannot undo what its Write wrote; FailBeforeCommit and FailInCommit cover the units that fail before it")
	}
	s := h.Store()
	// Key k: r0 running, r1 and r2 parked.
	sh := shape(capped("a", 1))
	r0, r1, r2 := keyedRun(sh, keyK, ""), keyedRun(sh, keyK, ""), keyedRun(sh, keyK, "")
	create(t, s, T0, r0, r1, r2)
	c0 := claimOne(t, s, T0)
	require.Equal(t, r0.ID, c0.RunID)
	ps, cs := spawning(t, s, T0, 1)
	o := spawn(cs[0], `"one"`) // of a shape new to the store
	before := takeState(t, h, r0.ID, r1.ID, r2.ID, ps[0].ID)

	wrote := false
	err := h.Unit(ctx, at(time.Second), []uuid.UUID{r0.ID, r1.ID, ps[0].ID}, func(u *DriverUnit) error {
		if err := applyFinish(u, complete(c0, `1`), o); err != nil {
			return err
		}
		if err := applyCancel(u, r1.ID, "gone"); err != nil {
			return err
		}
		if err := dag.Commit(ctx, u.Tx, u.Change); err != nil {
			return err
		}
		wrote = true
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	require.True(t, wrote)
	require.Equal(t, before, takeState(t, h, r0.ID, r1.ID, r2.ID, ps[0].ID), "nothing written")
	requireNoRun(t, s, dag.ChildID(ps[0].ID, "kid", cs[0].Token, cs[0].ClaimedAt), "the child is not created")
	require.Empty(t, versionsOf(t, s, "child"), "nor its shape recorded")
	require.Empty(t, claim(t, s, at(2*time.Second), 10, "wf", "child"), "r2 was not promoted")

	// r1 is parked still, at the head: r0's completion promotes it.
	mustApply(t, s, at(3*time.Second), complete(c0, `1`))
	got := claimedRuns(t, s, at(3*time.Second))
	require.Len(t, got, 1)
	require.Contains(t, got, r1.ID, "r1 is parked again, first")
}
