package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/store"
)

// What operators do with runs: list, cancel, replay, count and prune.

// CancelRuns implements store.Store: the runs are locked and cancelled by
// dag.Run.Cancel in one transaction, which notifies the engines running
// their steps.
func (s *Store) CancelRuns(ctx context.Context, p *store.CancelRunsParams) ([]store.RunActionResult, error) {
	res, err := s.runAction(ctx, p.Now, p.IDs, p.Tenant, func(r *dag.Run, now time.Time) (dag.Effects, error) {
		return r.Cancel(p.Reason, now)
	})
	return res, classify(err)
}

// ReplayRuns implements store.Store: the runs are locked and replayed by
// dag.Run.Replay in one transaction.
func (s *Store) ReplayRuns(ctx context.Context, p *store.ReplayRunsParams) ([]store.RunActionResult, error) {
	res, err := s.runAction(ctx, p.Now, p.IDs, p.Tenant, func(r *dag.Run, now time.Time) (dag.Effects, error) {
		return r.Replay(p.FromStep, now)
	})
	return res, classify(err)
}

// runAction applies a transition to each run of ids in one transaction; a
// run that does not exist, or belongs to another tenant than tenant (when
// set), is reported ErrRunNotFound and left alone.
func (s *Store) runAction(ctx context.Context, now time.Time, ids []uuid.UUID, tenant string,
	act func(r *dag.Run, now time.Time) (dag.Effects, error)) ([]store.RunActionResult, error) {
	out := make([]store.RunActionResult, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	err := retryRaced(func(lockReady bool) error {
		return s.transition(ctx, &plan{
			now:       nowOf(now),
			ids:       distinct(append([]uuid.UUID(nil), ids...)),
			lockReady: lockReady,
			apply: func(c *change) error {
				for k, id := range ids {
					out[k] = store.RunActionResult{ID: id}
					r := c.byID[id]
					if r == nil || (tenant != "" && r.Rec.Tenant != tenant) {
						out[k].Err = store.ErrRunNotFound
						continue
					}
					fx, err := act(r, c.Now)
					if err != nil {
						out[k].Err = err
						continue
					}
					c.Add(r, fx)
				}
				return nil
			},
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListRuns implements store.Store. The query is built for the filter, so
// that each combination is planned (and cached) with the index that fits
// it: runs_tenant_created_idx for a tenant, the partial indexes for runs in
// flight and for failed or cancelled runs, runs_created_idx otherwise; all
// walked newest first by keyset on (created_at, id).
func (s *Store) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.ListRunsResult, error) {
	sql, args, err := s.listQuery(p)
	if err != nil {
		return nil, err
	}
	limit := max(p.Limit, 1)
	res := &store.ListRunsResult{}
	b := &pgx.Batch{}
	b.Queue(s.q.listPlans)
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var r store.RunSummary
			var status string
			var fin pgtype.Timestamptz
			if err := rows.Scan(p16(&r.ID), &r.Workflow, &r.Tenant, &status, &r.FailedStep, &r.Error, &r.CreatedAt, &fin); err != nil {
				return err
			}
			r.Status, r.FinishedAt = store.RunStatus(status), tm(fin)
			if len(res.Runs) == limit {
				res.More = true
				continue
			}
			res.Runs = append(res.Runs, r)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, classify(fmt.Errorf("pgstore: list runs: %w", err))
	}
	return res, nil
}

// listQuery builds the query of ListRuns: the rule of dag.Matches in SQL.
// Statuses are written into the query (they are a closed set, checked
// here), so that the planner can match the partial indexes.
func (s *Store) listQuery(p *store.ListRunsParams) (string, []any, error) {
	var conds []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	f := &p.Filter
	if f.Tenant != "" {
		conds = append(conds, "tenant = "+arg(f.Tenant))
	}
	if f.Workflow != "" {
		conds = append(conds, "workflow = "+arg(f.Workflow))
	}
	if len(f.Statuses) > 0 {
		var lits []string
		inflight := true
		for _, st := range f.Statuses {
			switch st {
			case store.RunRunning, store.RunCompleted, store.RunFailed, store.RunCancelled:
			default:
				return "", nil, fmt.Errorf("pgstore: list runs: unknown status %s", dag.Quote(string(st)))
			}
			lits = append(lits, "'"+string(st)+"'")
			inflight = inflight && st == store.RunRunning
		}
		conds = append(conds, "status IN ("+strings.Join(lits, ", ")+")")
		if inflight { // a RUNNING run has not settled: runs_inflight_idx
			conds = append(conds, "finished_at IS NULL")
		}
	}
	if !f.CreatedAfter.IsZero() {
		conds = append(conds, "created_at >= "+arg(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		conds = append(conds, "created_at < "+arg(f.CreatedBefore))
	}
	if !f.FinishedAfter.IsZero() {
		conds = append(conds, "finished_at >= "+arg(f.FinishedAfter))
	}
	if !f.FinishedBefore.IsZero() {
		conds = append(conds, "finished_at < "+arg(f.FinishedBefore))
	}
	if p.After != nil {
		conds = append(conds, "(created_at, id) < ("+arg(p.After.CreatedAt)+", "+arg([16]byte(p.After.ID))+"::uuid)")
	}
	sql := `SELECT id, workflow, tenant, status, coalesce(failed_step, ''), coalesce(error, ''), created_at, finished_at FROM ` +
		pgx.Identifier{s.schema, "runs"}.Sanitize()
	if len(conds) > 0 {
		sql += " WHERE " + strings.Join(conds, " AND ")
	}
	sql += " ORDER BY created_at DESC, id DESC LIMIT " + arg(max(p.Limit, 1)+1)
	return sql, args, nil
}

// Stats implements store.Store: four index-driven queries, in one round
// trip, over the ready queue, the timer and running-task indexes, the runs
// in flight and the runs created within the window.
func (s *Store) Stats(ctx context.Context, p *store.StatsParams) (*store.Stats, error) {
	type wt struct{ workflow, tenant string }
	queues := map[wt]*store.QueueStats{}
	queue := func(k wt) *store.QueueStats {
		q := queues[k]
		if q == nil {
			q = &store.QueueStats{Workflow: k.workflow, Tenant: k.tenant}
			queues[k] = q
		}
		return q
	}
	st := &store.Stats{}
	tenant := pgtype.Text{String: p.Tenant, Valid: p.Tenant != ""}
	b := &pgx.Batch{}
	b.Queue(s.q.genericPlans)
	b.Queue(s.q.statsReady, tenant).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k wt
			var n int
			var oldest time.Time
			if err := rows.Scan(&k.workflow, &k.tenant, &n, &oldest); err != nil {
				return err
			}
			q := queue(k)
			q.Ready, q.OldestReady = n, oldest
		}
		return rows.Err()
	})
	b.Queue(s.q.statsTasks, tenant).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k wt
			var waiting, running int
			if err := rows.Scan(&k.workflow, &k.tenant, &waiting, &running); err != nil {
				return err
			}
			q := queue(k)
			q.Waiting += waiting
			q.Running += running
		}
		return rows.Err()
	})
	micros := int64(p.Window / time.Microsecond)
	b.Queue(s.q.statsRuns, tenant, stamp(nowOf(p.Now)), micros).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var c store.RunCount
			var status string
			if err := rows.Scan(&c.Workflow, &c.Tenant, &status, &c.Settled, &c.Count); err != nil {
				return err
			}
			c.Status = store.RunStatus(status)
			st.Runs = append(st.Runs, c)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, classify(fmt.Errorf("pgstore: stats: %w", err))
	}
	for _, q := range queues {
		st.Queues = append(st.Queues, *q)
	}
	sortQueues(st.Queues)
	return st, nil
}

func sortQueues(qs []store.QueueStats) {
	for i := 1; i < len(qs); i++ {
		for j := i; j > 0 && (qs[j].Workflow < qs[j-1].Workflow ||
			(qs[j].Workflow == qs[j-1].Workflow && qs[j].Tenant < qs[j-1].Tenant)); j-- {
			qs[j], qs[j-1] = qs[j-1], qs[j]
		}
	}
}

// PruneRuns implements store.Store: one statement deletes the oldest
// settled runs that finished before the cutoff (skipping runs a transition
// holds), their events, and, through the foreign key, their tasks. When it
// deletes fewer than Limit it also removes the shapes no run uses and no
// store made sure of for shapeGrace.
func (s *Store) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (*store.PruneRunsResult, error) {
	res := &store.PruneRunsResult{}
	limit := max(p.Limit, 0)
	if limit == 0 {
		return res, nil
	}
	b := &pgx.Batch{}
	b.Queue(s.q.genericPlans)
	b.Queue(s.q.pruneRuns, stamp(nowOf(p.Now)), int64(p.OlderThan/time.Microsecond), limit).Exec(func(ct pgconn.CommandTag) error {
		res.Deleted = int(ct.RowsAffected())
		return nil
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, classify(fmt.Errorf("pgstore: prune runs: %w", err))
	}
	if res.Deleted < limit {
		grace := int64(shapeGrace / time.Microsecond)
		if _, err := s.pool.Exec(ctx, s.q.pruneShapes, grace); err != nil {
			return nil, classify(fmt.Errorf("pgstore: prune shapes: %w", err))
		}
	}
	return res, nil
}
