package durable

import (
	"errors"
	"fmt"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// Durable functions (docs/workflows.md, "Durable functions").
//
// A Function is a workflow written as plain Go code: a function of a typed
// input returning a typed output, whose calls to Do, SleepFor, AwaitEvent,
// AwaitSignal, StartChild and the others are checkpointed as it makes
// them. It is a run like any DAG workflow's (triggers, tenants, lists,
// replay, the API, the dashboard, the test kit), on the same engine and
// store.
//
// When the function waits (a sleep, an event, a signal, a child run, a
// retry's backoff), it holds no goroutine, no worker slot and no claim:
// its run's rows say what it waits for. When the wait is over, the
// function runs again from the start, and every call it made already
// returns its recorded result without running again.
//
// The determinism contract: given its input and the results its calls
// recorded, a function must make the same calls, with the same names, in
// the same order. Do the rest (reading the clock, random numbers, I/O)
// inside steps (Do), whose results are recorded. A function resumed by
// code that makes another call than its history recorded at that point
// fails with a *NondeterminismError naming both; a deploy that changes a
// function either changes its version (FuncVersion) or branches on a
// recorded marker (Patched).

// FuncBody is the name of the one step of a function's shape: its body,
// whose records are the function's calls.
const FuncBody = "main"

// Function is a durable function with input I and output O: a workflow
// whose one step is its body. It is a *Workflow[I], so everything that
// starts, schedules or waits for a workflow's runs works for it (Run,
// Start, RunNoWait, Schedule, DeclareSchedule, WithConcurrency); Output
// reads its result.
type Function[I, O any] struct {
	*Workflow[I]
	body *stepDef
}

// FuncContext is the context a function's body runs with: a Context (its
// run, its tenant, its heartbeat) that the calls of a durable function
// take. Pass it to Do, SleepFor, AwaitEvent and the others; a step's own
// code (Do's fn) receives a plain Context.
type FuncContext interface {
	Context
	funcRun() *funcRun
}

// FunctionOption configures a Function. See FuncVersion and MaxParallel.
type FunctionOption interface {
	applyFunction(f *funcDef)
}

type funcOptionFunc func(f *funcDef)

func (o funcOptionFunc) applyFunction(f *funcDef) { o(f) }

// funcDef is what a function's options set.
type funcDef struct {
	version     string
	maxParallel int
	lostLimit   int
	errs        []error
}

// DefaultMaxParallel is how many steps started with Go a function runs at
// once, unless MaxParallel says otherwise.
const DefaultMaxParallel = 8

// FuncVersion sets the function's version: runs started with it are
// served only by engines that registered the function at version v (see
// docs/semantics.md, "Versions and deploys"). A function's code cannot be
// fingerprinted: change v when a deploy changes the calls it makes in a
// way its runs in flight cannot replay (or keep v and branch with
// Patched). Without it, a function's version is a fingerprint of its name
// and the JSON shapes of its input and output types only (see
// Workflow.Version), so every engine that registered it with types of
// those shapes serves every run of it. v is 1-64 letters, digits or _-.+
// starting with a letter or a digit.
func FuncVersion(v string) FunctionOption {
	return funcOptionFunc(func(f *funcDef) {
		if !dag.ValidVersion(v) {
			f.errs = append(f.errs, fmt.Errorf("%w: %s: use 1-64 letters, digits or _-.+ starting with a letter or digit", ErrInvalidVersion, dag.Quote(v)))
			return
		}
		f.version = v
	})
}

// MaxParallel bounds the steps started with Go that one run of the
// function runs at once (DefaultMaxParallel without it); a Go call beyond
// it waits for one of them to finish. n must be at least 1.
func MaxParallel(n int) FunctionOption {
	return funcOptionFunc(func(f *funcDef) {
		if n < 1 {
			f.errs = append(f.errs, fmt.Errorf("%w: MaxParallel(%d): at least 1", ErrInvalidOption, n))
			return
		}
		f.maxParallel = n
	})
}

// FuncLostLimit is WithLostLimit for the function's body: how many of its
// executions in a row may lose their worker before the run fails with
// ErrPoisonStep.
func FuncLostLimit(n int) FunctionOption {
	return funcOptionFunc(func(f *funcDef) {
		if n < 1 {
			f.errs = append(f.errs, fmt.Errorf("%w: FuncLostLimit(%d): the limit must be at least 1", ErrInvalidOption, n))
			return
		}
		f.lostLimit = n
	})
}

// NewFunction declares a durable function named name that runs fn: a
// workflow with input I and output O written as plain Go code. Register it
// with Engine.Register like any workflow. fn's error fails the run, without
// retry (a step's retries are its own: WithRetry on Do); a panic in fn
// fails it too.
func NewFunction[I, O any](name string, fn func(ctx FuncContext, in I) (O, error), opts ...FunctionOption) *Function[I, O] {
	w := NewWorkflow[I](name)
	fd := &funcDef{maxParallel: DefaultMaxParallel}
	for _, o := range opts {
		if o != nil {
			o.applyFunction(fd)
		}
	}
	d := w.def
	s := d.add(FuncBody, nil, false)
	s.kind = durabletype.KindFunc
	s.funcDef = fd
	s.lostLimit = fd.lostLimit
	for _, err := range fd.errs {
		s.errs = append(s.errs, &DefinitionError{Workflow: name, Err: err})
	}
	if fn == nil {
		s.fail(ErrNilFunc, "function")
	} else {
		s.funcRun = func(ctx FuncContext, in any) (any, error) { return fn(ctx, in.(I)) }
	}
	setDecode[O](s)
	if fd.version != "" {
		d.version = fd.version
	}
	return &Function[I, O]{Workflow: w, body: s}
}

// Output decodes the function's output from a finished run's result. It
// returns an error matching ErrNoOutput when the function did not return
// (its run failed, was cancelled, or still runs).
func (f *Function[I, O]) Output(res *RunResult) (O, error) {
	var out O
	if f == nil || f.body == nil || res == nil {
		return out, fmt.Errorf("%w: no function or no result", ErrNoOutput)
	}
	return (&StepRef[O]{def: f.body}).Result(res)
}

// Result refers to the function's output as a step's: a DAG workflow
// starts the function as a child run with durable.Child(w, name, fn.Workflow,
// fn.Result(), ...).
func (f *Function[I, O]) Result() *StepRef[O] { return &StepRef[O]{def: f.body} }

// WithConcurrency caps the function's runs that share a key: at most max
// of their bodies run at once, across every engine (a body that waits
// holds no slot). It returns f. See Workflow.WithConcurrency.
func (f *Function[I, O]) WithConcurrency(key func(in I) string, max int) *Function[I, O] {
	f.Workflow.WithConcurrency(key, max)
	return f
}

// NondeterminismError is the error of a function that, run again, made
// another call than its history recorded at that point: its code changed
// under a run in flight (give it a new FuncVersion, or branch with
// Patched), or it decided on something no step recorded (the clock, a
// random number, a map's order). The run fails with it; it names both
// calls.
type NondeterminismError struct {
	// Seq is the place of the call among the function's calls, from 0.
	Seq int
	// Recorded is the call the history holds there, Called the one the
	// code made, each as "kind name" (for example "step charge").
	Recorded, Called string
}

// Error names the recorded and the called call.
func (e *NondeterminismError) Error() string {
	return fmt.Sprintf("durable: nondeterministic function: call %d is %s in the run's history, but the code now calls %s "+
		"(give the function a new FuncVersion, or branch on Patched)", e.Seq, e.Recorded, e.Called)
}

// Is makes errors.Is(err, ErrNondeterministic) true.
func (e *NondeterminismError) Is(target error) bool { return target == ErrNondeterministic }

// ErrNondeterministic matches every *NondeterminismError.
var ErrNondeterministic = errors.New("durable: nondeterministic function")

// StepError is the error a call of a function returns when the step (or
// the child run, or the wait) it made failed for good: its retries spent,
// a terminal error, a child run that failed, a wait that timed out. Its
// record keeps it: the function, run again, gets the same error from the
// same call.
type StepError struct {
	// Call is the call's name, Seq its place among the function's calls.
	Call string
	Seq  int
	// Err is the recorded error.
	Err string
}

// Error names the call and its error.
func (e *StepError) Error() string { return fmt.Sprintf("durable: call %q failed: %s", e.Call, e.Err) }

// Is makes errors.Is(err, ErrWaitTimeout) true for a wait that timed out.
func (e *StepError) Is(target error) bool {
	return target == ErrWaitTimeout && len(e.Err) >= len(dag.WaitTimeoutText) && e.Err[:len(dag.WaitTimeoutText)] == dag.WaitTimeoutText
}

// ErrWaitTimeout matches the error of AwaitEvent and AwaitSignal when no
// event or signal came within their WithWaitTimeout.
var ErrWaitTimeout = errors.New("durable: wait timed out")

// callDef is what the options of one call of a function set: StepOptions
// that apply to a call (WithRetry, WithTimeout for Do and Go;
// WithWaitTimeout, WithLookback for AwaitEvent and AwaitSignal).
type callDef struct {
	retry    durabletype.RetryPolicy
	timeout  time.Duration
	wait     waitDef
	hasRetry bool
}

// callOptions reads the options of a call named name of kind kind; an
// option that does not apply to it is an error (ErrInvalidOption).
func callOptions(name string, kind durabletype.TaskKind, opts []StepOption) (callDef, error) {
	s := &stepDef{wf: &workflowDef{}, name: name}
	for _, o := range opts {
		if o != nil {
			o.apply(s, false)
		}
	}
	cd := callDef{retry: s.retry.record(), timeout: s.timeout, wait: s.wait}
	var bad []string
	if len(s.errs) > 0 {
		return cd, errors.Join(s.errs...)
	}
	if len(s.parents) > 0 || len(s.skips) > 0 {
		bad = append(bad, "After and SkipIf")
	}
	if s.conc != nil || s.rate != nil {
		bad = append(bad, "WithConcurrency and WithRateLimit (put such a step in a workflow and start it with StartWorkflow)")
	}
	if s.queueTimeout != 0 || s.lostLimit != 0 {
		bad = append(bad, "WithQueueTimeout and WithLostLimit")
	}
	if kind != durabletype.KindStep && (s.timeout != 0 || s.retry != (RetryPolicy{})) {
		bad = append(bad, "WithRetry and WithTimeout (they apply to Do and Go)")
	}
	if kind != durabletype.KindEvent && s.wait.set() {
		bad = append(bad, "WithWaitTimeout, SkipOnTimeout and WithLookback (they apply to AwaitEvent and AwaitSignal)")
	}
	if s.wait.skip {
		bad = append(bad, "SkipOnTimeout (a function's wait that times out returns ErrWaitTimeout)")
	}
	if len(bad) > 0 {
		return cd, fmt.Errorf("%w: call %q of a function: %v do not apply", ErrInvalidOption, name, bad)
	}
	cd.hasRetry = s.retry != (RetryPolicy{})
	return cd, nil
}

// funcKindName is how a NondeterminismError names a call's kind.
func funcKindName(kind durabletype.TaskKind, patch bool) string {
	switch {
	case patch:
		return "patch"
	case kind == durabletype.KindEvent:
		return "wait"
	}
	return string(kind)
}
