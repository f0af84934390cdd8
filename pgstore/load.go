package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/store"
)

// runRow is a locked run as loaded for a transition.
type runRow struct {
	rec     store.Run
	shapeID uuid.UUID
}

// loader loads runs for a transition: it locks their rows in id order, then
// reads their tasks, in the same round trip.
type loader struct {
	recs  []runRow
	tasks map[uuid.UUID][]store.Task
	cols  map[uuid.UUID][]eventCols
	// eventBase and clock are read after the locks are taken.
	eventBase int64
	clock     time.Time
}

func (l *loader) queue(q *queries, b *pgx.Batch, ids []uuid.UUID, lockReady bool) {
	l.tasks = make(map[uuid.UUID][]store.Task, len(ids))
	l.cols = make(map[uuid.UUID][]eventCols, len(ids))
	if len(ids) > 0 {
		l.queueRuns(q, b, ids, lockReady)
	}
	b.Queue(q.eventBlock).QueryRow(func(row pgx.Row) error {
		var block int64
		if err := row.Scan(&block, &l.clock); err != nil {
			return err
		}
		l.eventBase = block * eventBlockSize
		return nil
	})
}

func (l *loader) queueRuns(q *queries, b *pgx.Batch, ids []uuid.UUID, lockReady bool) {
	b.Queue(q.lockRuns, u16(ids)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var rr runRow
			var fin, deadline pgtype.Timestamptz
			var status string
			var prio int16
			if err := rows.Scan(p16(&rr.rec.ID), &rr.rec.Workflow, &rr.rec.Tenant, p16(&rr.shapeID), &status,
				&rr.rec.FailedStep, &rr.rec.Error, &rr.rec.CreatedAt, &fin, &prio, &deadline); err != nil {
				return err
			}
			rr.rec.Status = store.RunStatus(status)
			rr.rec.FinishedAt, rr.rec.Deadline, rr.rec.Priority = tm(fin), tm(deadline), int(prio)
			l.recs = append(l.recs, rr)
		}
		return rows.Err()
	})
	if lockReady {
		// Waits for claims holding these rows; a new statement then sees
		// their commits when it loads the tasks.
		b.Queue(q.lockReady, u16(ids))
	}
	b.Queue(q.loadTasks, u16(ids)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var t store.Task
			var idx int32
			var kind, state string
			var due, start, fin, qAt, beat, timeout pgtype.Timestamptz
			var ec eventCols
			if err := rows.Scan(p16(&t.RunID), &t.Name, &idx, &kind, &state, &t.Attempt, &t.Token, &t.Worker,
				&due, &t.Error, &start, &fin, &ec.qID, &qAt, &ec.qAttempt, &ec.sID, &ec.cID, &beat, &timeout, &t.ConcurrencyKey, &t.RateKey); err != nil {
				return err
			}
			t.Kind, t.State = store.TaskKind(kind), store.TaskState(state)
			t.DueAt, t.StartedAt, t.FinishedAt, t.HeartbeatAt, t.TimeoutAt = tm(due), tm(start), tm(fin), tm(beat), tm(timeout)
			ec.qAt, ec.attempt, ec.startedAt, ec.finishedAt = tm(qAt), t.Attempt, t.StartedAt, t.FinishedAt
			l.tasks[t.RunID] = append(l.tasks[t.RunID], t)
			l.cols[t.RunID] = append(l.cols[t.RunID], ec)
		}
		return rows.Err()
	})
}

// build wraps the loaded runs for the core, in id order.
func (l *loader) build(ctx context.Context, s *Store, q querier, c *change) error {
	ids := make([]uuid.UUID, len(l.recs))
	for i := range l.recs {
		ids[i] = l.recs[i].shapeID
	}
	shapes, err := s.shapesFor(ctx, q, ids)
	if err != nil {
		return err
	}
	for i := range l.recs {
		rr := &l.recs[i]
		r, err := dag.Load(rr.rec, shapes[rr.shapeID], l.tasks[rr.rec.ID])
		if err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
		c.load(r, l.cols[rr.rec.ID])
	}
	c.eventBase = l.eventBase
	return nil
}
