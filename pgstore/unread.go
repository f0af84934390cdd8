package pgstore

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// unreadWarnEvery is how often the store logs again that a shape it
// cannot read holds runs back.
const unreadWarnEvery = 5 * time.Minute

// warnUnread logs, at most once per shape every unreadWarnEvery, that run
// rec needs a newer engine: its shape (shapeID) could not be read (err,
// a *durabletype.ShapeError naming the workflow).
func (s *Store) warnUnread(rec *store.Run, shapeID uuid.UUID, err error) {
	if !s.warnDue(shapeID) {
		return
	}
	s.log.Warn("pgstore: run "+rec.ID.String()+" of workflow "+rec.Workflow+" needs a newer engine; left alone",
		slog.String("run", rec.ID.String()), slog.String("workflow", rec.Workflow),
		slog.String("version", rec.Version), slog.Any("error", err))
}

// dropUnread takes out of a claim's tasks those of runs whose shape this
// engine cannot read, and says so (warnUnread). Pinning keeps them from
// such an engine: a newer release's shape has a version of its own,
// unless its author set one by hand and kept it (durable.WithVersion).
// Should one be claimed all the same, it is not run here and not given
// back (this engine would claim it again at once): it stays RUNNING
// under this claim until the leader rescues it, as a lost attempt. When
// the shapes cannot be loaded, claimed is returned as it is, for
// completeClaims to report; else with the shapes it read, for
// completeClaims to use rather than look them up again.
func (s *Store) dropUnread(ctx context.Context, claimed []*store.ClaimedTask, shapeOf []uuid.UUID, idxs []int) ([]*store.ClaimedTask, []uuid.UUID, []int, map[uuid.UUID]*dag.Compiled) {
	shapes, unread, err := s.shapesFor(ctx, s.pool, shapeOf)
	if err != nil {
		return claimed, shapeOf, idxs, nil
	}
	if len(unread) == 0 {
		return claimed, shapeOf, idxs, shapes
	}
	var keptC []*store.ClaimedTask
	var keptS []uuid.UUID
	var keptI []int
	for k, c := range claimed {
		if err := unread[shapeOf[k]]; err != nil {
			rec := store.Run{ID: c.RunID, Workflow: c.Workflow, Version: c.Version}
			s.warnUnread(&rec, shapeOf[k], dag.ForRun(err, &rec))
			continue
		}
		keptC, keptS, keptI = append(keptC, c), append(keptS, shapeOf[k]), append(keptI, idxs[k])
	}
	return keptC, keptS, keptI, shapes
}

// warnUnreadSchedule logs, at most once per schedule every
// unreadWarnEvery, that schedule sc needs a newer engine (err).
func (s *Store) warnUnreadSchedule(sc *durabletype.Schedule, err error) {
	if !s.warnDue(sc.ID) {
		return
	}
	s.log.Warn("pgstore: schedule "+sc.Tenant+"/"+sc.Name+" of workflow "+sc.Workflow+" needs a newer engine; left alone",
		slog.String("tenant", sc.Tenant), slog.String("schedule", sc.Name), slog.String("workflow", sc.Workflow), slog.Any("error", err))
}

// warnDue reports whether the warning about key is due (not given in the
// last unreadWarnEvery), and if so notes it given now.
func (s *Store) warnDue(key uuid.UUID) bool {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, seen := s.warned[key]; seen && now.Sub(last) < unreadWarnEvery {
		return false
	}
	s.warned[key] = now
	return true
}
