package cronslot

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Declared schedules (store.ScheduleDeclarer): what applying the schedules
// declared in code does to each stored schedule. A store loads the
// schedules Loads says, calls Declare under a lock that serializes
// declarations, and writes what it returns.

// DeclareAction is what applying declarations does to one schedule.
type DeclareAction int

// Actions of Declare.
const (
	// DeclareKeep: the stored schedule already is what its declaration
	// says; nothing is written.
	DeclareKeep DeclareAction = iota
	// DeclareCreate: no schedule has the declaration's tenant and name.
	DeclareCreate
	// DeclareUpdate: the declaration changed (or the workflow's shape did).
	DeclareUpdate
	// DeclareDelete: a declared schedule of a workflow in scope that is no
	// longer declared.
	DeclareDelete
)

// Declaration is what Declare decided for one schedule.
type Declaration struct {
	Key    durabletype.ScheduleKey
	Action DeclareAction
	// Row is the schedule to write, whole, for DeclareCreate and
	// DeclareUpdate (its LastSlot, LastRunID and CreatedAt are those
	// stored); nil otherwise.
	Row *durabletype.Schedule
	// Wake is set when the write makes the schedule active or moves its
	// next slot: the leader should look again when the next slot is due.
	Wake bool
}

// Loads reports whether a store must load sc to apply p: it is named by a
// declaration, or it is a declared schedule of a workflow in scope.
func Loads(p *store.DeclareSchedulesParams, sc *durabletype.Schedule) bool {
	if sc.Declared && slices.Contains(p.Workflows, sc.Workflow) {
		return true
	}
	return slices.ContainsFunc(p.Schedules, func(d store.DeclaredSchedule) bool {
		return d.Tenant == sc.Tenant && d.Name == sc.Name
	})
}

// Declare decides how the stored schedules become what p declares, at now.
// stored holds the schedules a store loaded (those Loads accepts; others
// are ignored). It returns one Declaration per declaration, in the order
// given, then one per schedule to delete, by tenant and name. It fails,
// deciding nothing, when a declaration is invalid (durabletype.ErrInvalidSchedule
// or durabletype.ErrInvalidTenant), names a workflow outside p.Workflows, repeats
// another's tenant and name, or names a schedule created with
// CreateSchedule (durabletype.ErrScheduleExists).
func Declare(p *store.DeclareSchedulesParams, stored []*durabletype.Schedule, now time.Time) ([]Declaration, error) {
	byKey := make(map[durabletype.ScheduleKey]*durabletype.Schedule, len(stored))
	for _, sc := range stored {
		if Loads(p, sc) {
			byKey[durabletype.ScheduleKey{Tenant: sc.Tenant, Name: sc.Name}] = sc
		}
	}
	declared := make(map[durabletype.ScheduleKey]bool, len(p.Schedules))
	out := make([]Declaration, 0, len(p.Schedules))
	for i := range p.Schedules {
		d := &p.Schedules[i]
		key := durabletype.ScheduleKey{Tenant: d.Tenant, Name: d.Name}
		name := fmt.Sprintf("declared schedule %s of tenant %s", dag.Quote(d.Name), dag.Quote(d.Tenant))
		if declared[key] {
			return nil, fmt.Errorf("%w: %s is declared twice", durabletype.ErrInvalidSchedule, name)
		}
		declared[key] = true
		if !slices.Contains(p.Workflows, d.Workflow) {
			return nil, fmt.Errorf("%w: %s names workflow %s, which the call does not declare for",
				durabletype.ErrInvalidSchedule, name, dag.Quote(d.Workflow))
		}
		next, err := Check(&store.CreateScheduleParams{
			ID: d.ID, Tenant: d.Tenant, Name: d.Name, Workflow: d.Workflow, Input: d.Input,
			Cron: d.Cron, TimeZone: d.TimeZone, Shape: d.Shape, Paused: d.Paused,
		}, now)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cur := byKey[key]
		switch {
		case cur == nil:
			out = append(out, Declaration{Key: key, Action: DeclareCreate, Wake: !d.Paused, Row: &durabletype.Schedule{
				ID: d.ID, Tenant: d.Tenant, Name: d.Name, Workflow: d.Workflow, Input: d.Input,
				Cron: d.Cron, TimeZone: d.TimeZone, Shape: d.Shape, Paused: d.Paused, NextAt: next,
				CreatedAt: now, UpdatedAt: now, Declared: true, DeclaredPaused: d.Paused,
			}})
		case !cur.Declared:
			return nil, fmt.Errorf("%w: %s: a schedule of that name was created through the API, and declarations "+
				"never touch those: delete it, or rename the declaration", durabletype.ErrScheduleExists, name)
		default:
			out = append(out, update(cur, d, next, now))
		}
	}
	var gone []Declaration
	for key, sc := range byKey {
		if sc.Declared && !declared[key] && slices.Contains(p.Workflows, sc.Workflow) {
			gone = append(gone, Declaration{Key: key, Action: DeclareDelete})
		}
	}
	slices.SortFunc(gone, func(a, b Declaration) int {
		return cmp.Or(cmp.Compare(a.Key.Tenant, b.Key.Tenant), cmp.Compare(a.Key.Name, b.Key.Name))
	})
	return append(out, gone...), nil
}

// update decides what declaration d does to the declared schedule cur;
// next is d's first slot after now (zero when d is paused).
//
// The declaration is compared with the one cur was last written from: its
// workflow, input, expression, zone and declared paused state. When they
// are the same nothing changes, even if an operator paused or resumed the
// schedule since (that holds until the declaration changes). When they
// differ the schedule takes the declaration whole: paused as declared; a
// changed expression or zone, a resume, or a broken schedule takes its
// next slot from now (and clears the error); a change of input or
// workflow alone keeps the slot it was waiting for. A change of the
// workflow's shape alone updates the recorded shape only. The last slot
// fired is always kept, so that a restart never fires a slot again.
func update(cur *durabletype.Schedule, d *store.DeclaredSchedule, next, now time.Time) Declaration {
	key := durabletype.ScheduleKey{Tenant: cur.Tenant, Name: cur.Name}
	changed := cur.Workflow != d.Workflow || cur.Cron != d.Cron || cur.TimeZone != d.TimeZone ||
		!bytes.Equal(cur.Input, d.Input) || cur.DeclaredPaused != d.Paused
	reshaped := !sameShape(cur.Shape, d.Shape)
	if !changed && !reshaped {
		return Declaration{Key: key, Action: DeclareKeep}
	}
	row := *cur
	row.Shape, row.UpdatedAt = d.Shape, now
	if !changed {
		return Declaration{Key: key, Action: DeclareUpdate, Row: &row}
	}
	row.Workflow, row.Input, row.Cron, row.TimeZone = d.Workflow, d.Input, d.Cron, d.TimeZone
	row.Paused, row.DeclaredPaused = d.Paused, d.Paused
	wake := false
	switch {
	case d.Paused:
		row.NextAt = time.Time{}
	case cur.Paused || cur.NextAt.IsZero() || cur.Error != "" || cur.Cron != d.Cron || cur.TimeZone != d.TimeZone:
		row.NextAt, row.Error, wake = next, "", true
	}
	return Declaration{Key: key, Action: DeclareUpdate, Row: &row, Wake: wake}
}

// sameShape reports whether two shapes record the same DAG (as JSON, the
// form a store keeps).
func sameShape(a, b *durabletype.Shape) bool {
	if a == nil || b == nil {
		return a == b
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
