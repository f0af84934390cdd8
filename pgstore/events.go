package pgstore

import (
	"errors"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// eventCols are the events of the happy path a task row holds instead of
// the events table: its latest QUEUED event without detail, its latest
// STARTED event (whose time and attempt are the row's started_at and
// attempt) and its COMPLETED event (finished_at, attempt). Zero ids mean
// none. attempt and startedAt are the row's values as loaded.
type eventCols struct {
	qID        int64
	qAt        time.Time
	qAttempt   int
	sID        int64
	cID        int64
	attempt    int
	startedAt  time.Time
	finishedAt time.Time
}

// errTooManyEvents: one call produced more events than an event block holds.
var errTooManyEvents = errors.New("pgstore: too many events in one call")

// eventIDs is a change's event state: eventBase + k is the id of the
// call's k-th event (see docs/design.md, "The event log"); cols holds each
// run's happy-path events kept in task rows, and itemCols those kept in
// the rows of the items the call loaded or created (by run and name), as
// loaded and as changed by the call.
type eventIDs struct {
	eventBase int64
	eventK    int64
	cols      map[*dag.Run][]eventCols
	itemCols  map[itemRef]*eventCols
}

// colsAt returns the happy-path events of task i of r, as loaded and as
// changed by the call.
func (c *eventIDs) colsAt(r *dag.Run, i int) *eventCols {
	if !dag.IsItem(i) {
		cols := c.cols[r]
		for len(cols) <= i {
			cols = append(cols, eventCols{})
		}
		c.cols[r] = cols
		return &cols[i]
	}
	k := itemRef{r.Rec.ID, r.Task(i).Name}
	ec := c.itemCols[k]
	if ec == nil {
		ec = &eventCols{}
		c.itemCols[k] = ec
	}
	return ec
}

// nextEventID returns the id of the call's next event.
func (c *eventIDs) nextEventID() (int64, error) {
	if c.eventK >= eventBlockSize {
		return 0, errTooManyEvents
	}
	id := c.eventBase + c.eventK
	c.eventK++
	return id, nil
}

// placeEvents numbers the call's events and decides where each is stored:
// a QUEUED event without detail and a COMPLETED event go to their task's
// columns, the rest to the events table. An event a column held is moved to
// the events table when a newer one takes its place, and a STARTED event
// when its task goes back to the queue (a retry, rescue or release). It
// returns the rows to insert.
func (c *change) placeEvents() ([]durabletype.Event, error) {
	var rows []durabletype.Event
	for _, r := range c.Runs {
		fx := c.Effects[r]
		c.colsAt(r, len(r.Tasks)-1) // every step has its columns
		for _, i := range fx.Tasks {
			t, ec := r.Task(i), c.colsAt(r, i)
			// A task going back to the queue will be claimed again, which
			// overwrites started_at and attempt: its STARTED event moves to
			// the events table now, so that claims never have to.
			if ec.sID != 0 && (t.State == durabletype.TaskQueued || t.Attempt != ec.attempt || !t.StartedAt.Equal(ec.startedAt)) {
				rows = append(rows, durabletype.Event{ID: ec.sID, RunID: r.Rec.ID, Step: t.Name, Type: durabletype.EventStarted,
					Attempt: ec.attempt, At: ec.startedAt})
				ec.sID = 0
			}
			// A completed task that runs again (a replay, or an on-failure
			// handler run again after a new failure) will overwrite
			// finished_at: its COMPLETED event moves to the events table.
			if ec.cID != 0 && (t.State != durabletype.TaskCompleted || t.Attempt != ec.attempt || !t.FinishedAt.Equal(ec.finishedAt)) {
				rows = append(rows, durabletype.Event{ID: ec.cID, RunID: r.Rec.ID, Step: t.Name, Type: durabletype.EventCompleted,
					Attempt: ec.attempt, At: ec.finishedAt})
				ec.cID = 0
			}
		}
		for k := range fx.Events {
			e := fx.Events[k]
			id, err := c.nextEventID()
			if err != nil {
				return nil, err
			}
			e.ID = id
			i, ok := taskIndex(r, e.Step)
			if !ok {
				rows = append(rows, e) // an item deleted by the call
				continue
			}
			ec := c.colsAt(r, i)
			switch {
			case e.Type == durabletype.EventQueued && e.Detail == "":
				if ec.qID != 0 {
					rows = append(rows, durabletype.Event{ID: ec.qID, RunID: e.RunID, Step: e.Step, Type: durabletype.EventQueued,
						Attempt: ec.qAttempt, At: ec.qAt})
				}
				ec.qID, ec.qAt, ec.qAttempt = id, e.At, e.Attempt
			case e.Type == durabletype.EventCompleted:
				ec.cID = id
			default:
				rows = append(rows, e)
			}
		}
	}
	return rows, nil
}
