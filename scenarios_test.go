package durable_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
)

// Scenarios that run against both stores: in memory inside a synctest
// bubble (dag_test.go, branch_test.go) and on PostgreSQL (pg_test.go).

// starter starts an engine running wfs; the engine stops when the test ends.
type starter func(t *testing.T, wfs ...durable.Definition) *durable.Engine

// scenarioLinear: a -> b -> c; every step gets the run's input, outputs flow
// to children, and each step is queued, started and completed once.
func scenarioLinear(ctx context.Context, t *testing.T, start starter) {
	var inputs counter
	wf := durable.NewWorkflow[order]("linear")
	a := durable.Step(wf, "a", func(ctx durable.Context, in order) (string, error) {
		inputs.inc(fmt.Sprint(in))
		return "A(" + in.ID + ")", nil
	})
	b := durable.Step(wf, "b", func(ctx durable.Context, in order) (string, error) {
		inputs.inc(fmt.Sprint(in))
		prev, ok := a.Output(ctx)
		if !ok {
			return "", fmt.Errorf("no output from a")
		}
		return prev + "->B", nil
	}, durable.After(a))
	c := durable.Step(wf, "c", func(ctx durable.Context, in order) (int, error) {
		inputs.inc(fmt.Sprint(in))
		prev, ok := b.Output(ctx)
		if !ok {
			return 0, fmt.Errorf("no output from b")
		}
		return len(prev) + in.Amount, nil
	}, durable.After(b))
	e := start(t, wf)

	in := order{ID: "o-1", Amount: 100}
	res, err := wf.Run(ctx, e, "tenant-1", in)
	require.NoError(t, err)
	require.Equal(t, durable.RunCompleted, res.Status)
	require.True(t, res.Done())
	require.Nil(t, res.Err)
	require.Equal(t, map[string]int{fmt.Sprint(in): 3}, inputs.snapshot(), "every step receives the run's input")
	outA, err := a.Result(res)
	require.NoError(t, err)
	require.Equal(t, "A(o-1)", outA)
	outB, err := b.Result(res)
	require.NoError(t, err)
	require.Equal(t, "A(o-1)->B", outB)
	outC, err := c.Result(res)
	require.NoError(t, err)
	require.Equal(t, len("A(o-1)->B")+100, outC)
	for _, s := range res.Steps {
		require.Equal(t, durable.StepCompleted, s.State, s.Name)
		require.Equal(t, 1, s.Attempts, s.Name)
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, stepEvents(t, e, res.ID, s.Name), s.Name)
	}
}

// scenarioDiamond: a -> (b, c) -> d; d sees both outputs and is enqueued
// once, after its second parent.
func scenarioDiamond(ctx context.Context, t *testing.T, start starter) {
	wf := durable.NewWorkflow[int]("diamond")
	a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
	b := durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) {
		v, _ := a.Output(ctx)
		return v + 1, nil
	}, durable.After(a))
	c := durable.Step(wf, "c", func(ctx durable.Context, in int) (int, error) {
		v, _ := a.Output(ctx)
		return v * 10, nil
	}, durable.After(a))
	d := durable.Step(wf, "d", func(ctx durable.Context, in int) ([2]int, error) {
		vb, okb := b.Output(ctx)
		vc, okc := c.Output(ctx)
		if !okb || !okc {
			return [2]int{}, fmt.Errorf("missing parent output")
		}
		return [2]int{vb, vc}, nil
	}, durable.After(b, c))
	e := start(t, wf)
	res, err := wf.Run(ctx, e, "t", 5)
	require.NoError(t, err)
	out, err := d.Result(res)
	require.NoError(t, err)
	require.Equal(t, [2]int{6, 50}, out)
	require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, stepEvents(t, e, res.ID, "d"))
}

// scenarioFanOutFanIn: a -> m0..m5 -> f. The middle steps run at the same
// time: each waits until all have started, which cannot happen if they ran
// one after another (in a synctest bubble the wait's timeout then passes at
// once and fails the step). The join sees every output, and each step runs
// once.
func scenarioFanOutFanIn(ctx context.Context, t *testing.T, start starter) {
	const width = 6
	var ran counter
	var startedN atomic.Int32
	allStarted := make(chan struct{})
	wf := durable.NewWorkflow[int]("wide")
	a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
	var mids []durable.Parent
	var refs []*durable.StepRef[int]
	for i := range width {
		r := durable.Step(wf, fmt.Sprintf("m%d", i), func(ctx durable.Context, in int) (int, error) {
			if ran.inc(ctx.StepName()) == 1 && startedN.Add(1) == width {
				close(allStarted)
			}
			select {
			case <-allStarted:
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(20 * time.Second):
				return 0, durable.Terminal(errors.New("the middle steps did not run in parallel"))
			}
			v, _ := a.Output(ctx)
			return v + i, nil
		}, durable.After(a))
		mids = append(mids, r)
		refs = append(refs, r)
	}
	f := durable.Step(wf, "f", func(ctx durable.Context, in int) (int, error) {
		return sumOutputs(ctx, refs)
	}, durable.After(mids...))
	e := start(t, wf)

	res, err := wf.Run(ctx, e, "t", 10)
	require.NoError(t, err)
	sum, err := f.Result(res)
	require.NoError(t, err)
	require.Equal(t, width*10+(width*(width-1))/2, sum)
	require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, stepEvents(t, e, res.ID, "f"))
	for i := range width {
		require.Equal(t, 1, ran.get(fmt.Sprintf("m%d", i)), "m%d ran more than once", i)
	}
}

// scenarioBranchMerge is the seeds' branch: validate -> charge -> ship |
// reject, then finalize after both. Complementary skip conditions pick the
// branch, the skip cascades down the other one, and the merge step runs after
// whichever ran, seeing only its output.
func scenarioBranchMerge(ctx context.Context, t *testing.T, start starter) {
	var ran counter
	wf := durable.NewWorkflow[int]("branch")
	validate := durable.Step(wf, "validate", func(ctx durable.Context, amount int) (validation, error) {
		ran.inc("validate")
		if amount <= 0 {
			return validation{Valid: false, Reason: "non-positive amount"}, nil
		}
		return validation{Valid: true}, nil
	})
	charge := durable.Step(wf, "charge", func(ctx durable.Context, amount int) (string, error) {
		ran.inc("charge")
		return fmt.Sprintf("charged %d", amount), nil
	}, durable.After(validate), durable.SkipIf(validate, func(v validation) bool { return !v.Valid }))
	ship := durable.Step(wf, "ship", func(ctx durable.Context, amount int) (string, error) {
		ran.inc("ship")
		c, _ := charge.Output(ctx)
		return c + ", shipped", nil
	}, durable.After(charge))
	reject := durable.Step(wf, "reject", func(ctx durable.Context, amount int) (string, error) {
		ran.inc("reject")
		v, _ := validate.Output(ctx)
		return "rejected: " + v.Reason, nil
	}, durable.After(validate), durable.SkipIf(validate, func(v validation) bool { return v.Valid }))
	finalize := durable.Step(wf, "finalize", func(ctx durable.Context, amount int) (string, error) {
		ran.inc("finalize")
		shipped, okShip := ship.Output(ctx)
		rejected, okReject := reject.Output(ctx)
		if okShip == okReject {
			return "", fmt.Errorf("exactly one branch must have run (ship %v, reject %v)", okShip, okReject)
		}
		if okShip {
			return shipped, nil
		}
		return rejected, nil
	}, durable.After(ship, reject))
	e := start(t, wf)

	res, err := wf.Run(ctx, e, "t", 30)
	require.NoError(t, err)
	require.Equal(t, map[string]durable.StepState{
		"validate": durable.StepCompleted, "charge": durable.StepCompleted, "ship": durable.StepCompleted,
		"reject": durable.StepSkipped, "finalize": durable.StepCompleted,
	}, states(res))
	out, err := finalize.Result(res)
	require.NoError(t, err)
	require.Equal(t, "charged 30, shipped", out)

	res, err = wf.Run(ctx, e, "t", -1)
	require.NoError(t, err)
	require.Equal(t, map[string]durable.StepState{
		"validate": durable.StepCompleted, "charge": durable.StepSkipped, "ship": durable.StepSkipped,
		"reject": durable.StepCompleted, "finalize": durable.StepCompleted,
	}, states(res), "the merge point runs after whichever branch ran")
	out, err = finalize.Result(res)
	require.NoError(t, err)
	require.Equal(t, "rejected: non-positive amount", out)
	require.Equal(t, []string{"QUEUED/0", "STARTED/1", "SKIPPED/1"}, stepEvents(t, e, res.ID, "charge"),
		"a skip condition runs on the worker")
	require.Equal(t, []string{"SKIPPED/0"}, stepEvents(t, e, res.ID, "ship"), "the cascade needs no worker")
	require.Equal(t, map[string]int{"validate": 2, "charge": 1, "ship": 1, "reject": 1, "finalize": 2}, ran.snapshot())
}

// sumOutputs sums the outputs of parents refs, failing if one is missing.
func sumOutputs(ctx durable.Context, refs []*durable.StepRef[int]) (int, error) {
	sum := 0
	for _, r := range refs {
		v, ok := r.Output(ctx)
		if !ok {
			return 0, fmt.Errorf("missing %s", r.Name())
		}
		sum += v
	}
	return sum, nil
}

// stepEvents returns the events of a run's step as "TYPE/attempt".
func stepEvents(t *testing.T, e *durable.Engine, id uuid.UUID, step string) []string {
	t.Helper()
	evs, err := e.Events(context.Background(), id)
	require.NoError(t, err)
	var out []string
	for _, ev := range evs {
		if ev.Step == step {
			out = append(out, fmt.Sprintf("%s/%d", ev.Type, ev.Attempt))
		}
	}
	return out
}

func states(res *durable.RunResult) map[string]durable.StepState {
	m := map[string]durable.StepState{}
	for _, s := range res.Steps {
		m[s.Name] = s.State
	}
	return m
}
