package durablecli

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/effectivelabs/durable"
)

// The workflows the tests run their command lines on. They have the names
// and shapes of the durable binary's built-in workflows (its demo's order
// workflow, the benchmark workflows and the chaos workflow), so that what
// the tests read (step names, parents, waits, outputs) is that of a
// familiar program, but they are defined here: the embeddable CLI's tests
// do not depend on the binary's built-ins. Unlike the built-ins, the chaos
// steps do not work for a random time.

// order is the input of the order workflow (order-processing).
type order struct {
	ID       string   `json:"id"`
	Customer string   `json:"customer"`
	Cents    int      `json:"cents"`
	Items    []string `json:"items"`
}

type validation struct {
	Valid  bool   `json:"valid"`
	Reason string `json:"reason,omitempty"`
}

type receipt struct {
	ChargeID string `json:"charge_id"`
	Cents    int    `json:"cents"`
}

type parcel struct {
	Carrier  string `json:"carrier"`
	Tracking string `json:"tracking"`
}

// orderFlow is the order workflow with the steps whose outputs tests read:
//
//	validate ─┬─ charge ─┬─ fraud-window (durable sleep) ─┬─ ship ─┬─ finalize
//	          │          └─ prepare-shipment ──────────────┘        │
//	          └─ reject ────────────────────────────────────────────┘
//
// charge runs for a valid order, reject for an invalid one; charge fails
// its first attempt.
type orderFlow struct {
	Workflow *durable.Workflow[order]
	Reject   *durable.StepRef[string]
}

// errGatewayTimeout is the error of charge's first attempt.
var errGatewayTimeout = errors.New("payment gateway timeout")

func newOrderFlow(fraudWindow time.Duration) *orderFlow {
	wf := durable.NewWorkflow[order]("order-processing")
	validate := durable.Step(wf, "validate", func(_ durable.Context, o order) (validation, error) {
		switch {
		case o.Cents <= 0:
			return validation{Reason: "amount must be positive"}, nil
		case len(o.Items) == 0:
			return validation{Reason: "no items"}, nil
		}
		return validation{Valid: true}, nil
	})
	charge := durable.Step(wf, "charge", func(ctx durable.Context, o order) (receipt, error) {
		if ctx.Attempt() == 1 {
			return receipt{}, errGatewayTimeout
		}
		return receipt{ChargeID: "ch_" + o.ID, Cents: o.Cents}, nil
	},
		durable.After(validate),
		durable.SkipIf(validate, func(v validation) bool { return !v.Valid }),
		durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 200 * time.Millisecond}),
	)
	reject := durable.Step(wf, "reject", func(ctx durable.Context, o order) (string, error) {
		v, _ := validate.Output(ctx)
		return fmt.Sprintf("order %s rejected: %s", o.ID, v.Reason), nil
	}, durable.After(validate), durable.SkipIf(validate, func(v validation) bool { return v.Valid }))
	window := durable.Sleep(wf, "fraud-window", fraudWindow, durable.After(charge))
	prepared := durable.Step(wf, "prepare-shipment", func(_ durable.Context, o order) (parcel, error) {
		return parcel{Carrier: "ACME", Tracking: "TRK-" + o.ID}, nil
	}, durable.After(charge))
	ship := durable.Step(wf, "ship", func(ctx durable.Context, _ order) (string, error) {
		p, _ := prepared.Output(ctx)
		return fmt.Sprintf("shipped by %s, tracking %s", p.Carrier, p.Tracking), nil
	}, durable.After(window, prepared))
	durable.Step(wf, "finalize", func(ctx durable.Context, _ order) (string, error) {
		if s, ok := ship.Output(ctx); ok {
			return "done: " + s, nil
		}
		if r, ok := reject.Output(ctx); ok {
			return "done: " + r, nil
		}
		return "", durable.Terminal(errors.New("neither branch ran"))
	}, durable.After(ship, reject))
	wf.OnFailure(func(durable.Context, order, durable.Failure) error { return nil })
	return &orderFlow{Workflow: wf, Reject: reject}
}

// parentChildren is how many child runs a bench-parent run starts.
const parentChildren = 10

// waitKey is the event key a bench-wait run with input n waits for.
func waitKey(n int) string { return "bench-" + strconv.Itoa(n) }

// chaosKey is the event key the chaos run with input n waits for.
func chaosKey(n int) string { return "chaos-" + strconv.Itoa(n) }

// chaosItems is how many items the chaos workflow's map step maps.
const chaosItems = 4

// chaosInput is the chaos workflow's input.
type chaosInput struct {
	N int `json:"n"`
}

// parity is the output of the chaos workflow's start step.
type parity struct {
	Odd bool `json:"odd"`
}

// fixtures is the tests' workflows.
type fixtures struct {
	Demo  *orderFlow
	Noop  *durable.Workflow[int]
	DAG   *durable.Workflow[int]
	Chain *durable.Workflow[int]
	Keyed *durable.Workflow[int]
	// Map maps a no-op over a list of as many items as its input.
	Map *durable.Workflow[int]
	// Wait waits for the event waitKey(input).
	Wait *durable.Workflow[int]
	// Parent starts parentChildren runs of Child, whose step "work" returns
	// its input, and joins them.
	Parent     *durable.Workflow[int]
	Child      *durable.Workflow[int]
	Chaos      *durable.Workflow[chaosInput]
	ChaosChild *durable.Workflow[chaosInput]
}

// newFixtures defines the tests' workflows, the order workflow with the
// given fraud window (2s if zero).
func newFixtures(fraudWindow time.Duration) *fixtures {
	if fraudWindow == 0 {
		fraudWindow = 2 * time.Second
	}
	nothing := func(durable.Context, int) (struct{}, error) { return struct{}{}, nil }
	f := &fixtures{Demo: newOrderFlow(fraudWindow)}

	// bench-noop: one step.
	f.Noop = durable.NewWorkflow[int]("bench-noop")
	durable.Step(f.Noop, "noop", nothing)

	// bench-dag: root -> fan-0 .. fan-7 -> join.
	f.DAG = durable.NewWorkflow[int]("bench-dag")
	root := durable.Step(f.DAG, "root", nothing)
	var fan []durable.Parent
	for i := range 8 {
		fan = append(fan, durable.Step(f.DAG, fmt.Sprintf("fan-%d", i), nothing, durable.After(root)))
	}
	durable.Step(f.DAG, "join", nothing, durable.After(fan...))

	// bench-chain: a -> b.
	f.Chain = durable.NewWorkflow[int]("bench-chain")
	a := durable.Step(f.Chain, "a", nothing)
	durable.Step(f.Chain, "b", nothing, durable.After(a))

	// bench-keyed: one step, at most one running per input.
	f.Keyed = durable.NewWorkflow[int]("bench-keyed")
	durable.Step(f.Keyed, "work", nothing, durable.WithConcurrency(func(in int) string { return strconv.Itoa(in) }, 1))

	// bench-map: list -> items (one per element) -> join.
	f.Map = durable.NewWorkflow[int]("bench-map")
	list := durable.Step(f.Map, "list", func(_ durable.Context, n int) ([]int, error) { return make([]int, n), nil })
	items := durable.Map(f.Map, "items", list, nothing)
	durable.Step(f.Map, "join", func(ctx durable.Context, _ int) (int, error) {
		out, ok := items.Output(ctx)
		if !ok {
			return 0, durable.Terminal(errors.New("no items"))
		}
		return len(out), nil
	}, durable.After(items))

	// bench-wait: waits for the event waitKey(input).
	f.Wait = durable.NewWorkflow[int]("bench-wait")
	durable.WaitForEvent[int](f.Wait, "wait", func(_ durable.Context, n int) (string, error) { return waitKey(n), nil })

	// bench-parent: child-0 .. child-9 (runs of bench-child) -> join.
	f.Child = durable.NewWorkflow[int]("bench-child")
	work := durable.Step(f.Child, "work", func(_ durable.Context, n int) (int, error) { return n, nil })
	f.Parent = durable.NewWorkflow[int]("bench-parent")
	var kids []durable.Parent
	for i := range parentChildren {
		kids = append(kids, durable.Child(f.Parent, fmt.Sprintf("child-%d", i), f.Child, work,
			func(_ durable.Context, n int) (int, error) { return n*parentChildren + i, nil }))
	}
	durable.Step(f.Parent, "join", nothing, durable.After(kids...))

	f.Chaos, f.ChaosChild = chaosFlow()
	return f
}

// all returns every workflow, for Engine.Register.
func (f *fixtures) all() []durable.Definition {
	return []durable.Definition{f.Demo.Workflow, f.Noop, f.DAG, f.Chain, f.Keyed, f.Map, f.Wait, f.Parent, f.Child,
		f.Chaos, f.ChaosChild}
}

// chaosFlow defines chaos, a workflow with a branch, a retried step, a
// durable sleep, an event wait, a child run (of chaos-child: a -> b) and a
// map step:
//
//	start ─┬─ even (skipped for odd N) ──────────┐
//	       ├─ odd  (skipped for even N) ─────────┤
//	       ├─ flaky (fails attempt 1) ───────────┤
//	       ├─ work-0 .. work-3 ──────────────────┤
//	       ├─ nap (durable sleep, 1s) ───────────┼─ join
//	       ├─ approve (event chaosKey(N)) ───────┤
//	       ├─ sub (child run of chaos-child) ────┤
//	       └─ lines ── fan (chaosItems items) ───┘
//
// approve looks back an hour: an event sent before the run counts.
func chaosFlow() (*durable.Workflow[chaosInput], *durable.Workflow[chaosInput]) {
	wf := durable.NewWorkflow[chaosInput]("chaos")
	work := func(ctx durable.Context, in chaosInput) (string, error) {
		return fmt.Sprintf("%s/%d", ctx.StepName(), in.N), nil
	}
	retry := durable.WithRetry(durable.RetryPolicy{MaxRetries: 20, InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second})

	start := durable.Step(wf, "start", func(_ durable.Context, in chaosInput) (parity, error) {
		return parity{Odd: in.N%2 == 1}, nil
	}, retry)
	even := durable.Step(wf, "even", work, retry, durable.After(start), durable.SkipIf(start, func(p parity) bool { return p.Odd }))
	odd := durable.Step(wf, "odd", work, retry, durable.After(start), durable.SkipIf(start, func(p parity) bool { return !p.Odd }))
	flaky := durable.Step(wf, "flaky", func(ctx durable.Context, in chaosInput) (string, error) {
		if ctx.Attempt() == 1 {
			return "", errors.New("flaky: first attempt always fails")
		}
		return fmt.Sprintf("flaky/%d", in.N), nil
	}, retry, durable.After(start))
	parents := []durable.Parent{even, odd, flaky}
	for i := range 4 {
		parents = append(parents, durable.Step(wf, fmt.Sprintf("work-%d", i), work, retry, durable.After(start)))
	}
	parents = append(parents, durable.Sleep(wf, "nap", time.Second, durable.After(start)))
	approve := durable.WaitForEvent[string](wf, "approve", func(_ durable.Context, in chaosInput) (string, error) {
		return chaosKey(in.N), nil
	}, retry, durable.After(start), durable.WithLookback(time.Hour))

	child := durable.NewWorkflow[chaosInput]("chaos-child")
	a := durable.Step(child, "a", work, retry)
	b := durable.Step(child, "b", func(ctx durable.Context, _ chaosInput) (string, error) {
		prev, _ := a.Output(ctx)
		return "child:" + prev, nil
	}, retry, durable.After(a))
	sub := durable.Child(wf, "sub", child, b, func(_ durable.Context, in chaosInput) (chaosInput, error) { return in, nil },
		retry, durable.After(start))

	lines := durable.Step(wf, "lines", func(_ durable.Context, in chaosInput) ([]int, error) {
		out := make([]int, chaosItems)
		for k := range out {
			out[k] = in.N*chaosItems + k
		}
		return out, nil
	}, retry, durable.After(start))
	fan := durable.Map(wf, "fan", lines, func(_ durable.Context, x int) (int, error) { return 2 * x, nil }, retry)
	parents = append(parents, approve, sub, fan)

	durable.Step(wf, "join", func(ctx durable.Context, _ chaosInput) (string, error) {
		e, okEven := even.Output(ctx)
		o, okOdd := odd.Output(ctx)
		if okEven == okOdd {
			return "", durable.Terminal(fmt.Errorf("exactly one branch must run (even %v, odd %v)", okEven, okOdd))
		}
		ap, okAp := approve.Output(ctx)
		kid, okKid := sub.Output(ctx)
		items, okFan := fan.Output(ctx)
		if !okAp || !okKid || !okFan || len(items) != chaosItems {
			return "", durable.Terminal(fmt.Errorf("missing outputs: approve %v, sub %v, fan %v", okAp, okKid, okFan))
		}
		return e + o + "/" + ap + "/" + kid, nil
	}, retry, durable.After(parents...))
	return wf, child
}
