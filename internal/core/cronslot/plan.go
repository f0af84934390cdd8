package cronslot

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// runNamespace is the UUID namespace of the run IDs of fired slots.
var runNamespace = uuid.MustParse("6f1d3c1e-8a55-4f55-9f3e-2b1c0c7d5a01")

// RunID is the ID of the run that fires slot of schedule, derived from
// both, so that firing a slot twice names the same run, which the store
// refuses to create again. It is laid out as a UUIDv7 of the slot's time
// (dag.TimeOrderedID), so that fired runs sort by time like the others.
func RunID(schedule uuid.UUID, slot time.Time) uuid.UUID {
	var b [24]byte
	copy(b[:16], schedule[:])
	binary.BigEndian.PutUint64(b[16:], uint64(slot.UnixMicro()))
	return dag.TimeOrderedID(uuid.NewSHA1(runNamespace, b[:]), slot)
}

// Check validates a new schedule and returns its first slot after now
// (zero when it is created paused). Errors wrap durabletype.ErrInvalidSchedule,
// or durabletype.ErrInvalidTenant for the tenant.
func Check(p *store.CreateScheduleParams, now time.Time) (time.Time, error) {
	switch {
	case p.ID == uuid.Nil:
		return time.Time{}, fmt.Errorf("%w: no ID", durabletype.ErrInvalidSchedule)
	case !dag.ValidTenant(p.Tenant):
		return time.Time{}, fmt.Errorf("%w: %s", durabletype.ErrInvalidTenant, dag.Quote(p.Tenant))
	case !dag.ValidTenant(p.Name):
		return time.Time{}, fmt.Errorf("%w: name %s: want 1 to %d bytes of UTF-8 without control characters",
			durabletype.ErrInvalidSchedule, dag.Quote(p.Name), dag.MaxTenantLen)
	case p.Shape == nil:
		return time.Time{}, fmt.Errorf("%w: no shape", durabletype.ErrInvalidSchedule)
	}
	nr := store.NewRun{ID: p.ID, Workflow: p.Workflow, Tenant: p.Tenant, Input: p.Input, Shape: p.Shape}
	if err := dag.CheckNewRun(&nr); err != nil {
		return time.Time{}, fmt.Errorf("%w: %w", durabletype.ErrInvalidSchedule, err)
	}
	if _, err := dag.Compile(p.Shape); err != nil {
		return time.Time{}, fmt.Errorf("%w: %w", durabletype.ErrInvalidSchedule, err)
	}
	spec, err := Parse(p.Cron, p.TimeZone, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %w", durabletype.ErrInvalidSchedule, err)
	}
	if p.Paused {
		return time.Time{}, nil
	}
	return spec.Next(now), nil
}

// NextAfter returns the first slot of a stored schedule after now, for a
// resume; an error when its expression no longer parses.
func NextAfter(sc *durabletype.Schedule, now time.Time) (time.Time, error) {
	spec, err := Parse(sc.Cron, sc.TimeZone, now)
	if err != nil {
		return time.Time{}, err
	}
	return spec.Next(now), nil
}

// Leaves reports whether the leader leaves due schedule sc to a newer
// engine, firing nothing and breaking nothing: its runs would start with
// the schedule's recorded shape (shapes has none of its workflow) and
// that shape cannot be read here (unread, the error of dag.ReadShape; nil
// when it reads). See dag.ReadShape.
func Leaves(sc *durabletype.Schedule, shapes map[string]*durabletype.Shape, unread error) bool {
	return unread != nil && shapes[sc.Workflow] == nil
}

// Firing is what to do with one due schedule.
type Firing struct {
	Decision
	// Run is the run of the slot fired.
	Run store.NewRun
}

// Plan decides what firing schedule sc at now does: ok is false when it is
// not due (paused, broken or NextAt in the future). The run uses the shape
// in shapes under the schedule's workflow when there is one, else the
// schedule's recorded shape. An error means the schedule cannot fire (its
// stored expression no longer parses): the store records it as broken.
func Plan(sc *durabletype.Schedule, now time.Time, shapes map[string]*durabletype.Shape) (f Firing, ok bool, err error) {
	if sc.Paused || sc.NextAt.IsZero() || sc.NextAt.After(now) {
		return Firing{}, false, nil
	}
	spec, err := Parse(sc.Cron, sc.TimeZone, sc.NextAt)
	if err != nil {
		return Firing{}, false, err
	}
	d, ok := spec.Due(sc.NextAt, now)
	if !ok {
		return Firing{}, false, nil
	}
	shape := shapes[sc.Workflow]
	if shape == nil {
		shape = sc.Shape
	}
	return Firing{
		Decision: d,
		Run: store.NewRun{
			ID: RunID(sc.ID, d.Fire), Workflow: sc.Workflow, Tenant: sc.Tenant,
			Input: sc.Input, Shape: shape,
		},
	}, true, nil
}
