// Package workloads defines the built-in workflows that `durable worker`
// serves: the demo, the benchmark workflows, and the chaos workflow and the
// durable functions (crash-fn) the crash tests run while killing workers.
package workloads

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/demo"
	"github.com/effectivelabs/durable/internal/core/sleep"
)

// Workflow names.
const (
	Noop       = "bench-noop"
	DAG        = "bench-dag"
	BenchFunc  = "bench-func"
	Chain      = "bench-chain"
	Keyed      = "bench-keyed"
	Map        = "bench-map"
	Wait       = "bench-wait"
	Parent     = "bench-parent"
	ChildWF    = "bench-child"
	Chaos      = "chaos"
	ChaosChild = "chaos-child"
	Steady     = "steady"
	Poison     = "crash-poison"
)

// SteadyWork is how many parallel work steps a steady run has.
const SteadyWork = 4

// FuncSteps is how many no-op steps (durable.Do calls) a bench-func run
// makes.
const FuncSteps = 10

// ParentChildren is how many child runs a bench-parent run starts.
const ParentChildren = 10

// WaitKey is the event key a bench-wait run with input n waits for.
func WaitKey(n int) string { return "bench-" + strconv.Itoa(n) }

// ChaosKey is the event key the chaos run with input n waits for: the
// chaos tests send it.
func ChaosKey(n int) string { return "chaos-" + strconv.Itoa(n) }

// ChaosItems is how many items the chaos workflow's map step maps.
const ChaosItems = 4

// Recorder is called at the start of every execution of a chaos step, so
// that tests can count executions (at least once) independently of the
// engine's own records (exactly once). It may return an error to fail the
// attempt.
type Recorder func(ctx durable.Context) error

// Options configures the built-in workflows.
type Options struct {
	// FraudWindow is the demo's sleep. Defaults to 2s.
	FraudWindow time.Duration
	// ChaosSleep is the chaos workflow's durable sleep. Defaults to 1s.
	ChaosSleep time.Duration
	// ChaosWork is the longest a chaos work step runs (uniformly random
	// from 0, honouring cancellation). Defaults to 200ms.
	ChaosWork time.Duration
	// Record, if set, is called by every chaos step execution.
	Record Recorder
	// FuncSleep is crash-fn's durable sleep (crash-fn-child sleeps half
	// of it). Defaults to 300ms.
	FuncSleep time.Duration
	// FuncRecord, if set, is called by every execution of a step of
	// crash-fn and crash-fn-child.
	FuncRecord FuncRecorder
	// FuncTx, if set, writes the row of crash-fn's transactional step.
	FuncTx FuncTxWriter
}

// Set is the built-in workflows.
type Set struct {
	Demo *demo.Flow
	Noop *durable.Workflow[int]
	DAG  *durable.Workflow[int]
	// BenchFunc is a durable function making FuncSteps no-op steps in a
	// row (durable.Do); its output is how many it made.
	BenchFunc *durable.Function[int, int]
	Chain     *durable.Workflow[int]
	Keyed     *durable.Workflow[int]
	// Map maps a no-op over a list of as many items as its input.
	Map *durable.Workflow[int]
	// Wait waits for the event WaitKey(input).
	Wait *durable.Workflow[int]
	// Parent starts ParentChildren runs of Child (one no-op step), in
	// parallel, and joins their results.
	Parent *durable.Workflow[int]
	Child  *durable.Workflow[int]
	Chaos  *durable.Workflow[ChaosInput]
	// ChaosChild is the child workflow of the chaos workflow.
	ChaosChild *durable.Workflow[ChaosInput]
	// Steady is start → work-0..3 → join, every step declared with no
	// options at all (no retries): the crash proof of the defaults.
	Steady *durable.Workflow[int]
	// Poison's one step, boom, ends its process (os.Exit) every time it
	// runs: a poison step. Only crash tests serve it (see cmd/durable's
	// --record-executions).
	Poison *durable.Workflow[int]
	// Func is crash-fn, a durable function that runs steps, a
	// transactional step, a sleep, steps in parallel, a child run of
	// FuncChild and waits for an event and a signal (see newFunctions).
	Func      *durable.Function[FuncInput, FuncOutput]
	FuncChild *durable.Function[FuncInput, string]
}

// ChaosInput is the chaos workflow's input.
type ChaosInput struct {
	N int `json:"n"`
}

// New defines the built-in workflows.
func New(o Options) *Set {
	if o.FraudWindow == 0 {
		o.FraudWindow = 2 * time.Second
	}
	if o.ChaosSleep == 0 {
		o.ChaosSleep = time.Second
	}
	if o.ChaosWork == 0 {
		o.ChaosWork = 200 * time.Millisecond
	}
	if o.FuncSleep == 0 {
		o.FuncSleep = 300 * time.Millisecond
	}
	s := &Set{Demo: demo.New(o.FraudWindow, nil)}

	// bench-noop: one step that does nothing.
	s.Noop = durable.NewWorkflow[int](Noop)
	durable.Step(s.Noop, "noop", func(durable.Context, int) (struct{}, error) { return struct{}{}, nil })

	// bench-dag: root -> 8 parallel no-op steps -> join: 10 tasks.
	s.DAG = durable.NewWorkflow[int](DAG)
	root := durable.Step(s.DAG, "root", func(durable.Context, int) (struct{}, error) { return struct{}{}, nil })
	var fan []durable.Parent
	for i := range 8 {
		fan = append(fan, durable.Step(s.DAG, fmt.Sprintf("fan-%d", i),
			func(durable.Context, int) (struct{}, error) { return struct{}{}, nil }, durable.After(root)))
	}
	durable.Step(s.DAG, "join", func(durable.Context, int) (struct{}, error) { return struct{}{}, nil }, durable.After(fan...))

	// bench-func: a function of FuncSteps no-op steps, one after another.
	s.BenchFunc = durable.NewFunction(BenchFunc, func(ctx durable.FuncContext, _ int) (int, error) {
		for i := range FuncSteps {
			if _, err := durable.Do(ctx, fmt.Sprintf("step-%d", i), func(durable.Context) (struct{}, error) { return struct{}{}, nil }); err != nil {
				return i, err
			}
		}
		return FuncSteps, nil
	})

	// bench-chain: a -> b, for latency: trigger -> a, a -> b.
	s.Chain = durable.NewWorkflow[int](Chain)
	a := durable.Step(s.Chain, "a", func(durable.Context, int) (struct{}, error) { return struct{}{}, nil })
	durable.Step(s.Chain, "b", func(durable.Context, int) (struct{}, error) { return struct{}{}, nil }, durable.After(a))

	// bench-keyed: one no-op step, at most one running per concurrency key;
	// the key is the input.
	s.Keyed = durable.NewWorkflow[int](Keyed)
	durable.Step(s.Keyed, "work", func(durable.Context, int) (struct{}, error) { return struct{}{}, nil },
		durable.WithConcurrency(func(in int) string { return strconv.Itoa(in) }, 1))

	// bench-map: list (as many items as the input) -> items (a no-op per
	// item) -> join.
	s.Map = durable.NewWorkflow[int](Map)
	list := durable.Step(s.Map, "list", func(_ durable.Context, n int) ([]int, error) { return make([]int, n), nil })
	items := durable.Map(s.Map, "items", list, func(durable.Context, int) (struct{}, error) { return struct{}{}, nil })
	durable.Step(s.Map, "join", func(ctx durable.Context, _ int) (int, error) {
		out, ok := items.Output(ctx)
		if !ok {
			return 0, durable.Terminal(errors.New("no items"))
		}
		return len(out), nil
	}, durable.After(items))

	// bench-wait: waits for the event WaitKey(input).
	s.Wait = durable.NewWorkflow[int](Wait)
	durable.WaitForEvent[int](s.Wait, "wait", func(_ durable.Context, n int) (string, error) { return WaitKey(n), nil })

	// bench-parent: ParentChildren bench-child runs at once, then a join.
	s.Child = durable.NewWorkflow[int](ChildWF)
	work := durable.Step(s.Child, "work", func(_ durable.Context, n int) (int, error) { return n, nil })
	s.Parent = durable.NewWorkflow[int](Parent)
	var kids []durable.Parent
	for i := range ParentChildren {
		kids = append(kids, durable.Child(s.Parent, fmt.Sprintf("child-%d", i), s.Child, work,
			func(_ durable.Context, n int) (int, error) { return n*ParentChildren + i, nil }))
	}
	durable.Step(s.Parent, "join", func(durable.Context, int) (struct{}, error) { return struct{}{}, nil }, durable.After(kids...))

	s.Chaos, s.ChaosChild = chaos(o)
	s.Steady = steady(o)
	s.Func, s.FuncChild = newFunctions(o)
	s.Poison = durable.NewWorkflow[int](Poison)
	durable.Step(s.Poison, "boom", func(ctx durable.Context, in int) (int, error) {
		if o.Record != nil {
			if err := o.Record(ctx); err != nil {
				return 0, err
			}
		}
		os.Exit(3) // what a step that kills its process does
		return in, nil
	})
	return s
}

// steady defines start → work-0..3 → join with no step options: the default
// policy, no retries. Each step records its execution (Options.Record) and
// works for a random time up to Options.ChaosWork, so that a killed worker
// is likely to die mid-step.
func steady(o Options) *durable.Workflow[int] {
	wf := durable.NewWorkflow[int](Steady)
	work := func(ctx durable.Context, in int) (int, error) {
		if o.Record != nil {
			if err := o.Record(ctx); err != nil {
				return 0, err
			}
		}
		if !sleep.For(ctx, time.Duration(rand.Int64N(int64(o.ChaosWork)+1))) {
			return 0, ctx.Err()
		}
		return in + 1, nil
	}
	start := durable.Step(wf, "start", work)
	parents := make([]durable.Parent, SteadyWork)
	for i := range parents {
		parents[i] = durable.Step(wf, fmt.Sprintf("work-%d", i), work, durable.After(start))
	}
	durable.Step(wf, "join", work, durable.After(parents...))
	return wf
}

// All returns every built-in workflow, for Engine.Register.
func (s *Set) All() []durable.Definition {
	return []durable.Definition{s.Demo.Workflow, s.Noop, s.DAG, s.BenchFunc, s.Chain, s.Keyed, s.Map, s.Wait, s.Parent, s.Child,
		s.Chaos, s.ChaosChild, s.Func, s.FuncChild}
}

// ErrFlaky is the error of the chaos workflow's flaky step on its first
// attempt.
var ErrFlaky = errors.New("flaky: first attempt always fails")

// Parity is the output of the chaos workflow's start step.
type Parity struct {
	Odd bool `json:"odd"`
}

// chaos defines a workflow exercising fan-out, fan-in, a branch, a durable
// sleep, a retrying step, an event wait, a child run and a map step:
//
//	start ─┬─ even (skipped for odd N) ──────────┐
//	       ├─ odd  (skipped for even N) ─────────┤
//	       ├─ flaky (fails attempt 1) ───────────┤
//	       ├─ work-0 .. work-3 ──────────────────┤
//	       ├─ nap (durable sleep) ───────────────┼─ join
//	       ├─ approve (event ChaosKey(N)) ───────┤
//	       ├─ sub (child run of chaos-child) ────┤
//	       └─ lines ── fan (ChaosItems items) ───┘
//
// chaos-child is a → b. Every step that runs code calls Options.Record
// first, then works for a random time up to Options.ChaosWork, so that a
// killed worker is likely to die mid-step; so does each item of fan. The
// tests send the events approve waits for (it looks back an hour, so that
// an event sent before it waits counts).
func chaos(o Options) (*durable.Workflow[ChaosInput], *durable.Workflow[ChaosInput]) {
	wf := durable.NewWorkflow[ChaosInput](Chaos)
	busy := func(ctx durable.Context) error {
		if o.Record != nil {
			if err := o.Record(ctx); err != nil {
				return err
			}
		}
		if !sleep.For(ctx, time.Duration(rand.Int64N(int64(o.ChaosWork)+1))) {
			return ctx.Err()
		}
		return nil
	}
	work := func(ctx durable.Context, in ChaosInput) (string, error) {
		if err := busy(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s/%d", ctx.StepName(), in.N), nil
	}
	// flaky's first attempt fails by design; the others retry too, so that
	// a step that fails for a reason of its own is retried. (Dead workers'
	// attempts are lost, not failed: they spend no retry.)
	retry := durable.WithRetry(durable.RetryPolicy{MaxRetries: 20, InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second})

	start := durable.Step(wf, "start", func(ctx durable.Context, in ChaosInput) (Parity, error) {
		if err := busy(ctx); err != nil {
			return Parity{}, err
		}
		return Parity{Odd: in.N%2 == 1}, nil
	}, retry)
	even := durable.Step(wf, "even", work, retry, durable.After(start), durable.SkipIf(start, func(p Parity) bool { return p.Odd }))
	odd := durable.Step(wf, "odd", work, retry, durable.After(start), durable.SkipIf(start, func(p Parity) bool { return !p.Odd }))
	flaky := durable.Step(wf, "flaky", func(ctx durable.Context, in ChaosInput) (string, error) {
		if err := busy(ctx); err != nil {
			return "", err
		}
		if ctx.Attempt() == 1 {
			return "", ErrFlaky
		}
		return fmt.Sprintf("flaky/%d", in.N), nil
	}, retry, durable.After(start))
	parents := []durable.Parent{even, odd, flaky}
	for i := range 4 {
		parents = append(parents, durable.Step(wf, fmt.Sprintf("work-%d", i), work, retry, durable.After(start)))
	}
	parents = append(parents, durable.Sleep(wf, "nap", o.ChaosSleep, durable.After(start)))

	approve := durable.WaitForEvent[string](wf, "approve", func(_ durable.Context, in ChaosInput) (string, error) {
		return ChaosKey(in.N), nil
	}, retry, durable.After(start), durable.WithLookback(time.Hour))

	child := durable.NewWorkflow[ChaosInput](ChaosChild)
	a := durable.Step(child, "a", work, retry)
	b := durable.Step(child, "b", func(ctx durable.Context, in ChaosInput) (string, error) {
		if err := busy(ctx); err != nil {
			return "", err
		}
		prev, _ := a.Output(ctx)
		return "child:" + prev, nil
	}, retry, durable.After(a))
	sub := durable.Child(wf, "sub", child, b, func(_ durable.Context, in ChaosInput) (ChaosInput, error) { return in, nil },
		retry, durable.After(start))

	lines := durable.Step(wf, "lines", func(ctx durable.Context, in ChaosInput) ([]int, error) {
		if err := busy(ctx); err != nil {
			return nil, err
		}
		out := make([]int, ChaosItems)
		for k := range out {
			out[k] = in.N*ChaosItems + k
		}
		return out, nil
	}, retry, durable.After(start))
	fan := durable.Map(wf, "fan", lines, func(ctx durable.Context, x int) (int, error) {
		if err := busy(ctx); err != nil {
			return 0, err
		}
		return 2 * x, nil
	}, retry)
	parents = append(parents, approve, sub, fan)

	durable.Step(wf, "join", func(ctx durable.Context, in ChaosInput) (string, error) {
		if err := busy(ctx); err != nil {
			return "", err
		}
		e, okEven := even.Output(ctx)
		od, okOdd := odd.Output(ctx)
		if okEven == okOdd {
			return "", durable.Terminal(fmt.Errorf("exactly one branch must run (even %v, odd %v)", okEven, okOdd))
		}
		ap, okAp := approve.Output(ctx)
		kid, okKid := sub.Output(ctx)
		items, okFan := fan.Output(ctx)
		if !okAp || !okKid || !okFan || len(items) != ChaosItems {
			return "", durable.Terminal(fmt.Errorf("missing outputs: approve %v, sub %v, fan %v (%d items)", okAp, okKid, okFan, len(items)))
		}
		for k, v := range items {
			if v != 2*(in.N*ChaosItems+k) {
				return "", durable.Terminal(fmt.Errorf("item %d is %d, want %d", k, v, 2*(in.N*ChaosItems+k)))
			}
		}
		return e + od + "/" + ap + "/" + kid, nil
	}, retry, durable.After(parents...))
	return wf, child
}
