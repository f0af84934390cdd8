package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/store"
)

// FinishTasks implements store.Store. Outcomes are applied in order; several
// outcomes of one run are applied to the run loaded once.
func (s *Store) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	res := make([]store.FinishResult, len(p.Outcomes))
	if len(p.Outcomes) == 0 {
		return res, nil
	}
	ids := make([]uuid.UUID, 0, len(p.Outcomes))
	seen := make(map[uuid.UUID]bool, len(p.Outcomes))
	for k := range p.Outcomes {
		if id := p.Outcomes[k].Task.RunID; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	err := retryRaced(func(lockReady bool) error {
		return s.transition(ctx, &plan{
			now:       nowOf(p.Now),
			ids:       ids,
			lockReady: lockReady,
			apply: func(_ context.Context, _ querier, c *change) error {
				for k := range p.Outcomes {
					o := p.Outcomes[k]
					r := c.byID[o.Task.RunID]
					i, ok := 0, false
					if r != nil {
						i, ok = r.Shape.Index(o.Task.Step)
					}
					if !ok || i >= len(r.Tasks) {
						res[k].Status = store.FinishStale
						continue
					}
					res[k].Status = r.Finish(i, &o, c.now)
					c.record(r)
				}
				return nil
			},
		})
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Heartbeat implements store.Store: it records the worker's heartbeat and
// checks its claims with dag.Run.Current, in one round trip.
func (s *Store) Heartbeat(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	type found struct {
		idx     int
		state   store.TaskState
		token   int64
		status  store.RunStatus
		shapeID uuid.UUID
	}
	byOrd := make(map[int64]found, len(p.Tasks))
	b := &pgx.Batch{}
	b.Queue(s.q.genericPlans)
	if len(p.Tasks) > 0 {
		runs := make([]uuid.UUID, len(p.Tasks))
		names := make([]string, len(p.Tasks))
		tokens := make([]int64, len(p.Tasks))
		for i, ref := range p.Tasks {
			runs[i], names[i], tokens[i] = ref.RunID, ref.Step, ref.Token
		}
		b.Queue(s.q.heartbeatTasks, u16(runs), names, tokens, stamp(nowOf(p.Now))).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var ord int64
				var f found
				var idx int32
				var state, status string
				if err := rows.Scan(&ord, &idx, &state, &f.token, &status, p16(&f.shapeID)); err != nil {
					return err
				}
				f.idx, f.state, f.status = int(idx), store.TaskState(state), store.RunStatus(status)
				byOrd[ord] = f
			}
			return rows.Err()
		})
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("pgstore: heartbeat: %w", err)
	}
	var shapeIDs []uuid.UUID
	for _, f := range byOrd {
		shapeIDs = append(shapeIDs, f.shapeID)
	}
	shapes, err := s.shapesFor(ctx, s.pool, shapeIDs)
	if err != nil {
		return nil, err
	}
	res := &store.HeartbeatResult{}
	for i, ref := range p.Tasks {
		f, ok := byOrd[int64(i+1)]
		if !ok || !current(shapes[f.shapeID], f.status, f.idx, f.state, f.token, ref.Token) {
			res.Lost = append(res.Lost, ref)
		}
	}
	return res, nil
}

// FireTimers implements store.Store: the earliest due timers first (ties by
// run id, then shape order), each re-checked by dag.Run.Wake once its run is
// locked.
func (s *Store) FireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
	res := &store.FireTimersResult{}
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // LIMIT NULL: no limit
	}
	err := retryRaced(func(lockReady bool) error {
		*res = store.FireTimersResult{}
		type due struct {
			run uuid.UUID
			idx int
		}
		var fire []due
		var next pgtype.Timestamptz
		return s.transition(ctx, &plan{
			now:       nowOf(p.Now),
			lockReady: lockReady,
			pick: func(b *pgx.Batch) {
				b.Queue(s.q.dueTimers, stamp(nowOf(p.Now)), nullLimit(limit)).Query(func(rows pgx.Rows) error {
					for rows.Next() {
						var d due
						var idx int32
						if err := rows.Scan(p16(&d.run), &idx); err != nil {
							return err
						}
						d.idx = int(idx)
						fire = append(fire, d)
					}
					return rows.Err()
				})
			},
			picked: func() []uuid.UUID {
				ids := make([]uuid.UUID, 0, len(fire))
				for _, d := range fire {
					ids = append(ids, d.run)
				}
				return distinct(ids)
			},
			apply: func(_ context.Context, _ querier, c *change) error {
				for _, d := range fire {
					r := c.byID[d.run]
					if r == nil || d.idx >= len(r.Tasks) {
						continue
					}
					if r.Wake(d.idx, c.now) {
						res.Fired++
					}
					c.record(r)
				}
				return nil
			},
			extra: func(b *pgx.Batch, c *change) {
				b.Queue(s.q.nextTimer).QueryRow(func(row pgx.Row) error {
					if err := row.Scan(&next); err != nil {
						return err
					}
					if next.Valid {
						res.HasNext = true
						res.Next = max(next.Time.Sub(c.now), 0)
					}
					return nil
				})
			},
		})
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// RescueTasks implements store.Store. Candidates are RUNNING tasks whose
// worker's last sign of life (claim or heartbeat) is DeadAfter old, in run
// id and shape order; once their runs are locked each is re-checked against
// a fresh read of its worker's heartbeat before dag.Run.Rescue.
func (s *Store) RescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	// The leader's periodic pass is also the fallback for promoting tasks
	// whose "incoming" notification was lost.
	if _, err := s.promote(ctx); err != nil {
		return nil, err
	}
	res := &store.RescueTasksResult{}
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	err := retryRaced(func(lockReady bool) error {
		res.Rescued = nil
		type cand struct {
			run   uuid.UUID
			idx   int
			token int64
		}
		var dead []cand
		return s.transition(ctx, &plan{
			now:       nowOf(p.Now),
			lockReady: lockReady,
			pick: func(b *pgx.Batch) {
				// Claimers' frontier rows below the highest are obsolete.
				b.Queue(s.q.pruneFrontier)
				// Times are whole microseconds, so "now - last >= DeadAfter"
				// is "last <= now - DeadAfter rounded up to a microsecond".
				micros := (p.DeadAfter + time.Microsecond - 1) / time.Microsecond
				b.Queue(s.q.deadTasks, stamp(nowOf(p.Now)), int64(micros), nullLimit(limit)).Query(func(rows pgx.Rows) error {
					for rows.Next() {
						var d cand
						var idx int32
						if err := rows.Scan(p16(&d.run), &idx, &d.token); err != nil {
							return err
						}
						d.idx = int(idx)
						dead = append(dead, d)
					}
					return rows.Err()
				})
			},
			picked: func() []uuid.UUID {
				ids := make([]uuid.UUID, 0, len(dead))
				for _, d := range dead {
					ids = append(ids, d.run)
				}
				return distinct(ids)
			},
			apply: func(ctx context.Context, tx querier, c *change) error {
				// The candidates' tasks were loaded after their runs were
				// locked: re-check them with their latest heartbeats.
				for _, d := range dead {
					r := c.byID[d.run]
					if r == nil || d.idx >= len(r.Tasks) {
						continue
					}
					task := r.Tasks[d.idx]
					if task.State != store.TaskRunning || task.Token != d.token {
						continue
					}
					last := task.StartedAt
					if task.HeartbeatAt.After(last) {
						last = task.HeartbeatAt
					}
					if c.now.Sub(last) < p.DeadAfter {
						continue
					}
					msg := fmt.Sprintf("worker %s lost: no heartbeat for %s", task.Worker, p.DeadAfter)
					if r.Rescue(d.idx, msg, p.Rand, c.now) {
						res.Rescued = append(res.Rescued, store.TaskRef{RunID: d.run, Step: task.Name, Token: task.Token})
					}
					c.record(r)
				}
				return nil
			},
		})
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// nullLimit turns a negative limit into SQL NULL (LIMIT NULL: no limit).
func nullLimit(n int) pgtype.Int8 {
	if n < 0 {
		return pgtype.Int8{}
	}
	return pgtype.Int8{Int64: int64(n), Valid: true}
}

func distinct(ids []uuid.UUID) []uuid.UUID {
	seen := make(map[uuid.UUID]bool, len(ids))
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
