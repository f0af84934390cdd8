package durable

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// Workflow is a DAG of steps with a typed input I. Declare it once, at
// program start: NewWorkflow, then Step and Sleep for each step (a step's
// parents must be declared before it), then optionally OnFailure. Mistakes
// are reported by Engine.Register as *DefinitionError values.
//
// A Workflow is immutable once it has been registered or run, and safe for
// concurrent use from then on.
type Workflow[I any] struct {
	def *workflowDef
}

// NewWorkflow starts the definition of a workflow. The name identifies the
// workflow in the store: runs started under it are executed by the engines
// that registered a workflow of that name.
func NewWorkflow[I any](name string) *Workflow[I] {
	def := &workflowDef{name: name, byName: map[string]*stepDef{}, inType: reflect.TypeFor[I]()}
	def.decodeInput = func(c Codec, b []byte) (any, error) {
		var in I
		if err := c.Unmarshal(b, &in); err != nil {
			return nil, err
		}
		return in, nil
	}
	return &Workflow[I]{def: def}
}

// Name returns the workflow's name.
func (w *Workflow[I]) Name() string {
	if d := w.definition(); d != nil {
		return d.name
	}
	return ""
}

func (w *Workflow[I]) definition() *workflowDef {
	if w == nil {
		return nil
	}
	return w.def
}

// defn returns the definition steps are added to: for a nil or zero
// Workflow, a detached one that nothing can register, so that declaring
// steps on it does not panic (Register reports the nil workflow).
func (w *Workflow[I]) defn() *workflowDef {
	if w == nil || w.def == nil {
		return &workflowDef{byName: map[string]*stepDef{}}
	}
	return w.def
}

// Definition is a workflow definition that an Engine can register: any
// *Workflow[I].
type Definition interface {
	definition() *workflowDef
}

// StepRef refers to a declared step whose output has type O. Pass it to After
// to make the step a parent of another, to SkipIf to skip on its output, and
// read its output with Output inside a child step or with Result from a
// finished run.
type StepRef[O any] struct {
	def *stepDef
}

// Name returns the step's name.
func (r *StepRef[O]) Name() string { return r.def.name }

func (r *StepRef[O]) stepDef() *stepDef { return r.def }

// Output returns the output of this step as seen by a running child step
// (ctx is the child's Context): ok is false if this step was skipped.
//
// Reading the output of a step that is not a declared parent of the running
// step is a mistake Output does not let pass: it returns (zero, false),
// cancels the running step's context and fails the step, without retries,
// with an error matching ErrNotParent that names the fix (add the step to
// the reader's After). Outside a step (a context without a running step)
// it returns (zero, false).
func (r *StepRef[O]) Output(ctx interface{ Value(any) any }) (O, bool) {
	var zero O
	if r == nil || r.def == nil || ctx == nil {
		return zero, false
	}
	sc, _ := ctx.Value(stepContextKey{}).(*stepContext)
	if sc == nil {
		return zero, false
	}
	v, ok := sc.parents[r.def]
	if !ok {
		if sc.item || !sc.isParent(r.def) {
			sc.misusedBy(notParentError(sc, r.def))
		}
		return zero, false
	}
	o, ok := v.(O)
	return o, ok
}

func notParentError(sc *stepContext, p *stepDef) error {
	reader := sc.claim.Step
	if sc.item {
		return fmt.Errorf("%w: an item of map step %q reads the output of step %q; a map step's function receives "+
			"only its item: put what it needs in the list's items", ErrNotParent, sc.step.name, p.name)
	}
	if sc.step == nil {
		return fmt.Errorf("%w: the on-failure handler reads the output of step %q; a handler has no parents: "+
			"read what it needs from the run (Engine.Get) instead", ErrNotParent, p.name)
	}
	if p.wf != sc.step.wf {
		return fmt.Errorf("%w: step %q reads the output of step %q of workflow %q", ErrNotParent, reader, p.name, p.wf.name)
	}
	return fmt.Errorf("%w: step %q reads the output of step %q, which is not one of its parents: "+
		"add durable.After(%s) to step %q", ErrNotParent, reader, p.name, p.name, reader)
}

// Result decodes this step's output from a run's result. It returns an error
// matching ErrNoOutput when the step did not complete (it was skipped,
// failed, cancelled, or has not run yet).
func (r *StepRef[O]) Result(res *RunResult) (O, error) {
	var out O
	s, ok := res.Step(r.def.name)
	if !ok || s.State != durabletype.TaskCompleted {
		state := "absent"
		if ok {
			state = string(s.State)
		}
		return out, fmt.Errorf("%w: step %q is %s", ErrNoOutput, r.def.name, state)
	}
	if r.def.sleep > 0 {
		return out, nil
	}
	if r.def.kind == durabletype.KindMap {
		v, err := r.def.decodeItems(res.codec, s.itemOutputs())
		if err != nil {
			return out, fmt.Errorf("%w: output of step %q: %w", ErrDecode, r.def.name, err)
		}
		return v.(O), nil
	}
	if err := res.codec.Unmarshal(s.Output, &out); err != nil {
		return out, fmt.Errorf("%w: output of step %q: %w", ErrDecode, r.def.name, err)
	}
	return out, nil
}

// Parent is a step that other steps can depend on: any *StepRef[O].
type Parent interface {
	stepDef() *stepDef
}

// StepOption configures a step. See After, SkipIf and WithRetry.
type StepOption interface {
	apply(s *stepDef, onFailure bool)
}

type optionFunc func(s *stepDef, onFailure bool)

func (f optionFunc) apply(s *stepDef, onFailure bool) { f(s, onFailure) }

// After makes the given steps parents of the step being declared: it becomes
// ready when each parent has completed or been skipped. If every parent was
// skipped, the step is skipped too.
func After(parents ...Parent) StepOption {
	return optionFunc(func(s *stepDef, onFailure bool) {
		if onFailure {
			s.fail(ErrInvalidOption, "After does not apply to an on-failure handler")
			return
		}
		for _, p := range parents {
			if p == nil || reflect.ValueOf(p).IsNil() {
				s.fail(ErrForeignParent, "nil parent")
				continue
			}
			s.parents = append(s.parents, p.stepDef())
		}
	})
}

// SkipIf skips the step being declared when pred returns true for the
// output of parent, which must also be one of its parents (After). Several
// conditions on one step are ORed: any one that fires skips the step. A
// condition on a parent that was itself skipped does not fire. Conditions
// run on the worker before the step, with the parent's decoded output; a
// panicking condition fails the step without retry.
func SkipIf[O any](parent *StepRef[O], pred func(O) bool) StepOption {
	return optionFunc(func(s *stepDef, onFailure bool) {
		switch {
		case onFailure:
			s.fail(ErrInvalidOption, "SkipIf does not apply to an on-failure handler")
		case parent == nil:
			s.fail(ErrSkipNotParent, "nil parent")
		case pred == nil:
			s.fail(ErrNilFunc, "skip condition")
		default:
			s.skips = append(s.skips, skipCond{parent: parent.def, pred: func(v any) bool { return pred(v.(O)) }})
		}
	})
}

// WithRetry sets the step's retry policy. Without it a step is not retried.
func WithRetry(p RetryPolicy) StepOption {
	return optionFunc(func(s *stepDef, _ bool) {
		s.retry = p
	})
}

// WithLostLimit sets how many attempts of the step in a row may lose their
// worker before the step fails: n, instead of DefaultLostLimit (3).
//
// An attempt is lost when its worker stops heartbeating for
// Config.DeadAfter: the process was killed (SIGKILL, out of memory, a
// deploy's grace period ran out), froze, or lost the database. A lost
// attempt is the fleet's failure, not the step's: the step runs again on
// another worker without spending a retry, whatever its RetryPolicy (the
// run's events show a LOST event for it). A step that keeps killing the
// process that runs it (a poison step: it runs out of memory, calls
// os.Exit, crashes in cgo) would take worker after worker down; after n
// lost attempts in a row it fails, without retry, with an error matching
// ErrPoisonStep. An attempt that ends any other way (it returns, fails,
// times out) resets the count. n must be at least 1.
func WithLostLimit(n int) StepOption {
	return optionFunc(func(s *stepDef, _ bool) {
		if n < 1 {
			s.fail(ErrInvalidOption, fmt.Sprintf("WithLostLimit(%d): the limit must be at least 1", n))
			return
		}
		s.lostLimit = n
	})
}

// WithTimeout bounds each attempt of the step to d, counted from its
// claim. When d passes, the step's context is cancelled with a cause
// matching ErrStepTimeout, and the attempt fails (and is retried per the
// step's policy) whatever the step does next: an outcome it reports later
// is not recorded, even when it ignores its context and returns a result.
// The store enforces it, so it holds if the worker hangs or dies too.
// (A step that ignores its context keeps its worker's slot until it
// returns.) d must be positive; it does not apply to sleeps or to an
// on-failure handler.
func WithTimeout(d time.Duration) StepOption {
	return optionFunc(func(s *stepDef, onFailure bool) {
		switch {
		case onFailure:
			s.fail(ErrInvalidOption, "WithTimeout does not apply to an on-failure handler")
		case d <= 0:
			s.fail(ErrInvalidOption, fmt.Sprintf("WithTimeout(%s): the timeout must be positive", d))
		default:
			s.timeout = d
		}
	})
}

// WithQueueTimeout fails the step, without retry, when it waits longer
// than d for a worker: from the moment it becomes ready (its parents
// resolved, or a retry's backoff over) to its claim. It is a permanent
// failure of the step, so the run fails (and its on-failure handler
// runs). d must be positive; it does not apply to sleeps or to an
// on-failure handler.
func WithQueueTimeout(d time.Duration) StepOption {
	return optionFunc(func(s *stepDef, onFailure bool) {
		switch {
		case onFailure:
			s.fail(ErrInvalidOption, "WithQueueTimeout does not apply to an on-failure handler")
		case d <= 0:
			s.fail(ErrInvalidOption, fmt.Sprintf("WithQueueTimeout(%s): the timeout must be positive", d))
		default:
			s.queueTimeout = d
		}
	})
}

// Step declares a step of w named name that runs fn, and returns a
// reference to its output. fn receives the run's input; it reads its
// parents' outputs through their references (ref.Output(ctx)).
//
// fn must be safe to run more than once for the same run: a step runs at
// least once, and again when its worker dies before recording the result.
// Its output is recorded exactly once.
func Step[I, O any](w *Workflow[I], name string, fn func(ctx Context, in I) (O, error), opts ...StepOption) *StepRef[O] {
	s := w.defn().add(name, opts, false)
	if fn == nil {
		s.fail(ErrNilFunc, "step function")
	} else {
		s.run = func(ctx Context, in any) (any, error) { return fn(ctx, in.(I)) }
	}
	setDecode[O](s)
	return &StepRef[O]{def: s}
}

// Sleep declares a durable sleep step: once its parents are resolved it
// waits for d, holding no worker and surviving restarts, then completes. d
// must be positive.
func Sleep[I any](w *Workflow[I], name string, d time.Duration, opts ...StepOption) *StepRef[struct{}] {
	s := w.defn().add(name, opts, false)
	s.sleep = d
	if d == 0 { // a negative one is the shape's to refuse (dag.Compile)
		s.fail(ErrInvalidSleep, d.String())
	}
	if s.timeout != 0 || s.queueTimeout != 0 {
		s.fail(ErrInvalidOption, "WithTimeout and WithQueueTimeout do not apply to a sleep")
	}
	s.out = reflect.TypeFor[struct{}]()
	s.decodeOutput = func(Codec, []byte) (any, error) { return struct{}{}, nil }
	return &StepRef[struct{}]{def: s}
}

// Failure describes why a run failed, for an on-failure handler.
type Failure struct {
	// Step is the step that failed the run.
	Step string
	// Error is that step's error message.
	Error string
}

// OnFailure sets the handler that runs once after the run has failed, with
// the run's input and the failure. Like a step it runs at least once and its
// result is recorded once; WithRetry and WithLostLimit are the options that
// apply (by default it is not retried).
func (w *Workflow[I]) OnFailure(fn func(ctx Context, in I, f Failure) error, opts ...StepOption) {
	d := w.defn()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.frozen {
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrWorkflowFrozen, Detail: "OnFailure"})
		return
	}
	h := &stepDef{wf: d, name: durabletype.OnFailureTask}
	for _, o := range opts {
		if o != nil {
			o.apply(h, true)
		}
	}
	if fn == nil {
		h.fail(ErrNilFunc, "on-failure handler")
	} else {
		h.onFailure = func(ctx Context, in any, f Failure) error { return fn(ctx, in.(I), f) }
	}
	if d.onFailure != nil {
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrInvalidOption, Detail: "OnFailure set twice"})
	}
	d.onFailure = h
}

// RetryPolicy says how often and how soon a failed step is retried. The
// delay before retry n (n = 1, 2, ...) is InitialDelay·Factor^(n-1), capped
// at MaxDelay, minus a random part of up to Jitter of it. Backoffs are
// durable: a retry waiting for its delay survives restarts.
type RetryPolicy struct {
	// MaxRetries is how many times a failed step is retried after its first
	// attempt. Defaults to 0.
	MaxRetries int
	// InitialDelay is the wait before the first retry. Defaults to 1s.
	InitialDelay time.Duration
	// Factor multiplies the delay for each further retry; at least 1.
	// Defaults to 2.
	Factor float64
	// MaxDelay caps the delay. Defaults to 60 × InitialDelay, and at least
	// 1m: 1m with the default InitialDelay, 5h with an InitialDelay of 5m,
	// so that Factor grows the delays whatever InitialDelay is.
	MaxDelay time.Duration
	// Jitter is the fraction of each delay that is randomised, in [0, 1];
	// it spreads retries of many runs failing together. Defaults to 0.
	Jitter float64
}

// defaultMaxDelayFactor is how many times InitialDelay the default
// MaxDelay is (at least a minute).
const defaultMaxDelayFactor = 60

// record returns the policy as the shape records it, with defaults filled
// in; dag.Compile validates it.
func (p RetryPolicy) record() durabletype.RetryPolicy {
	r := durabletype.RetryPolicy{
		MaxAttempts: p.MaxRetries + 1, InitialDelay: p.InitialDelay, Factor: p.Factor,
		MaxDelay: p.MaxDelay, Jitter: p.Jitter,
	}
	if r.InitialDelay == 0 {
		r.InitialDelay = time.Second
	}
	if r.Factor == 0 {
		r.Factor = 2
	}
	if r.MaxDelay == 0 {
		// Not max(1m, InitialDelay): with an InitialDelay of a minute or
		// more, that capped every delay at InitialDelay and Factor did
		// nothing.
		r.MaxDelay = max(time.Minute, defaultMaxDelayFactor*r.InitialDelay)
	}
	return r
}

// workflowDef is the untyped definition behind a Workflow[I].
type workflowDef struct {
	name        string
	steps       []*stepDef
	byName      map[string]*stepDef
	onFailure   *stepDef
	decodeInput func(Codec, []byte) (any, error)
	inType      reflect.Type
	conc        *keyFunc // WithConcurrency on the workflow
	// version is the version set by WithVersion ("": the fingerprint);
	// accepts the versions set by Accepts.
	version string
	accepts []string
	// schedules are the schedules the workflow declares (DeclareSchedule,
	// schedule_declare.go), under mu until frozen.
	schedules []*declaredSchedule

	mu     sync.Mutex
	frozen bool
	errs   []error
	shape  *durabletype.Shape
	err    error
	// unchecked is shape without payload descriptions, for engines whose
	// codec is not JSON (shapeOf); made once, when first asked.
	unchecked *durabletype.Shape
}

type stepDef struct {
	wf   *workflowDef
	name string
	// kind is what the step does: KindStep (or "") runs code, KindEvent
	// waits (wait), KindChild starts a child (child), KindMap maps
	// (mapDef). A sleep is a KindStep with sleep set.
	kind         durabletype.TaskKind
	wait         waitDef
	child        *childDef
	mapDef       *mapDef
	decodeItems  func(Codec, [][]byte) (any, error) // map steps
	parents      []*stepDef
	skips        []skipCond
	retry        RetryPolicy
	lostLimit    int
	sleep        time.Duration
	timeout      time.Duration
	queueTimeout time.Duration
	run          func(ctx Context, in any) (any, error)
	txRun        func(ctx Context, tx, in any) (any, error) // TxStep
	onFailure    func(ctx Context, in any, f Failure) error
	decodeOutput func(Codec, []byte) (any, error)
	out          reflect.Type // the output's type
	errs         []error
	conc, rate   *keyFunc // WithConcurrency, WithRateLimit
	// funcRun and funcDef: the body of a durable function (KindFunc).
	funcRun func(ctx FuncContext, in any) (any, error)
	funcDef *funcDef
}

type skipCond struct {
	parent *stepDef
	pred   func(any) bool
}

func (s *stepDef) fail(err error, detail string) {
	s.errs = append(s.errs, &DefinitionError{Workflow: s.wf.name, Step: s.name, Err: err, Detail: detail})
}

func (d *workflowDef) add(name string, opts []StepOption, onFailure bool) *stepDef {
	s := &stepDef{wf: d, name: name}
	for _, o := range opts {
		if o != nil {
			o.apply(s, onFailure)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.frozen {
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Step: name, Err: ErrWorkflowFrozen})
		return s
	}
	d.steps = append(d.steps, s)
	return s
}

// freeze validates the definition once and records its shape; later calls
// return the same result.
func (d *workflowDef) freeze() (*durabletype.Shape, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.frozen {
		d.frozen = true
		d.shape, d.err = d.build()
	}
	if len(d.errs) > 0 {
		return nil, errors.Join(append(slices.Clone(d.errs), d.err)...)
	}
	return d.shape, d.err
}

// shapeOf returns the shape e records for runs of d (d.freeze): without
// descriptions of the payloads its waiting steps await when e's codec is
// not encoding/json, whose rules the descriptions follow (nothing is
// checked then).
func (e *Engine) shapeOf(d *workflowDef) (*durabletype.Shape, error) {
	shape, err := d.freeze()
	if err != nil || jsonCodec(e.cfg.Codec) {
		return shape, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unchecked == nil {
		u := *shape
		u.Steps = slices.Clone(shape.Steps)
		for k := range u.Steps {
			if w := u.Steps[k].Wait; w != nil && w.Payload != nil {
				wc := *w
				wc.Payload = nil
				u.Steps[k].Wait = &wc
			}
		}
		d.unchecked = &u
	}
	return d.unchecked, nil
}

// jsonCodec reports whether c is the JSON codec.
func jsonCodec(c Codec) bool {
	switch c.(type) {
	case JSONCodec, *JSONCodec:
		return true
	}
	return false
}

// build records the definition's shape. What only the Go definition can
// get wrong (a parent that belongs to another workflow or is declared after
// its child, a skip condition on a step that is not a parent, options that
// do not apply) is checked here; everything the shape says (names,
// duplicates, parents, sleeps, retry policies) is checked by dag.Compile,
// the check every store applies to the shapes it records.
func (d *workflowDef) build() (*durabletype.Shape, error) {
	var errs []error
	if !dag.ValidName(d.name) {
		errs = append(errs, &DefinitionError{Workflow: d.name, Err: ErrInvalidName,
			Detail: "use 1-128 letters, digits or _-.:/ starting with a letter or digit"})
	}
	shape := &durabletype.Shape{Version: d.versionLocked(), Input: typeName(d.inType)}
	if slices.Contains(d.accepts, shape.Version) {
		errs = append(errs, &DefinitionError{Workflow: d.name, Err: ErrInvalidOption,
			Detail: "Accepts(" + dag.Quote(shape.Version) + "): that is this definition's own version"})
	}
	declared := map[*stepDef]bool{}
	for _, s := range d.steps {
		errs = append(errs, s.errs...)
		stepErr := func(err error, detail string) {
			errs = append(errs, &DefinitionError{Workflow: d.name, Step: s.name, Err: err, Detail: detail})
		}
		if d.byName[s.name] == nil {
			d.byName[s.name] = s
		}
		spec := durabletype.StepSpec{Name: s.name, Output: typeName(s.out), Sleep: s.sleep, Retry: s.retry.record(),
			LostLimit: s.lostLimit, Timeout: s.timeout, QueueTimeout: s.queueTimeout}
		s.checkKind(&spec, stepErr)
		for _, p := range s.parents {
			switch {
			case p.wf != d:
				stepErr(ErrForeignParent, fmt.Sprintf("%s is a step of workflow %s", dag.Quote(p.name), dag.Quote(p.wf.name)))
			case !declared[p]:
				stepErr(ErrForeignParent, fmt.Sprintf("%s is not declared before this step", dag.Quote(p.name)))
			default:
				spec.Parents = append(spec.Parents, p.name)
			}
		}
		for _, c := range s.skips {
			if !slices.Contains(s.parents, c.parent) {
				stepErr(ErrSkipNotParent, fmt.Sprintf("%s is not a parent; add it with After", dag.Quote(c.parent.name)))
			}
		}
		if s.sleep > 0 && len(s.skips) > 0 {
			stepErr(ErrInvalidOption, "a sleep step cannot have skip conditions")
		}
		d.checkFlow(s, &spec, stepErr)
		shape.Steps = append(shape.Steps, spec)
		declared[s] = true
	}
	if h := d.onFailure; h != nil {
		errs = append(errs, h.errs...)
		shape.OnFailure = &durabletype.OnFailureSpec{Retry: h.retry.record(), LostLimit: h.lostLimit}
	}
	if _, err := dag.Compile(shape); err != nil {
		errs = append(errs, d.definitionErrors(err)...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return shape, nil
}

// definitionErrors turns dag.Compile's errors into *DefinitionError values.
func (d *workflowDef) definitionErrors(err error) []error {
	var out []error
	var walk func(err error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var se *dag.ShapeError
		if errors.As(err, &se) {
			de := &DefinitionError{Workflow: d.name, Step: se.Step, Err: se.Err, Detail: se.Detail}
			if errors.Is(se.Err, dag.ErrSkipWithoutTimeout) { // the core's check, named by the options that fail it
				de.Err, de.Detail = ErrInvalidOption, "SkipOnTimeout needs WithWaitTimeout"
			}
			out = append(out, de)
			return
		}
		out = append(out, err)
	}
	walk(err)
	return out
}

// checkKind records what a waiting, child or map step does in spec, and
// reports the options that do not apply to its kind (build calls it).
func (s *stepDef) checkKind(spec *durabletype.StepSpec, stepErr func(error, string)) {
	if s.wait.set() && s.kind != durabletype.KindEvent {
		stepErr(ErrInvalidOption, "WithWaitTimeout, SkipOnTimeout and WithLookback apply to WaitForEvent and WaitForSignal steps")
	}
	if s.kind != "" && s.kind != durabletype.KindStep && (s.conc != nil || s.rate != nil) {
		stepErr(ErrInvalidOption, fmt.Sprintf("WithConcurrency and WithRateLimit do not apply to a %s step", s.kind))
	}
	switch s.kind {
	case durabletype.KindEvent:
		if s.timeout != 0 {
			stepErr(ErrInvalidOption, "WithTimeout does not apply to a waiting step: use WithWaitTimeout")
		}
		if s.wait.signal != "" && s.wait.lookback != 0 {
			stepErr(ErrInvalidOption, "WithLookback does not apply to a signal: signals are kept with their run")
		}
		spec.Wait = &durabletype.WaitSpec{Signal: s.wait.signal, Timeout: s.wait.timeout, SkipOnTimeout: s.wait.skip, Lookback: s.wait.lookback}
		if p := describeJSON(s.out); p.Type != durabletype.TypeAny {
			spec.Wait.Payload = p
		}
	case durabletype.KindChild:
		if c := s.child; c != nil {
			if c.result.wf != c.wf {
				stepErr(ErrInvalidOption, fmt.Sprintf("the result step %s is not a step of the child workflow %s",
					dag.Quote(c.result.name), dag.Quote(c.wf.name)))
			}
			spec.Child = &durabletype.ChildSpec{Workflow: c.wf.name, Result: c.result.name}
		}
	case durabletype.KindMap:
		if m := s.mapDef; m != nil {
			spec.Map = &durabletype.MapSpec{} // over the run's input (MapInput)
			if m.over != nil {
				spec.Map.Over = m.over.name
			}
		}
	case durabletype.KindFunc:
		spec.Func = &durabletype.FuncSpec{}
	}
}

// children returns the child workflows s starts, if any.
func (s *stepDef) children() []*workflowDef {
	if s.child != nil && s.child.wf != nil {
		return []*workflowDef{s.child.wf}
	}
	return nil
}
