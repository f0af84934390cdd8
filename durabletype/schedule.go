package durabletype

import (
	"time"

	"github.com/google/uuid"
)

// Schedule is a stored schedule.
type Schedule struct {
	ID       uuid.UUID
	Tenant   string
	Name     string
	Workflow string
	// Input is every run's encoded input.
	Input []byte
	// Cron is the cron expression; TimeZone the IANA zone it is read in
	// ("" or "UTC" for UTC).
	Cron     string
	TimeZone string
	// Shape is the workflow's DAG when the schedule was created; runs are
	// created with it unless the leader has the workflow registered (see
	// FireSchedulesParams.Shapes).
	Shape  *Shape
	Paused bool
	// NextAt is the next slot to fire; zero while paused, or when the
	// schedule is broken (see Error).
	NextAt time.Time
	// LastSlot is the last slot fired, LastRunID its run; zero before the
	// first.
	LastSlot  time.Time
	LastRunID uuid.UUID
	// Error says why the schedule fires nothing any more (its stored
	// expression no longer parses); empty when it is healthy.
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Declared is set on a schedule declared in code (ScheduleDeclarer),
	// and DeclaredPaused is the paused state its declaration says, which
	// Paused follows whenever the declaration changes (an operator's pause
	// or resume holds until then). A schedule created with CreateSchedule
	// is never declared, and declarations never touch it.
	Declared       bool
	DeclaredPaused bool
}

// ScheduleKey names a schedule.
type ScheduleKey struct {
	Tenant string
	Name   string
}
