package memstore

import (
	"context"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/store"
)

var _ store.WaitLister = (*Store)(nil)

// ListWaits implements store.WaitLister.
func (s *Store) ListWaits(ctx context.Context, p *store.ListWaitsParams) (map[uuid.UUID][]store.WaitingTask, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[uuid.UUID][]store.WaitingTask{}
	for _, id := range p.RunIDs {
		rs, ok := s.runs[id]
		if !ok || (p.Tenant != "" && rs.rec.Tenant != p.Tenant) {
			continue
		}
		if _, done := out[id]; done {
			continue
		}
		for _, t := range rs.tasks { // the steps, in the order of the shape; items apart
			if !store.Waits(t.State, t.DueAt) {
				continue
			}
			out[id] = append(out[id], store.WaitingTask{
				Name: t.Name, Kind: t.Kind, State: t.State, Attempt: t.Attempt, DueAt: t.DueAt,
				WaitKey: t.WaitKey, Child: t.Child, Items: t.Items, Left: t.Left,
			})
		}
	}
	return out, nil
}
