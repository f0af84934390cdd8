// Package workloads defines the built-in workflows that `durable worker`
// serves: the demo, the benchmark workflows, and the chaos workflow the crash
// tests run while killing workers.
package workloads

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/demo"
)

// Workflow names.
const (
	Noop  = "bench-noop"
	DAG   = "bench-dag"
	Chain = "bench-chain"
	Keyed = "bench-keyed"
	Chaos = "chaos"
)

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
}

// Set is the built-in workflows.
type Set struct {
	Demo  *demo.Flow
	Noop  *durable.Workflow[int]
	DAG   *durable.Workflow[int]
	Chain *durable.Workflow[int]
	Keyed *durable.Workflow[int]
	Chaos *durable.Workflow[ChaosInput]
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

	// bench-chain: a -> b, for latency: trigger -> a, a -> b.
	s.Chain = durable.NewWorkflow[int](Chain)
	a := durable.Step(s.Chain, "a", func(durable.Context, int) (struct{}, error) { return struct{}{}, nil })
	durable.Step(s.Chain, "b", func(durable.Context, int) (struct{}, error) { return struct{}{}, nil }, durable.After(a))

	// bench-keyed: one no-op step, at most one running per concurrency key;
	// the key is the input.
	s.Keyed = durable.NewWorkflow[int](Keyed)
	durable.Step(s.Keyed, "work", func(durable.Context, int) (struct{}, error) { return struct{}{}, nil },
		durable.WithConcurrency(func(in int) string { return strconv.Itoa(in) }, 1))

	s.Chaos = chaos(o)
	return s
}

// All returns every built-in workflow, for Engine.Register.
func (s *Set) All() []durable.Definition {
	return []durable.Definition{s.Demo.Workflow, s.Noop, s.DAG, s.Chain, s.Keyed, s.Chaos}
}

// ErrFlaky is the error of the chaos workflow's flaky step on its first
// attempt.
var ErrFlaky = errors.New("flaky: first attempt always fails")

// Parity is the output of the chaos workflow's start step.
type Parity struct {
	Odd bool `json:"odd"`
}

// chaos defines a workflow exercising fan-out, fan-in, a branch, a durable
// sleep and a retrying step:
//
//	start ─┬─ even (skipped for odd N) ──┐
//	       ├─ odd  (skipped for even N) ─┤
//	       ├─ flaky (fails attempt 1) ───┤
//	       ├─ work-0 .. work-3 ──────────┼─ join
//	       └─ nap (durable sleep) ───────┘
//
// Every step but the sleep calls Options.Record first, then works for a
// random time up to Options.ChaosWork, so that a killed worker is likely to
// die mid-step.
func chaos(o Options) *durable.Workflow[ChaosInput] {
	wf := durable.NewWorkflow[ChaosInput](Chaos)
	busy := func(ctx durable.Context) error {
		if o.Record != nil {
			if err := o.Record(ctx); err != nil {
				return err
			}
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(o.ChaosWork) + 1)))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	work := func(ctx durable.Context, in ChaosInput) (string, error) {
		if err := busy(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s/%d", ctx.StepName(), in.N), nil
	}
	// Dead workers' attempts count against retries, so the crash tests give
	// every step room for several.
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
	durable.Step(wf, "join", func(ctx durable.Context, in ChaosInput) (string, error) {
		if err := busy(ctx); err != nil {
			return "", err
		}
		e, okEven := even.Output(ctx)
		od, okOdd := odd.Output(ctx)
		if okEven == okOdd {
			return "", durable.Terminal(fmt.Errorf("exactly one branch must run (even %v, odd %v)", okEven, okOdd))
		}
		return e + od, nil
	}, retry, durable.After(parents...))
	return wf
}
