package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

var _ store.Versioner = (*Store)(nil)

// ListVersions implements store.Versioner, from the shapes table (a shape
// row is kept while a run uses it, and for shapeGrace after).
func (s *Store) ListVersions(ctx context.Context, p *store.ListVersionsParams) (*store.ListVersionsResult, error) {
	wf := pgtype.Text{String: p.Workflow, Valid: p.Workflow != ""}
	rows, err := s.pool.Query(ctx, s.q.listVersions, wf)
	if err != nil {
		return nil, classify(fmt.Errorf("pgstore: list versions: %w", err))
	}
	recs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.VersionRecord, error) {
		var v store.VersionRecord
		var js []byte
		if err := row.Scan(&v.Workflow, &v.Version, &js, &v.RecordedAt); err != nil {
			return v, err
		}
		v.Shape = &durabletype.Shape{}
		if err := json.Unmarshal(js, v.Shape); err != nil {
			return v, fmt.Errorf("shape of workflow %s: %w", dag.Quote(v.Workflow), err)
		}
		v.RecordedAt = v.RecordedAt.UTC()
		return v, nil
	})
	if err != nil {
		return nil, classify(fmt.Errorf("pgstore: list versions: %w", err))
	}
	return &store.ListVersionsResult{Versions: recs}, nil
}
