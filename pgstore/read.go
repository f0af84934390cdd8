package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, id uuid.UUID) (*store.Run, error) {
	var r store.Run
	var status string
	var fin, deadline pgtype.Timestamptz
	var shapeID uuid.UUID
	var prio int16
	var parent pgtype.UUID
	var pStep, pResult string
	err := s.pool.QueryRow(ctx, s.q.getRun, [16]byte(id)).Scan(p16(&r.ID), &r.Workflow, &r.Tenant, &status, &r.Input,
		&r.FailedStep, &r.Error, &r.CreatedAt, &fin, p16(&shapeID), &r.IdempotencyKey, &prio, &deadline, &parent, &pStep, &pResult, &r.TraceParent, &r.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, durabletype.ErrRunNotFound
	}
	if err != nil {
		return nil, classify(fmt.Errorf("pgstore: get run: %w", err))
	}
	r.Status = durabletype.RunStatus(status)
	r.FinishedAt, r.Deadline, r.Priority = tm(fin), tm(deadline), int(prio)
	r.Parent = parentRef(parent, pStep, pResult)
	shapes, unread, err := s.shapesFor(ctx, s.pool, []uuid.UUID{shapeID})
	if err != nil {
		return nil, classify(err)
	}
	if err := unread[shapeID]; err != nil {
		return nil, fmt.Errorf("pgstore: run %s: %w", id, dag.ForRun(err, &r))
	}
	r.Shape = shapes[shapeID].Shape
	return &r, nil
}

// ListTasks implements store.Store.
func (s *Store) ListTasks(ctx context.Context, id uuid.UUID) ([]*store.Task, error) {
	rows, err := s.pool.Query(ctx, s.q.listTasks, [16]byte(id))
	if err != nil {
		return nil, classify(fmt.Errorf("pgstore: list tasks: %w", err))
	}
	defer rows.Close()
	var out []*store.Task
	for rows.Next() {
		t := &store.Task{}
		var kind, state string
		var due, start, fin, beat, timeout pgtype.Timestamptz
		var child pgtype.UUID
		if err := rows.Scan(p16(&t.RunID), &t.Name, &kind, &state, &t.Attempt, &t.Token, &t.Worker, &due, &t.Output,
			&t.Error, &start, &fin, &beat, &timeout, &t.ConcurrencyKey, &t.RateKey, &t.WaitKey, &child,
			&t.Items, &t.Left, &t.Item, &t.Input, &t.Lost); err != nil {
			return nil, fmt.Errorf("pgstore: list tasks: %w", err)
		}
		if child.Valid {
			t.Child = child.Bytes
		}
		t.Kind, t.State = durabletype.TaskKind(kind), durabletype.TaskState(state)
		t.DueAt, t.StartedAt, t.FinishedAt, t.HeartbeatAt, t.TimeoutAt = tm(due), tm(start), tm(fin), tm(beat), tm(timeout)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list tasks: %w", err)
	}
	if len(out) == 0 { // every run has tasks
		return nil, durabletype.ErrRunNotFound
	}
	return out, nil
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, id uuid.UUID) ([]*durabletype.Event, error) {
	rows, err := s.pool.Query(ctx, s.q.listEvents, [16]byte(id))
	if err != nil {
		return nil, classify(fmt.Errorf("pgstore: list events: %w", err))
	}
	defer rows.Close()
	var out []*durabletype.Event
	for rows.Next() {
		e := &durabletype.Event{}
		var typ string
		var due pgtype.Timestamptz
		if err := rows.Scan(&e.ID, p16(&e.RunID), &e.Step, &typ, &e.Attempt, &e.At, &e.Detail, &due); err != nil {
			return nil, fmt.Errorf("pgstore: list events: %w", err)
		}
		e.Type, e.DueAt = durabletype.EventType(typ), tm(due)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list events: %w", err)
	}
	if len(out) == 0 {
		var ok bool
		if err := s.pool.QueryRow(ctx, s.q.runExists, [16]byte(id)).Scan(&ok); err != nil {
			return nil, fmt.Errorf("pgstore: list events: %w", err)
		}
		if !ok {
			return nil, durabletype.ErrRunNotFound
		}
	}
	return out, nil
}
