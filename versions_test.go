package durable_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/versiontest"
)

// Versions and deploys (docs/semantics.md, "Versions and deploys"): engine
// tests on both stores.

// executions records which definition ran which step of which run.
type executions struct {
	mu sync.Mutex
	by map[string]string // "run/step" -> definition label
}

func (x *executions) record(ctx durable.Context, label, step string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.by == nil {
		x.by = map[string]string{}
	}
	x.by[ctx.RunID().String()+"/"+step] = label
}

func (x *executions) of(run uuid.UUID, step string) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	l, ok := x.by[run.String()+"/"+step]
	return l, ok
}

// deployDefs returns the old (a → b) and new (a → b → c) definitions of
// workflow "deploy", as two builds of a service would declare it; each
// step records the build that ran it. version, when set, is both
// definitions' WithVersion (a team that forgot to change it).
func deployDefs(x *executions, version string) (old, cur *durable.Workflow[int]) {
	build := func(label string, steps ...string) *durable.Workflow[int] {
		wf := durable.NewWorkflow[int]("deploy")
		if version != "" {
			wf.WithVersion(version)
		}
		var prev durable.Parent
		for _, s := range steps {
			fn := func(ctx durable.Context, n int) (int, error) {
				x.record(ctx, label, s)
				return n, nil
			}
			var opts []durable.StepOption
			if prev != nil {
				opts = append(opts, durable.After(prev))
			}
			prev = durable.Step(wf, s, fn, opts...)
		}
		return wf
	}
	return build("old", "a", "b"), build("new", "a", "b", "c")
}

// TestRollingDeployNeverFailsRuns: two engines serve workflow "deploy",
// one built from the old definition (a → b), one from the new (a → b →
// c), as during a rolling deploy; runs are triggered from both. Every run
// completes: each is run only by engines of its version (the old build
// never meets step c). With both definitions under one version, as
// before versions, runs of the new shape reach the old build and fail.
func TestRollingDeployNeverFailsRuns(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var x executions
		old, cur := deployDefs(&x, "")
		require.NotEqual(t, old.Version(), cur.Version(), "a step added changes the fingerprint")
		eOld := h.startOn(h.another(), durable.Config{WorkerID: "old"}, old)
		eNew := h.startOn(h.another(), durable.Config{WorkerID: "new"}, cur)
		ctx := h.ctx(2 * time.Minute)
		n := 200
		ids := make([]uuid.UUID, 0, 2*n)
		for i := range n {
			id, err := old.RunNoWait(ctx, eOld, "t", i)
			require.NoError(t, err)
			ids = append(ids, id)
			id, err = cur.RunNoWait(ctx, eNew, "t", i)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		for k, id := range ids {
			res := h.wait(eNew, id, time.Minute)
			require.Equal(t, durabletype.RunCompleted, res.Status, "run %d: %v", k, res.Err)
			want, label := old.Version(), "old"
			if k%2 == 1 {
				want, label = cur.Version(), "new"
			}
			require.Equal(t, want, res.Version)
			for _, s := range res.Steps {
				by, ok := x.of(id, s.Name)
				require.True(t, ok)
				require.Equal(t, label, by, "run %d step %s ran on the %s build", k, s.Name, by)
			}
		}
	})
}

// TestRollingDeployWithoutVersionsFails is the same deploy under one
// version for both definitions (what every deploy was before versions):
// the new build's clients start runs while an old build's worker still
// serves the workflow, and those runs fail at the step the old build
// lacks. It shows that TestRollingDeployNeverFailsRuns would catch the
// regression.
func TestRollingDeployWithoutVersionsFails(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var x executions
		old, cur := deployDefs(&x, "1")
		eOld := h.startOn(h.another(), durable.Config{WorkerID: "old"}, old)
		ctx := h.ctx(2 * time.Minute)
		var ids []uuid.UUID
		for i := range 20 {
			id, err := cur.RunNoWait(ctx, h.client(), "t", i)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		for _, id := range ids {
			res := h.wait(eOld, id, time.Minute)
			require.Equal(t, durabletype.RunFailed, res.Status)
			require.Contains(t, res.Err.Error(), durable.ErrUnknownStep.Error())
			require.Contains(t, res.Err.Error(), `step "c" of workflow "deploy" is not a step in this process's definition`)
		}

		// With versions, the same runs wait for a worker of theirs.
		var y executions
		old, cur = deployDefs(&y, "")
		h.startOn(h.another(), durable.Config{WorkerID: "old2"}, old)
		id, err := cur.RunNoWait(ctx, h.client(), "t", 1)
		require.NoError(t, err)
		eNew := h.startOn(h.another(), durable.Config{WorkerID: "new"}, cur)
		require.Equal(t, durabletype.RunCompleted, h.wait(eNew, id, time.Minute).Status)
	})
}

// TestVersionsSideBySide: one engine registers two versions of a
// workflow; each serves its own runs with its own code, and StartByName
// (and so the HTTP API) starts the one registered last.
func TestVersionsSideBySide(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var x executions
		old, cur := deployDefs(&x, "")
		e := h.start(durable.Config{}, old, cur)
		ctx := h.ctx(time.Minute)
		o, err := old.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		n, err := cur.RunNoWait(ctx, e, "t", 2)
		require.NoError(t, err)
		byName, err := e.StartByName(ctx, "deploy", "t", []byte("3"))
		require.NoError(t, err)
		require.Len(t, h.wait(e, o, time.Minute).Steps, 2)
		require.Len(t, h.wait(e, n, time.Minute).Steps, 3)
		res := h.wait(e, byName.RunID, time.Minute)
		require.Equal(t, cur.Version(), res.Version, "by name: the newest version")
		require.Equal(t, durabletype.RunCompleted, res.Status)

		wi := e.Workflows()
		require.Len(t, wi, 1)
		require.Equal(t, cur.Version(), wi[0].Version)
		require.Equal(t, []string{cur.Version(), old.Version()}, wi[0].Versions)
	})
}

// TestUnservedVersionWaitsVisibly: a client starts a version no worker
// serves; its run waits (it does not fail), is listed unserved with its
// version, and completes once a worker of that version starts.
func TestUnservedVersionWaitsVisibly(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var x executions
		old, cur := deployDefs(&x, "")
		e := h.start(durable.Config{WorkerID: "w-old"}, old)
		ctx := h.ctx(h.duration(2*time.Hour, time.Minute))
		id, err := cur.RunNoWait(ctx, h.client(), "t", 1)
		require.NoError(t, err)
		var unserved []durable.UnservedWorkflow
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
			ws, err := e.Workers(ctx)
			require.NoError(t, err)
			st, err := e.Stats(ctx, durable.StatsOptions{})
			require.NoError(t, err)
			unserved = durable.UnservedQueues(ws, st)
			return len(unserved) > 0
		}, "the run's version is listed unserved")
		require.Equal(t, []durable.UnservedWorkflow{{Workflow: "deploy", Version: cur.Version(), Ready: 1}}, unserved)
		ws, err := e.Workers(ctx)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		require.Equal(t, []durable.WorkflowVersion{{Workflow: "deploy", Version: old.Version()}}, ws[0].Versions)
		require.True(t, ws[0].ServesVersion("deploy", old.Version()))
		require.False(t, ws[0].ServesVersion("deploy", cur.Version()))

		vs, err := e.Versions(ctx, "deploy")
		require.NoError(t, err)
		require.Len(t, vs, 2)
		require.Equal(t, old.Version(), vs[0].Version, "the newest registered comes first")
		require.True(t, vs[0].Registered)
		require.True(t, vs[0].Newest)
		require.Equal(t, []string{"w-old"}, vs[0].Workers)
		require.False(t, vs[0].Unserved())
		require.Equal(t, cur.Version(), vs[1].Version)
		require.False(t, vs[1].Registered)
		require.Equal(t, 1, vs[1].InFlight)
		require.Equal(t, 1, vs[1].Ready)
		require.Empty(t, vs[1].Workers)
		require.True(t, vs[1].Unserved())
		require.Len(t, vs[1].Steps, 3, "its DAG, as its run recorded it")
		require.False(t, vs[1].RecordedAt.IsZero())

		if h.virtual {
			time.Sleep(time.Hour) // an hour of virtual time: nothing claims it
		}
		res, err := e.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunRunning, res.Status)
		s, _ := res.Step("a")
		require.Equal(t, durabletype.TaskQueued, s.State, "it waits, it does not fail")

		eNew := h.startOn(h.another(), durable.Config{WorkerID: "w-new"}, cur)
		require.Equal(t, durabletype.RunCompleted, h.wait(eNew, id, time.Minute).Status)
	})
}

// gated returns a definition of workflow "gated", a → (wait for signal
// "go") → b, plus more steps after b; each step records its label.
func gated(x *executions, label string, more ...string) *durable.Workflow[int] {
	wf := durable.NewWorkflow[int]("gated")
	rec := func(s string) func(ctx durable.Context, n int) (int, error) {
		return func(ctx durable.Context, n int) (int, error) { x.record(ctx, label, s); return n, nil }
	}
	a := durable.Step(wf, "a", rec("a"))
	gate := durable.WaitForSignal[string](wf, "gate", "go", durable.After(a))
	prev := durable.Parent(durable.Step(wf, "b", rec("b"), durable.After(gate)))
	for _, s := range more {
		prev = durable.Step(wf, s, rec(s), durable.After(prev))
	}
	return wf
}

// gatedRuns starts n runs of wf on a worker of its own, waits until each
// waits at its gate, and stops the worker: the runs wait for a worker of
// wf's version.
func gatedRuns(h *harness, ctx context.Context, wf *durable.Workflow[int], n int) []uuid.UUID {
	h.t.Helper()
	e := h.launchOn(h.another(), durable.Config{WorkerID: "gated-" + wf.Version()}, wf)
	ids := make([]uuid.UUID, n)
	for i := range ids {
		id, err := wf.RunNoWait(ctx, e, "t", i)
		require.NoError(h.t, err)
		ids[i] = id
	}
	for _, id := range ids {
		waitAtGate(h, ctx, e, id)
	}
	require.NoError(h.t, e.Stop(ctx))
	return ids
}

// waitAtGate waits until run id waits for its signal at step "gate".
func waitAtGate(h *harness, ctx context.Context, e *durable.Engine, id uuid.UUID) {
	h.t.Helper()
	h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
		res, err := e.Get(ctx, id)
		require.NoError(h.t, err)
		s, _ := res.Step("gate")
		return s.State == durabletype.TaskWaiting
	}, "run %s waits at its gate", id)
}

// TestAcceptsMovesRuns: runs of v1 wait at a signal when the only v1
// worker stops; a worker of v2, which adds a step and accepts v1, moves
// them to v2, and they complete there, running the step v2 added.
func TestAcceptsMovesRuns(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var x executions
		v1 := gated(&x, "v1")
		ctx := h.ctx(2 * time.Minute)
		ids := gatedRuns(h, ctx, v1, 5)

		v2 := gated(&x, "v2", "c").Accepts(v1.Version())
		e2 := h.start(durable.Config{WorkerID: "v2"}, v2)
		for _, id := range ids {
			h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
				res, err := e2.Get(ctx, id)
				require.NoError(t, err)
				return res.Version == v2.Version()
			}, "run %s moved to v2", id)
			require.NoError(t, e2.Signal(ctx, id, "go", []byte(`"ok"`)))
		}
		for _, id := range ids {
			res := h.wait(e2, id, time.Minute)
			require.Equal(t, durabletype.RunCompleted, res.Status)
			require.Len(t, res.Steps, 4)
			by, _ := x.of(id, "a")
			require.Equal(t, "v1", by, "a ran before the move")
			by, _ = x.of(id, "c")
			require.Equal(t, "v2", by)
			require.Contains(t, stepEvents(t, e2, id, "c"), "UPGRADED/0")
		}
	})
}

// TestAcceptsRefusedWhenItCannotHold: registering a definition whose
// Accepts cannot hold for every run of the version it accepts (a step of
// that version missing, or its parents changed) fails with
// ErrIncompatible, whether that version is registered beside it or known
// from the runs the store recorded.
func TestAcceptsRefusedWhenItCannotHold(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var x executions
		v1 := gated(&x, "v1", "c")
		// v2 drops c: a run of v1 that has not run c cannot move.
		v2 := gated(&x, "v2").Accepts(v1.Version())
		e := h.client()
		err := e.Register(v1, v2)
		require.ErrorIs(t, err, durabletype.ErrIncompatible)
		require.Contains(t, err.Error(), `step "c": the other version has no such step`)

		// Known from the store: a v1 run recorded its shape.
		_, err = v1.RunNoWait(h.ctx(time.Minute), h.client(), "t", 1)
		require.NoError(t, err)
		v2b := gated(&x, "v2").Accepts(v1.Version())
		err = h.client().Register(v2b)
		require.ErrorIs(t, err, durabletype.ErrIncompatible)
		var de *durable.DefinitionError
		require.True(t, errors.As(err, &de))
		require.Equal(t, "gated", de.Workflow)

		// A definition that keeps every step of v1 as it was is accepted.
		v3 := gated(&x, "v3", "c", "d").Accepts(v1.Version())
		require.NoError(t, h.client().Register(v3))
		// Accepting its own version is a mistake.
		own := gated(&x, "own")
		own.Accepts(own.Version())
		require.ErrorIs(t, h.client().Register(own), durable.ErrInvalidOption)
	})
}

// TestUpgradeRuns: an operator moves the runs of one version to another:
// a dry run says what would move and what would be refused (and moves
// nothing), then the move; refused runs stay at their version, served by
// their own workers when some come back.
func TestUpgradeRuns(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var x executions
		v1 := gated(&x, "v1", "c")
		v2 := gated(&x, "v2", "c", "d")
		ctx := h.ctx(2 * time.Minute)
		ids := gatedRuns(h, ctx, v1, 4)

		e2 := h.start(durable.Config{WorkerID: "v2"}, v2)
		dry, err := e2.UpgradeRuns(ctx, "gated", v1.Version(), v2.Version(), durable.UpgradeOptions{DryRun: true})
		require.NoError(t, err)
		require.ElementsMatch(t, ids, dry.Moved)
		require.Empty(t, dry.Refused)
		res, err := e2.Get(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, v1.Version(), res.Version, "a dry run moves nothing")

		up, err := e2.UpgradeRuns(ctx, "gated", v1.Version(), v2.Version(), durable.UpgradeOptions{})
		require.NoError(t, err)
		require.ElementsMatch(t, ids, up.Moved)
		for _, id := range ids {
			require.NoError(t, e2.Signal(ctx, id, "go", []byte(`""`)))
			res := h.wait(e2, id, time.Minute)
			require.Equal(t, durabletype.RunCompleted, res.Status)
			by, _ := x.of(id, "d")
			require.Equal(t, "v2", by)
		}

		// A version that drops a step a run has not run refuses it.
		v3 := gated(&x, "v3")
		id, err := v2.RunNoWait(ctx, e2, "t", 9)
		require.NoError(t, err)
		waitAtGate(h, ctx, e2, id)
		e3 := h.start(durable.Config{WorkerID: "v3"}, v3)
		up, err = e3.UpgradeRuns(ctx, "gated", v2.Version(), v3.Version(), durable.UpgradeOptions{IDs: []uuid.UUID{id, uuid.New()}})
		require.NoError(t, err)
		require.Empty(t, up.Moved)
		require.Len(t, up.Refused, 2)
		require.ErrorIs(t, up.Refused[0].Err, durabletype.ErrIncompatible)
		require.Contains(t, up.Refused[0].Err.Error(), `step "c"`)
		require.ErrorIs(t, up.Refused[1].Err, durabletype.ErrRunNotFound)

		_, err = e3.UpgradeRuns(ctx, "gated", v2.Version(), "nope", durable.UpgradeOptions{})
		require.ErrorIs(t, err, durable.ErrUnknownVersion)
		_, err = e3.UpgradeRuns(ctx, "gated", v2.Version(), "bad@version", durable.UpgradeOptions{})
		require.ErrorIs(t, err, durable.ErrInvalidVersion)
		// The target's shape may come from the runs that recorded it, when
		// this engine did not register it.
		dry, err = e3.UpgradeRuns(ctx, "gated", v1.Version(), v2.Version(), durable.UpgradeOptions{DryRun: true})
		require.NoError(t, err)
		require.Empty(t, dry.Moved, "no run is left at v1")
	})
}

// TestFingerprint: the version covers what runs in flight rely on, not
// step code or policies.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	type In struct{ A int }
	type Out struct {
		B string `json:"b"`
	}
	type OutRenamedField struct {
		B string `json:"bee"`
	}
	base := func(mod func(wf *durable.Workflow[In])) string {
		wf := durable.NewWorkflow[In]("fp")
		a := durable.Step(wf, "a", func(ctx durable.Context, in In) (Out, error) { return Out{}, nil })
		durable.Step(wf, "b", func(ctx durable.Context, in In) (int, error) { return 0, nil }, durable.After(a))
		if mod != nil {
			mod(wf)
		}
		return wf.Version()
	}
	v := base(nil)
	require.Len(t, v, 12)
	require.Equal(t, v, base(nil), "stable")

	// Not covered: code, retry policies, timeouts.
	wf := durable.NewWorkflow[In]("fp")
	a := durable.Step(wf, "a", func(ctx durable.Context, in In) (Out, error) { return Out{B: "x"}, errors.New("other code") },
		durable.WithRetry(durable.RetryPolicy{MaxRetries: 5}), durable.WithTimeout(time.Second))
	durable.Step(wf, "b", func(ctx durable.Context, in In) (int, error) { return 1, nil }, durable.After(a))
	require.Equal(t, v, wf.Version())

	// Covered: a step added, an output type's JSON, a parent, the input type.
	require.NotEqual(t, v, base(func(wf *durable.Workflow[In]) {
		durable.Step(wf, "c", func(ctx durable.Context, in In) (int, error) { return 0, nil })
	}))
	wf2 := durable.NewWorkflow[In]("fp")
	a2 := durable.Step(wf2, "a", func(ctx durable.Context, in In) (OutRenamedField, error) { return OutRenamedField{}, nil })
	durable.Step(wf2, "b", func(ctx durable.Context, in In) (int, error) { return 0, nil }, durable.After(a2))
	require.NotEqual(t, v, wf2.Version(), "a field's JSON name changed")
	wf3 := durable.NewWorkflow[In]("fp")
	durable.Step(wf3, "a", func(ctx durable.Context, in In) (Out, error) { return Out{}, nil })
	durable.Step(wf3, "b", func(ctx durable.Context, in In) (int, error) { return 0, nil })
	require.NotEqual(t, v, wf3.Version(), "a parent edge removed")
	wf4 := durable.NewWorkflow[int]("fp")
	a4 := durable.Step(wf4, "a", func(ctx durable.Context, in int) (Out, error) { return Out{}, nil })
	durable.Step(wf4, "b", func(ctx durable.Context, in int) (int, error) { return 0, nil }, durable.After(a4))
	require.NotEqual(t, v, wf4.Version(), "the input type changed")

	// By hand.
	hand := durable.NewWorkflow[In]("fp").WithVersion("2024-06")
	durable.Step(hand, "a", func(ctx durable.Context, in In) (int, error) { return 0, nil })
	require.Equal(t, "2024-06", hand.Version())
	bad := durable.NewWorkflow[In]("fp").WithVersion("a@b")
	durable.Step(bad, "a", func(ctx durable.Context, in In) (int, error) { return 0, nil })
	require.ErrorIs(t, newEngine(t).Register(bad), durable.ErrInvalidVersion)
	require.ErrorIs(t, newEngine(t).Register(durable.NewWorkflow[int]("x").Accepts("")), durable.ErrInvalidVersion)
}

// node is a recursive type: its fingerprint terminates.
type node struct {
	Name     string  `json:"name"`
	Children []*node `json:"children"`
	Any      any     `json:"any"`
	private  int
}

// TestFingerprintOfRecursiveTypes: a recursive output type, interfaces,
// maps, arrays and a type that encodes itself all fingerprint, stably.
func TestFingerprintOfRecursiveTypes(t *testing.T) {
	t.Parallel()
	mk := func() string {
		wf := durable.NewWorkflow[map[string][2]*node]("rec")
		durable.Step(wf, "a", func(ctx durable.Context, in map[string][2]*node) (node, error) { return node{private: 1}, nil })
		durable.Step(wf, "b", func(ctx durable.Context, in map[string][2]*node) (time.Time, error) { return time.Time{}, nil })
		return wf.Version()
	}
	require.Equal(t, mk(), mk())
	require.Len(t, mk(), 12)
}

// The JSON shapes of versiontest.Order and versiontest.Receipt, under
// other names in this package, with the fields in another order, one Go
// name changed behind the same JSON name, a narrower integer and no
// omitempty.
type shopOrder struct {
	Lines  []shopLine `json:"lines"`
	Ident  string     `json:"id"`
	Remark string     `json:"note"`
}

type shopLine struct {
	Price    float64 `json:"price"`
	Quantity int32   `json:"qty"`
	SKU      string  `json:"sku"`
}

type shopReceiptHead struct {
	Order string `json:"order"`
}

// shopReceipt has versiontest.Receipt's fields, one promoted from an embedded
// struct.
type shopReceipt struct {
	shopReceiptHead
	Total float64
}

// What changes the JSON: a JSON name, a field's type, the option string.
type shopOrderRenamedField struct {
	Lines  []shopLine `json:"lines"`
	Ident  string     `json:"order_id"`
	Remark string     `json:"note"`
}

type lineOtherType struct {
	Price    string `json:"price"`
	Quantity int    `json:"qty"`
	SKU      string `json:"sku"`
}

type shopOrderOtherLine struct {
	Lines  []lineOtherType `json:"lines"`
	Ident  string          `json:"id"`
	Remark string          `json:"note"`
}

type shopReceiptQuoted struct {
	Order string  `json:"order"`
	Total float64 `json:",string"`
}

// shop declares workflow name with input I and a step "pay" whose
// output is O, after a step "check" whose output is a []I, and returns
// its version.
func shop[I, O any](name string) string {
	wf := durable.NewWorkflow[I](name)
	check := durable.Step(wf, "check", func(ctx durable.Context, in I) ([]I, error) { return nil, nil })
	var o O
	durable.Step(wf, "pay", func(ctx durable.Context, in I) (O, error) { return o, nil }, durable.After(check))
	return wf.Version()
}

// TestFingerprintIgnoresGoNames: a version depends on the JSON that runs
// read and write, not on what Go calls the types: the same workflow with
// its types renamed, moved to another package, their fields reordered or
// promoted from an embedded struct, or omitempty dropped, keeps its
// version; a JSON name, a field's type or the option string changed gives
// another.
func TestFingerprintIgnoresGoNames(t *testing.T) {
	t.Parallel()
	v := shop[versiontest.Order, versiontest.Receipt]("shop")
	require.Len(t, v, 12)
	require.Equal(t, v, shop[shopOrder, shopReceipt]("shop"), "types renamed and moved out of their package")
	require.Equal(t, v, shop[*shopOrder, *shopReceipt]("shop"), "a pointer reads and writes what it points to")

	require.NotEqual(t, v, shop[shopOrderRenamedField, shopReceipt]("shop"), "a JSON name changed")
	require.NotEqual(t, v, shop[shopOrderOtherLine, shopReceipt]("shop"), "a nested field's type changed")
	require.NotEqual(t, v, shop[shopOrder, shopReceiptQuoted]("shop"), "a number written as a string")
	require.NotEqual(t, v, shop[shopOrder, shopReceiptHead]("shop"), "a field less")
}

// TestFingerprintCarriesWorkflowName: two workflows of the same steps and
// types never share a version.
func TestFingerprintCarriesWorkflowName(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, shop[shopOrder, shopReceipt]("shop"), shop[shopOrder, shopReceipt]("store"))
	f := durable.NewFunction("f", func(ctx durable.FuncContext, n int) (int, error) { return n, nil })
	g := durable.NewFunction("g", func(ctx durable.FuncContext, n int) (int, error) { return n, nil })
	require.NotEqual(t, f.Version(), g.Version(), "nor two functions of the same types")
}

// legacyDef returns workflow "legacy", a → b, whose steps record label.
func legacyDef(x *executions, label string) *durable.Workflow[int] {
	wf := durable.NewWorkflow[int]("legacy")
	a := durable.Step(wf, "a", func(ctx durable.Context, n int) (int, error) {
		x.record(ctx, label, "a")
		return n, nil
	})
	durable.Step(wf, "b", func(ctx durable.Context, n int) (int, error) {
		x.record(ctx, label, "b")
		return n, nil
	}, durable.After(a))
	return wf
}

// legacyVersion is the version that releases before fingerprint 2 gave
// legacyDef's workflow (computed by the release before this change): the
// version the runs they started are pinned to.
const legacyVersion = "8de8fd9e2f04"

// TestLegacyVersionServed: runs pinned to the version an older release
// of durable gave a definition (its legacy fingerprint) are claimed and
// completed by engines of this release registering the same definition,
// alone or beside engines of the older release (as during a rolling
// deploy of the library's upgrade); the new engines' worker records
// list the legacy version as accepted, so it is never shown unserved.
func TestLegacyVersionServed(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var x executions
		cur := legacyDef(&x, "new")
		require.NotEqual(t, legacyVersion, cur.Version(), "the fingerprint changed")
		// The older release's definition: its version was the legacy
		// fingerprint.
		old := legacyDef(&x, "old").WithVersion(legacyVersion)
		ctx := h.ctx(2 * time.Minute)
		var before []uuid.UUID
		for i := range 5 {
			id, err := old.RunNoWait(ctx, h.client(), "t", i)
			require.NoError(t, err)
			before = append(before, id)
		}

		eNew := h.start(durable.Config{WorkerID: "new"}, cur)
		for _, id := range before {
			res := h.wait(eNew, id, time.Minute)
			require.Equal(t, durabletype.RunCompleted, res.Status, "%v", res.Err)
			require.Equal(t, legacyVersion, res.Version, "served at its version, not moved")
			for _, s := range []string{"a", "b"} {
				by, _ := x.of(id, s)
				require.Equal(t, "new", by)
			}
		}
		ws, err := eNew.Workers(ctx)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		require.Equal(t, []durable.WorkflowVersion{{Workflow: "legacy", Version: cur.Version()}}, ws[0].Versions)
		require.Equal(t, []durable.WorkflowVersion{{Workflow: "legacy", Version: legacyVersion}}, ws[0].Accepts)
		require.True(t, ws[0].ServesVersion("legacy", legacyVersion))
		vs, err := eNew.Versions(ctx, "legacy")
		require.NoError(t, err)
		require.Len(t, vs, 2)
		require.Equal(t, cur.Version(), vs[0].Version)
		require.Equal(t, legacyVersion, vs[1].Version)
		require.Equal(t, cur.Version(), vs[1].LegacyOf)
		require.False(t, vs[1].Unserved())

		// Old and new engines side by side: every run completes, those of
		// the new version on the new engine only.
		eOld := h.startOn(h.another(), durable.Config{WorkerID: "old"}, old)
		var ids []uuid.UUID
		for i := range 20 {
			id, err := old.RunNoWait(ctx, eOld, "t", i)
			require.NoError(t, err)
			ids = append(ids, id)
			id, err = cur.RunNoWait(ctx, eNew, "t", i)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		for k, id := range ids {
			res := h.wait(eNew, id, time.Minute)
			require.Equal(t, durabletype.RunCompleted, res.Status, "run %d: %v", k, res.Err)
			if k%2 == 1 {
				require.Equal(t, cur.Version(), res.Version)
				by, _ := x.of(id, "b")
				require.Equal(t, "new", by)
			} else {
				require.Equal(t, legacyVersion, res.Version)
			}
		}
	})
}

// TestAcceptsRunsOf: a definition accepts the runs of an older one kept
// in code, by the definition rather than its version id; it refuses
// another workflow, itself and nil.
func TestAcceptsRunsOf(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var x executions
		v1 := gated(&x, "v1")
		ctx := h.ctx(2 * time.Minute)
		ids := gatedRuns(h, ctx, v1, 3)

		v2 := gated(&x, "v2", "c").AcceptsRunsOf(v1)
		e2 := h.start(durable.Config{WorkerID: "v2"}, v2)
		for _, id := range ids {
			h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
				res, err := e2.Get(ctx, id)
				require.NoError(t, err)
				return res.Version == v2.Version()
			}, "run %s moved to v2", id)
			require.NoError(t, e2.Signal(ctx, id, "go", []byte(`"ok"`)))
			res := h.wait(e2, id, time.Minute)
			require.Equal(t, durabletype.RunCompleted, res.Status)
			by, _ := x.of(id, "c")
			require.Equal(t, "v2", by)
		}
		wi := e2.Workflows()
		require.Len(t, wi, 1)
		require.Contains(t, wi[0].Accepts, v1.Version())
		require.Len(t, wi[0].Accepts, 2, "its version and its legacy version")

		other := durable.NewWorkflow[int]("other")
		durable.Step(other, "a", func(ctx durable.Context, n int) (int, error) { return n, nil })
		bad := gated(&x, "bad", "c").AcceptsRunsOf(other)
		require.ErrorIs(t, h.client().Register(bad), durable.ErrInvalidOption)
		self := gated(&x, "self", "c")
		self.AcceptsRunsOf(self)
		require.ErrorIs(t, h.client().Register(self), durable.ErrInvalidOption)
		null := gated(&x, "null", "c").AcceptsRunsOf(nil)
		require.ErrorIs(t, h.client().Register(null), durable.ErrNilFunc)
	})
}

// TestStartWarnsOfStaleVersion: a process that only triggers runs (its
// engine does not serve the workflow) and starts a version that no live
// worker serves, while live workers serve another version of the
// workflow, is told so in what the trigger returns, and logs it once a
// minute at most, not once a run. A version live workers serve, a
// process serving its own version, or a workflow no worker serves yet
// get no warning.
func TestStartWarnsOfStaleVersion(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var x executions
		old, cur := deployDefs(&x, "")
		var logs logRecorder
		client, err := durable.New(h.store, h.config(durable.Config{Logger: logs.logger()}))
		require.NoError(t, err)
		require.NoError(t, client.Register(old))
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		const msg = "starting runs of a version that no live worker serves"

		st, err := old.Start(ctx, client, "t", 1)
		require.NoError(t, err)
		require.Empty(t, st.Warning, "no worker serves the workflow yet")

		// Live at the moment the client reads it, on a loaded machine too.
		h.start(durable.Config{WorkerID: "new", DeadAfter: h.duration(h.deadAfter(), 10*time.Second)}, cur)
		if h.virtual {
			time.Sleep(time.Minute + time.Second) // past what the client read
		} else {
			client, err = durable.New(h.store, h.config(durable.Config{Logger: logs.logger()}))
			require.NoError(t, err)
			require.NoError(t, client.Register(old))
		}
		for i := range 3 {
			st, err := old.Start(ctx, client, "t", i)
			require.NoError(t, err)
			require.Contains(t, st.Warning, `no live worker serves version "`+old.Version()+`" of workflow "deploy"`)
			require.Contains(t, st.Warning, `live workers serve "`+cur.Version()+`"`)
		}
		byName, err := client.StartByName(ctx, "deploy", "t", []byte("4"))
		require.NoError(t, err)
		require.NotEmpty(t, byName.Warning, "by name (an HTTP API) too")
		many, err := old.StartMany(ctx, client, []durable.Trigger[int]{{Tenant: "t", Input: 5}, {Tenant: "t", Input: 6}})
		require.NoError(t, err)
		for _, s := range many {
			require.NotEmpty(t, s.Warning)
		}
		require.Equal(t, 1, logs.count(msg), "logged once, not once a run")

		st, err = cur.Start(ctx, client, "t", 7)
		require.NoError(t, err)
		require.Empty(t, st.Warning, "live workers serve the new version")
		side := h.launchOn(h.store, durable.Config{WorkerID: "side", Logger: logs.logger()}, old)
		st, err = old.Start(ctx, side, "t", 8)
		require.NoError(t, err)
		require.Empty(t, st.Warning, "a process that serves its version itself")
		require.NoError(t, side.Stop(ctx))

		if h.virtual {
			time.Sleep(time.Minute + time.Second)
			st, err = old.Start(ctx, client, "t", 9)
			require.NoError(t, err)
			require.NotEmpty(t, st.Warning)
			require.Equal(t, 2, logs.count(msg), "logged again a minute later")
		}
	})
}

// TestTypesMovedKeepRunsServed: runs started by a build whose types live
// in another package (versiontest) are completed by a build that declares
// them in its own package under other names: the same version, the same
// JSON read back.
func TestTypesMovedKeepRunsServed(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		before := durable.NewWorkflow[versiontest.Order]("moved")
		durable.Step(before, "pay", func(ctx durable.Context, o versiontest.Order) (versiontest.Receipt, error) {
			return versiontest.Receipt{}, errors.New("the old build does not run here")
		})
		after := durable.NewWorkflow[shopOrder]("moved")
		durable.Step(after, "pay", func(ctx durable.Context, o shopOrder) (shopReceipt, error) {
			total := 0.0
			for _, l := range o.Lines {
				total += l.Price * float64(l.Quantity)
			}
			return shopReceipt{shopReceiptHead: shopReceiptHead{Order: o.Ident}, Total: total}, nil
		})
		require.Equal(t, before.Version(), after.Version())

		ctx := h.ctx(time.Minute)
		id, err := before.RunNoWait(ctx, h.client(), "t", versiontest.Order{ID: "o-1", Lines: []versiontest.Line{{SKU: "x", Quantity: 2, Price: 1.5}}})
		require.NoError(t, err)
		e := h.start(durable.Config{}, after)
		res := h.wait(e, id, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status, "%v", res.Err)
		s, ok := res.Step("pay")
		require.True(t, ok)
		require.JSONEq(t, `{"order":"o-1","Total":3}`, string(s.Output))
	})
}
