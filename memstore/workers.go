package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

var _ store.WorkerRegistry = (*Store)(nil)

// RegisterWorker implements store.WorkerRegistry.
func (s *Store) RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := dag.CheckWorker(&p.Worker); err != nil {
		return err
	}
	t := now(p.Now)
	w := p.Worker
	w.Workflows, w.Accepts = slices.Clone(w.Workflows), slices.Clone(w.Accepts)
	w.LastSeen, w.StartedAt, w.Live = t, t, false
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workers == nil {
		s.workers = make(map[string]*store.Worker)
	}
	if old, ok := s.workers[w.ID]; ok && !p.Started {
		w.StartedAt = old.StartedAt
	}
	s.workers[w.ID] = &w
	return nil
}

// RemoveWorker implements store.WorkerRegistry.
func (s *Store) RemoveWorker(ctx context.Context, p *store.RemoveWorkerParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.workers, p.ID)
	return nil
}

// setLeader records who leads now (Lead), with a new term, which it
// returns; "" records that nobody leads.
func (s *Store) setLeader(id string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaderID, s.term = id, 0
	if id != "" {
		s.terms++
		s.term = s.terms
	}
	return s.term
}

// fenced reports why a call with ctx may not write: ctx is done, or it
// carries a leader's term (store.WithTerm) that is not the current
// leadership's (durabletype.ErrNotLeader). Leadership passes on only once
// the leader's duties have returned (Lead), so a check at the start of a
// call holds for the whole call.
func (s *Store) fenced(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	term, ok := store.TermOf(ctx)
	if !ok {
		return nil
	}
	s.mu.Lock()
	current := s.term
	s.mu.Unlock()
	if term != current {
		return fmt.Errorf("memstore: term %d: %w", term, durabletype.ErrNotLeader)
	}
	return nil
}

// ListWorkers implements store.WorkerRegistry. The leader is the worker
// that leads now (Lead), whatever the records say.
func (s *Store) ListWorkers(ctx context.Context, p *store.ListWorkersParams) (*store.ListWorkersResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := now(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &store.ListWorkersResult{Now: t, Workers: make([]store.Worker, 0, len(s.workers))}
	for _, w := range s.workers {
		c := *w
		c.Workflows, c.Accepts = slices.Clone(w.Workflows), slices.Clone(w.Accepts)
		c.Live = dag.WorkerLive(c.LastSeen, t, c.DeadAfter)
		c.Leader = s.leaderID != "" && c.ID == s.leaderID
		res.Workers = append(res.Workers, c)
	}
	slices.SortFunc(res.Workers, func(a, b store.Worker) int { return strings.Compare(a.ID, b.ID) })
	return res, nil
}

// PruneWorkers implements store.WorkerRegistry.
func (s *Store) PruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (*store.PruneWorkersResult, error) {
	if err := s.fenced(ctx); err != nil {
		return nil, err
	}
	t := now(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &store.PruneWorkersResult{}
	for id, w := range s.workers {
		if dag.WorkerPrunable(w.LastSeen, t, w.DeadAfter) {
			delete(s.workers, id)
			res.Deleted++
		}
	}
	return res, nil
}
