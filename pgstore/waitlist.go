package pgstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

var _ store.WaitLister = (*Store)(nil)

// ListWaits implements store.WaitLister: one statement (listWaits) for
// every run, through the primary key of tasks.
func (s *Store) ListWaits(ctx context.Context, p *store.ListWaitsParams) (map[uuid.UUID][]store.WaitingTask, error) {
	out := map[uuid.UUID][]store.WaitingTask{}
	if len(p.RunIDs) == 0 {
		return out, nil
	}
	tenant := pgtype.Text{String: p.Tenant, Valid: p.Tenant != ""}
	rows, err := s.pool.Query(ctx, s.q.listWaits, u16(p.RunIDs), tenant)
	if err != nil {
		return nil, classify(fmt.Errorf("pgstore: list waits: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var w store.WaitingTask
		var kind, state string
		var due pgtype.Timestamptz
		var child pgtype.UUID
		if err := rows.Scan(p16(&id), &w.Name, &kind, &state, &w.Attempt, &due, &w.WaitKey, &child, &w.Items, &w.Left); err != nil {
			return nil, fmt.Errorf("pgstore: list waits: %w", err)
		}
		w.Kind, w.State, w.DueAt = durabletype.TaskKind(kind), durabletype.TaskState(state), tm(due)
		if child.Valid {
			w.Child = child.Bytes
		}
		out[id] = append(out[id], w)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("pgstore: list waits: %w", err))
	}
	return out, nil
}
