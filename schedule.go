package durable

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Cron schedules: a workflow, a tenant, an input and a cron expression in a
// time zone. The leader fires each slot once, as a normal run; see
// docs/semantics.md ("Schedules") for the misfire, pause and DST rules.

// Errors of schedules.
var (
	// ErrInvalidSchedule: the cron expression, the time zone or the name of
	// a schedule is not valid, or its input does not decode.
	ErrInvalidSchedule = durabletype.ErrInvalidSchedule
	// ErrScheduleExists: the tenant already has a schedule of that name.
	// Creating never replaces one: delete it first.
	ErrScheduleExists = durabletype.ErrScheduleExists
	// ErrScheduleNotFound: the tenant has no schedule of that name.
	ErrScheduleNotFound = durabletype.ErrScheduleNotFound
	// ErrSchedulesUnsupported: the store keeps no schedules (it does not
	// implement store.Scheduler).
	ErrSchedulesUnsupported = errors.New("durable: store does not support schedules")
	// ErrWorkflowNotRegistered: a schedule names a workflow that is not
	// registered on the engine creating it, which needs its definition to
	// record the runs' shape and check the input.
	ErrWorkflowNotRegistered = errors.New("durable: workflow not registered on this engine")
)

// Schedule is a stored schedule: its tenant and name (unique together),
// workflow, encoded input, cron expression and time zone, whether it is
// paused, its next slot and the last slot it fired, and whether it was
// declared in code (Workflow.DeclareSchedule) or created through the API.
//
// Deprecated: use durabletype.Schedule; this alias goes in the next
// release.
type Schedule = durabletype.Schedule

// ScheduleSpec describes a schedule to create with Engine.CreateSchedule.
type ScheduleSpec struct {
	// Tenant owns the schedule and its runs (1-200 bytes of UTF-8).
	Tenant string
	// Name names the schedule within its tenant (1-200 bytes of UTF-8).
	Name string
	// Workflow is the workflow whose runs the schedule starts; it must be
	// registered on the engine that creates the schedule (any engine may
	// execute the runs).
	Workflow string
	// Input is every run's input, encoded with the engine's Codec (JSON by
	// default); it must decode into the workflow's input type.
	Input []byte
	// Cron is a cron expression: five fields (minute hour day-of-month
	// month day-of-week), or six with seconds first, or a descriptor such
	// as @hourly or @daily.
	Cron string
	// TimeZone is the IANA time zone the expression is read in (e.g.
	// "Europe/Paris"). Defaults to UTC.
	TimeZone string
	// Paused creates the schedule paused: it fires nothing until resumed.
	Paused bool
}

// ScheduleOptions are the options of Workflow.Schedule.
type ScheduleOptions struct {
	// TimeZone is the IANA time zone of the expression. Defaults to UTC.
	TimeZone string
	// Paused creates the schedule paused.
	Paused bool
}

func (e *Engine) scheduler() (store.Scheduler, error) {
	s, ok := e.store.(store.Scheduler)
	if !ok {
		return nil, ErrSchedulesUnsupported
	}
	return s, nil
}

// Schedule creates a schedule named name for tenant that starts a run of w
// with input in at every slot of the cron expression. w must be registered
// on e. See Engine.CreateSchedule.
func (w *Workflow[I]) Schedule(ctx context.Context, e *Engine, tenant, name string, in I, cron string, opts ScheduleOptions) (*durabletype.Schedule, error) {
	b, err := e.cfg.Codec.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("%w: input: %w", ErrEncode, err)
	}
	return e.CreateSchedule(ctx, ScheduleSpec{
		Tenant: tenant, Name: name, Workflow: w.def.name, Input: b,
		Cron: cron, TimeZone: opts.TimeZone, Paused: opts.Paused,
	})
}

// CreateSchedule records a schedule and returns it. The workflow must be
// registered on e: the schedule records its shape (the runs use the shape
// registered on the leader when it has the workflow, so that a deploy that
// changes the workflow reaches its schedules) and the input is checked to
// decode into its input type. The expression and time zone are checked
// now (ErrInvalidSchedule); a tenant that already has a schedule of that
// name returns ErrScheduleExists.
func (e *Engine) CreateSchedule(ctx context.Context, spec ScheduleSpec) (*durabletype.Schedule, error) {
	s, err := e.scheduler()
	if err != nil {
		return nil, err
	}
	if err := checkScheduleKey(spec.Tenant, spec.Name); err != nil {
		return nil, err
	}
	if err := dag.NameRule.Check("workflow", spec.Workflow); err != nil {
		return nil, err
	}
	def := e.workflow(spec.Workflow)
	if def == nil {
		return nil, fmt.Errorf("%w: %s", ErrWorkflowNotRegistered, dag.Quote(spec.Workflow))
	}
	shape, err := e.shapeOf(def)
	if err != nil {
		return nil, err
	}
	if err := e.checkInput("the schedule's input", spec.Input); err != nil {
		return nil, err
	}
	if _, err := def.decodeInput(e.cfg.Codec, spec.Input); err != nil {
		return nil, fmt.Errorf("%w: input does not decode into the workflow's input type: %w", durabletype.ErrInvalidSchedule, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("durable: schedule id: %w", err)
	}
	sc, err := s.CreateSchedule(ctx, &store.CreateScheduleParams{
		Now: e.now(), ID: id, Tenant: spec.Tenant, Name: spec.Name, Workflow: spec.Workflow,
		Input: spec.Input, Cron: spec.Cron, TimeZone: spec.TimeZone, Shape: shape, Paused: spec.Paused,
	})
	if err != nil {
		return nil, fmt.Errorf("durable: creating schedule: %w", err)
	}
	e.wakeSchedules()
	return sc, nil
}

// GetSchedule returns the schedule name of tenant, or ErrScheduleNotFound.
// Here and in the other schedule calls a tenant or name that breaks the
// rule of its kind (1-200 bytes of UTF-8 without control characters) is
// an *InvalidValueError, matching ErrInvalidTenant or ErrInvalidSchedule.
func (e *Engine) GetSchedule(ctx context.Context, tenant, name string) (*durabletype.Schedule, error) {
	s, err := e.scheduler()
	if err != nil {
		return nil, err
	}
	if err := checkScheduleKey(tenant, name); err != nil {
		return nil, err
	}
	sc, err := s.GetSchedule(ctx, &store.GetScheduleParams{Key: durabletype.ScheduleKey{Tenant: tenant, Name: name}})
	if err != nil {
		return nil, fmt.Errorf("durable: %w", err)
	}
	return sc, nil
}

// ScheduleListOptions are the options of Engine.ListSchedules.
type ScheduleListOptions struct {
	// Tenant, when set, lists that tenant's schedules only.
	Tenant string
	// After continues a listing after that schedule (the last of the
	// previous page).
	After *durabletype.ScheduleKey
	// Limit is the most schedules on a page. Defaults to 100; at most 1,000.
	Limit int
}

// SchedulePage is one page of schedules, by tenant and name.
type SchedulePage struct {
	Schedules []*durabletype.Schedule
	// More is set when schedules follow the last one.
	More bool
}

// ListSchedules returns a page of schedules ordered by tenant and name.
func (e *Engine) ListSchedules(ctx context.Context, opts ScheduleListOptions) (*SchedulePage, error) {
	s, err := e.scheduler()
	if err != nil {
		return nil, err
	}
	if opts.Limit == 0 {
		opts.Limit = 100
	}
	if opts.Limit < 0 || opts.Limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d: want 1 to 1000", ErrInvalidFilter, opts.Limit)
	}
	if opts.Tenant != "" {
		if err := dag.TenantRule.Check("tenant", opts.Tenant); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
		}
	}
	if opts.After != nil {
		if err := checkScheduleKey(opts.After.Tenant, opts.After.Name); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidCursor, err)
		}
	}
	res, err := s.ListSchedules(ctx, &store.ListSchedulesParams{Tenant: opts.Tenant, After: opts.After, Limit: opts.Limit})
	if err != nil {
		return nil, fmt.Errorf("durable: listing schedules: %w", err)
	}
	return &SchedulePage{Schedules: res.Schedules, More: res.More}, nil
}

// PauseSchedule pauses a schedule: it fires nothing until resumed. Pausing
// a paused schedule changes nothing. A declared schedule stays paused until
// resumed or until its declaration changes (see Workflow.DeclareSchedule).
func (e *Engine) PauseSchedule(ctx context.Context, tenant, name string) (*durabletype.Schedule, error) {
	return e.pauseSchedule(ctx, tenant, name, true)
}

// ResumeSchedule resumes a paused schedule from the first slot after now:
// the slots that passed while it was paused are skipped, none is caught
// up. Resuming also clears the error of a broken schedule and tries again.
func (e *Engine) ResumeSchedule(ctx context.Context, tenant, name string) (*durabletype.Schedule, error) {
	return e.pauseSchedule(ctx, tenant, name, false)
}

func (e *Engine) pauseSchedule(ctx context.Context, tenant, name string, paused bool) (*durabletype.Schedule, error) {
	s, err := e.scheduler()
	if err != nil {
		return nil, err
	}
	if err := checkScheduleKey(tenant, name); err != nil {
		return nil, err
	}
	sc, err := s.PauseSchedule(ctx, &store.PauseScheduleParams{
		Now: e.now(), Key: durabletype.ScheduleKey{Tenant: tenant, Name: name}, Paused: paused,
	})
	if err != nil {
		return nil, fmt.Errorf("durable: %w", err)
	}
	if !paused {
		e.wakeSchedules()
	}
	return sc, nil
}

// DeleteSchedule deletes a schedule. The runs it started are kept. A
// schedule declared in code (Workflow.DeclareSchedule) is created again at
// the next start of an engine that declares it.
func (e *Engine) DeleteSchedule(ctx context.Context, tenant, name string) error {
	s, err := e.scheduler()
	if err != nil {
		return err
	}
	if err := checkScheduleKey(tenant, name); err != nil {
		return err
	}
	if err := s.DeleteSchedule(ctx, &store.DeleteScheduleParams{Key: durabletype.ScheduleKey{Tenant: tenant, Name: name}}); err != nil {
		return fmt.Errorf("durable: %w", err)
	}
	return nil
}

// wakeSchedules tells this engine's schedule duty, if it leads, that a
// slot may be due sooner than it thought.
func (e *Engine) wakeSchedules() {
	e.mu.Lock()
	rt := e.rt
	e.mu.Unlock()
	if rt != nil {
		rt.wakeSchedules()
	}
}

// registeredShapes returns the shapes of the workflows registered on e:
// of each, its newest version (the one a schedule's runs start with).
func (e *Engine) registeredShapes() map[string]*durabletype.Shape {
	e.mu.Lock()
	defer e.mu.Unlock()
	shapes := make(map[string]*durabletype.Shape, len(e.reg.names))
	for _, name := range e.reg.names {
		shapes[name] = e.reg.newest(name).shape
	}
	return shapes
}

// The schedules of one tenant (Engine.Tenant): the same methods without
// the tenant argument. A tenant that could not exist finds nothing.

// GetSchedule returns the tenant's schedule name (ErrScheduleNotFound).
func (v *TenantRuns) GetSchedule(ctx context.Context, name string) (*durabletype.Schedule, error) {
	if v.empty() {
		return nil, fmt.Errorf("durable: %w", durabletype.ErrScheduleNotFound)
	}
	return v.e.GetSchedule(ctx, v.tenant, name)
}

// ListSchedules returns a page of the tenant's schedules by name; the
// options' Tenant is ignored.
func (v *TenantRuns) ListSchedules(ctx context.Context, opts ScheduleListOptions) (*SchedulePage, error) {
	if v.empty() {
		return &SchedulePage{}, nil
	}
	opts.Tenant = v.tenant
	if opts.After != nil && opts.After.Tenant != v.tenant {
		return nil, fmt.Errorf("%w: the cursor belongs to another tenant", ErrInvalidCursor)
	}
	return v.e.ListSchedules(ctx, opts)
}

// PauseSchedule pauses the tenant's schedule name (see Engine.PauseSchedule).
func (v *TenantRuns) PauseSchedule(ctx context.Context, name string) (*durabletype.Schedule, error) {
	if v.empty() {
		return nil, fmt.Errorf("durable: %w", durabletype.ErrScheduleNotFound)
	}
	return v.e.PauseSchedule(ctx, v.tenant, name)
}

// ResumeSchedule resumes the tenant's schedule name (see
// Engine.ResumeSchedule).
func (v *TenantRuns) ResumeSchedule(ctx context.Context, name string) (*durabletype.Schedule, error) {
	if v.empty() {
		return nil, fmt.Errorf("durable: %w", durabletype.ErrScheduleNotFound)
	}
	return v.e.ResumeSchedule(ctx, v.tenant, name)
}

// DeleteSchedule deletes the tenant's schedule name (see
// Engine.DeleteSchedule).
func (v *TenantRuns) DeleteSchedule(ctx context.Context, name string) error {
	if v.empty() {
		return fmt.Errorf("durable: %w", durabletype.ErrScheduleNotFound)
	}
	return v.e.DeleteSchedule(ctx, v.tenant, name)
}
