package cronslot

import (
	"time"

	"github.com/effectivelabs/durable/durabletype"
)

// Pause decides what pausing (paused true) or resuming schedule sc at now
// does to its record, for PauseSchedule in every store: it returns the
// record to write, or nil when the schedule is already so (nothing
// changes, not even UpdatedAt). A pause clears the next slot and keeps the
// error (a broken schedule stays broken while paused); a resume takes the
// first slot after now and clears the error, so that a resume mends a
// broken schedule whose expression parses again. The error of a resume is
// NextAfter's: the expression no longer parses. The store writes the
// record's Paused, NextAt, Error and UpdatedAt, and wakes the schedule
// loop when it is not paused.
func Pause(sc *durabletype.Schedule, paused bool, now time.Time) (*durabletype.Schedule, error) {
	if sc.Paused == paused {
		return nil, nil
	}
	row := *sc
	row.Paused, row.UpdatedAt = paused, now
	if paused {
		row.NextAt = time.Time{}
		return &row, nil
	}
	next, err := NextAfter(sc, now)
	if err != nil {
		return nil, err
	}
	row.NextAt, row.Error = next, ""
	return &row, nil
}
