package durable

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Workflows by name: starting a registered workflow from encoded input
// (for callers that do not share its Go types, such as an HTTP API),
// describing the registered DAGs, and checking that the store is ready.

// Errors of starting a workflow by name.
var (
	// ErrInvalidInput: the encoded input given to StartByName does not
	// decode into the workflow's input type. Nothing is started.
	ErrInvalidInput = errors.New("durable: input does not decode into the workflow's input type")
	// ErrRunExists: a trigger's run ID (WithRunID) is taken by a run of
	// another workflow or tenant.
	ErrRunExists = durabletype.ErrRunExists
)

// StartByName starts a run of the workflow registered on e under the name
// workflow, for tenant, with input already encoded by the engine's Codec
// (JSON by default). The input is checked by decoding it into the
// workflow's input type: when that fails the error matches ErrInvalidInput
// and nothing is started. With the JSON codec (the default) the check is
// strict: a field the input type does not have (a misspelt name) or data
// after the value fails it too, rather than being ignored, unless
// WithUnknownFields lets unknown fields through. A workflow or tenant that breaks the rule of its
// kind fails with an *InvalidValueError (matching ErrInvalidName or
// ErrInvalidTenant), a valid name not registered with
// ErrWorkflowNotRegistered. Otherwise it behaves as Workflow.Start, options
// and duplicates included.
func (e *Engine) StartByName(ctx context.Context, workflow, tenant string, input []byte, opts ...TriggerOption) (Started, error) {
	def, shape, err := e.byName(workflow)
	if err != nil {
		return Started{}, err
	}
	run, err := e.newRunByName(def, shape, tenant, input, opts)
	if err != nil {
		return Started{}, err
	}
	run.TraceParent = e.tel.traceParent(ctx)
	p := &store.CreateRunsParams{Now: e.now(), Runs: []store.NewRun{run}}
	res, err := e.store.CreateRuns(ctx, p)
	if err != nil {
		return Started{}, fmt.Errorf("durable: starting run: %w", err)
	}
	e.wakeClaims()
	return e.warnStarted(ctx, workflow, p, started(res))[0], nil
}

// TriggerByName is one run to start with StartManyByName: its tenant, its
// input already encoded by the engine's Codec, and its options.
type TriggerByName struct {
	Tenant  string
	Input   []byte
	Options []TriggerOption
}

// TriggerError is the error of StartManyByName for a trigger it refused:
// Index is the trigger's position (from 0) and Err what StartByName would
// have returned for it (an ErrInvalidInput, an ErrPayloadTooLarge, an
// *InvalidValueError...), which the TriggerError matches too.
type TriggerError struct {
	Index int
	Err   error
}

// Error says which trigger was refused and why.
func (e *TriggerError) Error() string { return fmt.Sprintf("trigger %d: %v", e.Index+1, e.Err) }

// Unwrap returns Err.
func (e *TriggerError) Unwrap() error { return e.Err }

// StartManyByName starts many runs of the workflow registered under the
// name workflow in one atomic store call (all or none), as StartByName
// starts one: every trigger is checked first, and one that StartByName
// would refuse fails the call with a *TriggerError naming it, nothing
// started. A trigger that duplicates an earlier one (or one earlier in
// triggers) gets the earlier run's ID, with Duplicate set.
func (e *Engine) StartManyByName(ctx context.Context, workflow string, triggers []TriggerByName) ([]Started, error) {
	def, shape, err := e.byName(workflow)
	if err != nil {
		return nil, err
	}
	traceParent := e.tel.traceParent(ctx)
	p := &store.CreateRunsParams{Now: e.now(), Runs: make([]store.NewRun, len(triggers))}
	for i, t := range triggers {
		run, err := e.newRunByName(def, shape, t.Tenant, t.Input, t.Options)
		if err != nil {
			return nil, &TriggerError{Index: i, Err: err}
		}
		run.TraceParent = traceParent
		p.Runs[i] = run
	}
	if len(p.Runs) == 0 {
		return nil, nil
	}
	res, err := e.store.CreateRuns(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("durable: starting runs: %w", err)
	}
	e.wakeClaims()
	return e.warnStarted(ctx, workflow, p, started(res)), nil
}

// CheckByName reports the error StartByName would return for this
// trigger (an unregistered workflow, a tenant or option that breaks its
// rule, an input that does not decode into the workflow's input type or
// is too large), without starting anything or calling the store; nil if
// StartByName would start it (or find it a duplicate). Tools use it to
// check every line of a batch before starting any.
func (e *Engine) CheckByName(workflow, tenant string, input []byte, opts ...TriggerOption) error {
	def, shape, err := e.byName(workflow)
	if err != nil {
		return err
	}
	_, err = e.newRunByName(def, shape, tenant, input, opts)
	return err
}

// byName returns the registered workflow name and its shape, for a
// trigger by name.
func (e *Engine) byName(workflow string) (*workflowDef, *durabletype.Shape, error) {
	if e.isStopped() {
		return nil, nil, ErrEngineStopped
	}
	if err := dag.NameRule.Check("workflow", workflow); err != nil {
		return nil, nil, err
	}
	def := e.workflow(workflow)
	if def == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrWorkflowNotRegistered, dag.Quote(workflow))
	}
	shape, err := e.shapeOf(def)
	if err != nil {
		return nil, nil, err
	}
	return def, shape, nil
}

// newRunByName checks one trigger by name and makes its new run.
func (e *Engine) newRunByName(def *workflowDef, shape *durabletype.Shape, tenant string, input []byte, opts []TriggerOption) (store.NewRun, error) {
	if err := dag.TenantRule.Check("tenant", tenant); err != nil {
		return store.NewRun{}, err
	}
	o, err := applyTrigger(opts)
	if err != nil {
		return store.NewRun{}, err
	}
	if err := e.checkInput("the input", input); err != nil {
		return store.NewRun{}, err
	}
	in, err := def.decodeInput(e.cfg.Codec, input)
	if err == nil && isJSONCodec(e.cfg.Codec) && def.inType != nil && !o.unknownFields {
		err = decodeStrict(input, def.inType)
	}
	if err != nil {
		return store.NewRun{}, fmt.Errorf("%w: workflow %s: %w", ErrInvalidInput, dag.Quote(def.name), err)
	}
	return def.newRun(shape, tenant, input, in, o)
}

// isJSONCodec reports whether c is the default JSON codec.
func isJSONCodec(c Codec) bool {
	switch c.(type) {
	case JSONCodec, *JSONCodec:
		return true
	}
	return false
}

// decodeStrict decodes the JSON value b into a new value of type t,
// refusing a field t does not have and data after the value: the rule of
// an input given by name, where a misspelt field would otherwise be
// dropped in silence.
func decodeStrict(b []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(reflect.New(t).Interface()); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the value")
	}
	return nil
}

// newRun is the store's record of a new run of d: b is the encoded input,
// in the decoded one (for concurrency and rate-limit keys).
func (d *workflowDef) newRun(shape *durabletype.Shape, tenant string, b []byte, in any, o *triggerOpts) (store.NewRun, error) {
	id := o.runID
	if id == uuid.Nil {
		var err error
		if id, err = uuid.NewV7(); err != nil {
			return store.NewRun{}, fmt.Errorf("durable: run id: %w", err)
		}
	}
	keys, err := d.keys(in)
	if err != nil {
		return store.NewRun{}, err
	}
	return store.NewRun{
		ID: id, Workflow: d.name, Tenant: tenant, Input: b, Shape: shape, Keys: keys,
		IdempotencyKey: o.key, Priority: int(o.priority),
		StartAt: o.startAt, StartAfter: o.startAfter, Deadline: o.deadline, Timeout: o.timeout,
	}, nil
}

// WorkflowInfo describes a registered workflow: its name and the DAG of
// its newest version.
type WorkflowInfo struct {
	// Name is the workflow's name.
	Name string
	// Version is the newest version registered: the one StartByName and
	// schedules start.
	Version string
	// Versions lists every version registered, newest first.
	Versions []string
	// Accepts lists the older versions whose runs the registered versions
	// accept (Workflow.Accepts), sorted.
	Accepts []string
	// Input names the Go type of the workflow's input.
	Input string
	// Steps are its steps in declaration order; a step's parents come
	// before it.
	Steps []StepInfo
	// OnFailure is set when the workflow has an on-failure handler.
	OnFailure bool
	// ChildOnly is set for a workflow registered only because another
	// registered workflow starts it as a child run (Child).
	ChildOnly bool
}

// StepInfo describes one step of a workflow.
type StepInfo struct {
	// Name is the step's name.
	Name string
	// Parents are the steps it runs after.
	Parents []string
	// Kind is what the step does: "step" (code), "sleep", "event" (waits
	// for an event or a signal), "child" (starts a child run) or "map".
	Kind durabletype.TaskKind
	// Output names the Go type of the step's output.
	Output string
	// Sleep is a sleep step's duration.
	Sleep time.Duration
	// Signal is the signal a WaitForSignal step waits for.
	Signal string
	// Child is the workflow a child step starts.
	Child string
	// MapOver is the parent whose list a map step maps over; empty for a
	// map step over the run's input (MapInput).
	MapOver string
	// Retired is set on a step that an upgrade kept only for its record
	// (a run's shape: see Engine.UpgradeRuns).
	Retired bool
}

// stepsOf describes the steps of a shape.
func stepsOf(shape *durabletype.Shape) []StepInfo {
	out := make([]StepInfo, 0, len(shape.Steps))
	for _, s := range shape.Steps {
		si := StepInfo{Name: s.Name, Parents: s.Parents, Kind: dag.KindOf(&s), Output: s.Output, Sleep: s.Sleep, Retired: s.Retired}
		switch si.Kind {
		case durabletype.KindEvent:
			si.Signal = s.Wait.Signal
		case durabletype.KindChild:
			si.Child = s.Child.Workflow
		case durabletype.KindMap:
			si.MapOver = s.Map.Over
		}
		out = append(out, si)
	}
	return out
}

// Workflows describes the workflows registered on e, by name: each with
// the DAG of its newest version.
func (e *Engine) Workflows() []WorkflowInfo {
	e.mu.Lock()
	reg := e.reg
	e.mu.Unlock()
	out := make([]WorkflowInfo, 0, len(reg.names))
	for _, name := range reg.names {
		newest := reg.newest(name)
		wi := WorkflowInfo{Name: name, Version: newest.shape.Version, Input: newest.shape.Input,
			Steps: stepsOf(newest.shape), OnFailure: newest.shape.OnFailure != nil, ChildOnly: true}
		vs := reg.byName[name]
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i] != newest {
				wi.Versions = append(wi.Versions, vs[i].shape.Version)
			}
			wi.ChildOnly = wi.ChildOnly && vs[i].childOnly
			wi.Accepts = append(wi.Accepts, vs[i].d.accepts...)
		}
		wi.Versions = append([]string{newest.shape.Version}, wi.Versions...)
		slices.Sort(wi.Accepts)
		wi.Accepts = slices.Compact(wi.Accepts)
		out = append(out, wi)
	}
	return out
}

// Check reports whether the engine's store is ready to serve: for pgstore,
// that the database answers and its schema is migrated to the version this
// code expects. A store that cannot tell (one that does not implement
// store.Checker, like memstore) is ready.
func (e *Engine) Check(ctx context.Context) error {
	c, ok := e.store.(store.Checker)
	if !ok {
		return nil
	}
	if err := c.Check(ctx); err != nil {
		return fmt.Errorf("durable: store not ready: %w", err)
	}
	return nil
}
