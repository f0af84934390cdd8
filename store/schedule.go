package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
)

// Scheduler is implemented by stores that keep cron schedules: a workflow,
// a tenant, an input and a cron expression in a time zone, whose slots the
// leader fires as runs (see FireSchedules). Both stores of the module
// implement it; an engine on a store without it has no schedules.
//
// A schedule is named by its tenant and name (unique together). Its next
// slot (NextAt) is a row's due time, so waiting for it costs nothing.
type Scheduler interface {
	// CreateSchedule records a new schedule and returns it, with NextAt the
	// first slot after Now (none when Paused). A schedule with the same
	// tenant and name fails with ErrScheduleExists; an expression or time
	// zone that does not parse with ErrInvalidSchedule.
	CreateSchedule(ctx context.Context, p *CreateScheduleParams) (*durabletype.Schedule, error)

	// GetSchedule returns a schedule, or ErrScheduleNotFound.
	GetSchedule(ctx context.Context, p *GetScheduleParams) (*durabletype.Schedule, error)

	// ListSchedules returns a page of schedules ordered by tenant and name.
	ListSchedules(ctx context.Context, p *ListSchedulesParams) (*ListSchedulesResult, error)

	// PauseSchedule pauses or resumes a schedule and returns it. A paused
	// schedule fires nothing. Resuming sets NextAt to the first slot after
	// Now: slots that passed while it was paused are skipped. Pausing a
	// paused schedule (or resuming a running one) changes nothing.
	PauseSchedule(ctx context.Context, p *PauseScheduleParams) (*durabletype.Schedule, error)

	// DeleteSchedule deletes a schedule, or returns ErrScheduleNotFound.
	// Runs it already fired are not touched.
	DeleteSchedule(ctx context.Context, p *DeleteScheduleParams) error

	// FireSchedules fires up to Limit due schedules (NextAt at or before
	// Now, not paused), the most overdue first. Firing one is one atomic
	// unit: it creates the run of the latest due slot (the misfire rule of
	// internal/core/cronslot: earlier due slots are skipped) and moves NextAt to
	// the first slot after Now. The run's ID is derived from the schedule
	// and the slot, so a slot is never fired twice: a duplicated attempt
	// finds the run and creates nothing. It reports how long until the next
	// slot is due.
	FireSchedules(ctx context.Context, p *FireSchedulesParams) (*FireSchedulesResult, error)
}

// CreateScheduleParams are the parameters of Scheduler.CreateSchedule.
type CreateScheduleParams struct {
	Now      time.Time
	ID       uuid.UUID
	Tenant   string
	Name     string
	Workflow string
	Input    []byte
	Cron     string
	TimeZone string
	Shape    *durabletype.Shape
	Paused   bool
}

// GetScheduleParams are the parameters of Scheduler.GetSchedule.
type GetScheduleParams struct {
	Key durabletype.ScheduleKey
}

// ListSchedulesParams are the parameters of Scheduler.ListSchedules.
type ListSchedulesParams struct {
	// Tenant, when set, keeps that tenant's schedules.
	Tenant string
	// After, when set, starts the page after that schedule.
	After *durabletype.ScheduleKey
	// Limit is the most schedules to return (at least 1).
	Limit int
}

// ListSchedulesResult is the result of Scheduler.ListSchedules.
type ListSchedulesResult struct {
	Schedules []*durabletype.Schedule
	// More is set when schedules follow the last one returned.
	More bool
}

// PauseScheduleParams are the parameters of Scheduler.PauseSchedule.
type PauseScheduleParams struct {
	Now    time.Time
	Key    durabletype.ScheduleKey
	Paused bool
}

// DeleteScheduleParams are the parameters of Scheduler.DeleteSchedule.
type DeleteScheduleParams struct {
	Key durabletype.ScheduleKey
}

// FireSchedulesParams are the parameters of Scheduler.FireSchedules.
type FireSchedulesParams struct {
	Now time.Time
	// Limit is the most schedules fired in one call.
	Limit int
	// Shapes holds the current shapes of the workflows the caller has
	// registered, by name: a schedule of one of them fires runs of that
	// shape, so that a deploy that changes a workflow reaches its
	// schedules. Other schedules use their recorded Shape.
	Shapes map[string]*durabletype.Shape
}

// FiredSlot is one slot fired by FireSchedules.
type FiredSlot struct {
	Schedule uuid.UUID
	Tenant   string
	Name     string
	Slot     time.Time
	RunID    uuid.UUID
	// At is when it fired, on the store's clock.
	At time.Time
	// Missed counts the earlier due slots skipped by the misfire rule.
	Missed int
}

// BrokenSchedule is a schedule that FireSchedules could not fire and
// stopped: its Error is set and it is no longer due.
type BrokenSchedule struct {
	Key   durabletype.ScheduleKey
	Error string
}

// FireSchedulesResult is the result of Scheduler.FireSchedules.
type FireSchedulesResult struct {
	Fired  []FiredSlot
	Broken []BrokenSchedule
	// More is set when Limit schedules were due: call again.
	More bool
	// Left counts the due schedules the call left to a newer engine: the
	// shape their runs would start with is one this engine cannot read
	// (cronslot.Leaves). They stay due, and Next counts them.
	Left int
	// Next is the time until the next slot is due, measured on the
	// store's clock; meaningful only when HasNext (some schedule is
	// active).
	Next    time.Duration
	HasNext bool
}

// ScheduleDeclarer is implemented by stores that apply schedules declared
// in code: at every engine start, the schedules each of its workflows
// declares are created or updated, and the declared schedules the workflow
// no longer declares are deleted. Both stores of the module implement it.
//
// What a declaration does is decided by internal/core/cronslot (Declare); a
// store loads the schedules it names and the declared schedules of the
// workflows in scope, applies the decision atomically, and serializes
// concurrent calls, so that many engines starting at once with the same
// declarations converge on one schedule each and write nothing after the
// first.
type ScheduleDeclarer interface {
	// DeclareSchedules makes the declared schedules of p.Workflows those of
	// p.Schedules, at Now: a declaration whose schedule does not exist is
	// created (its first slot after Now); one whose stored declaration
	// differs is updated (a changed expression or time zone recomputes the
	// next slot from Now; the last slot fired is kept); one that is the
	// same writes nothing; and a declared schedule of one of p.Workflows
	// that p.Schedules does not name is deleted. A schedule created with
	// CreateSchedule is never updated or deleted: a declaration of its
	// tenant and name fails with ErrScheduleExists. An invalid
	// declaration fails with ErrInvalidSchedule (or ErrInvalidTenant).
	// Either every change is made or none.
	DeclareSchedules(ctx context.Context, p *DeclareSchedulesParams) (*DeclareSchedulesResult, error)
}

// DeclaredSchedule is one schedule declared in code.
type DeclaredSchedule struct {
	// ID is the schedule's ID if it is created; an existing schedule keeps
	// its own.
	ID       uuid.UUID
	Tenant   string
	Name     string
	Workflow string
	Input    []byte
	Cron     string
	TimeZone string
	Shape    *durabletype.Shape
	Paused   bool
}

// DeclareSchedulesParams are the parameters of
// ScheduleDeclarer.DeclareSchedules.
type DeclareSchedulesParams struct {
	Now time.Time
	// Workflows are the workflows whose declared schedules Schedules
	// replaces. Each declaration names one of them.
	Workflows []string
	// Schedules are the declarations, unique by tenant and name.
	Schedules []DeclaredSchedule
}

// DeclareSchedulesResult is the result of
// ScheduleDeclarer.DeclareSchedules, by tenant and name.
type DeclareSchedulesResult struct {
	Created   []durabletype.ScheduleKey
	Updated   []durabletype.ScheduleKey
	Deleted   []durabletype.ScheduleKey
	Unchanged []durabletype.ScheduleKey
}

// TopicSchedule: a schedule was created or resumed; the leader should
// re-check when the next slot is due.
const TopicSchedule Topic = "schedule"
