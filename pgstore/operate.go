package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// What operators do with runs: list, cancel, replay, count and prune.

// ActOnRuns implements store.Store: the runs are locked, with their ready
// rows (an action may change any task of a run, and an upgrade rewrites
// the version of its queue rows: no claim may take one meanwhile), the
// core applies the action (dag.Change.Act), and the change is written in
// the same transaction. Engines running the steps of cancelled runs are
// notified on commit.
func (s *Store) ActOnRuns(ctx context.Context, p *store.ActOnRunsParams) ([]store.RunActionResult, error) {
	var out []store.RunActionResult
	var settled []store.SettledRun
	err := retryRaced(func(bool) error {
		settled = settled[:0]
		return s.transition(ctx, &plan{
			now:       nowOf(p.Now),
			ids:       distinct(slices.Clone(p.IDs)),
			lockReady: true,
			settled:   &settled,
			apply: func(c *change) error {
				before := map[uuid.UUID]store.Run{}
				for id, r := range c.byID {
					if r.Rec.Settled() {
						before[id] = r.Rec
					}
				}
				var err error
				out, err = c.Act(p, func(id uuid.UUID) *dag.Run { return c.byID[id] })
				if err != nil {
					return fmt.Errorf("pgstore: %w", err)
				}
				c.uncount(before)
				return nil
			},
		})
	})
	if err != nil {
		return nil, classify(err)
	}
	if len(out) > 0 {
		out[0].Settled = settled
	}
	return out, nil
}

// uncount notes the runs that settled before an action (before) and
// settle no more, or settled anew, after it (a replay): their settlement
// is counted out of run_counts, so that the stats count each run once,
// under its current status.
func (c *change) uncount(before map[uuid.UUID]store.Run) {
	for id, old := range before {
		r := c.byID[id]
		if r == nil || (r.Rec.FinishedAt.Equal(old.FinishedAt) && r.Rec.Status == old.Status) {
			continue
		}
		if c.uncounted == nil {
			c.uncounted = map[dag.RunCountKey]int64{}
		}
		c.uncounted[dag.SettledCount(&old)]++
	}
}

// ListRuns implements store.Store. The query is built for the filter, so
// that each kind of filter is planned (and cached) with the index that fits
// it, walked newest first by keyset on (created_at, id): the partial
// indexes on unsuccessful for unsuccessful runs, and otherwise the index on
// (created_at, id) led by the tenant or the workflow when the filter names
// one, or the index of idempotency keys when it names a key (migration
// 015). Runs in flight are the exception: they are found from the queues
// (inflightRuns), read by key and sorted, at a cost that grows with the
// work in flight, not with the runs kept. The input filter is not indexed:
// it is checked (input_json(input) @> filter) on the runs the rest of the
// query walks, until the page is full.
func (s *Store) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.ListRunsResult, error) {
	sql, args, inflight, err := s.listQuery(p)
	if err != nil {
		return nil, err
	}
	limit := max(p.Limit, 1)
	res := &store.ListRunsResult{}
	b := &pgx.Batch{}
	if inflight {
		b.Queue(s.q.queuePlans) // sorting the runs in flight is the plan
	} else {
		b.Queue(s.q.listPlans)
	}
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var r durabletype.RunSummary
			var status string
			var fin pgtype.Timestamptz
			var parent pgtype.UUID
			if err := rows.Scan(p16(&r.ID), &r.Workflow, &r.Tenant, &status, &r.FailedStep, &r.Error, &r.CreatedAt, &fin,
				&parent, &r.ParentStep, &r.Version); err != nil {
				return err
			}
			if parent.Valid {
				r.ParentID = parent.Bytes
			}
			r.Status, r.FinishedAt = durabletype.RunStatus(status), tm(fin)
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
// here), so that the planner can match the partial indexes. What a status
// filter lets the query use follows from what the statuses mean: when
// every status asked for is in flight (durabletype.RunStatus.InFlight),
// the runs are found from the queues (inflight reports that query, which
// sorts them); when every one is unsuccessful (Unsuccessful), the partial
// indexes on unsuccessful serve it; otherwise the indexes on creation.
func (s *Store) listQuery(p *store.ListRunsParams) (sql string, args []any, inflight bool, err error) {
	var conds []string
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	f := &p.Filter
	every := func(pred func(durabletype.RunStatus) bool) bool {
		return len(f.Statuses) > 0 && !slices.ContainsFunc(f.Statuses, func(st durabletype.RunStatus) bool { return !pred(st) })
	}
	var lits []string
	for _, st := range f.Statuses {
		if !st.Known() {
			return "", nil, false, fmt.Errorf("pgstore: list runs: unknown status %s", dag.Quote(string(st)))
		}
		lits = append(lits, "'"+string(st)+"'")
	}
	inflight, unsuccessful := every(durabletype.RunStatus.InFlight), every(durabletype.RunStatus.Unsuccessful)
	from := pgx.Identifier{s.schema, "runs"}.Sanitize() + " r"
	if inflight {
		// A run in flight has not settled: it holds a row in a queue (a
		// task ready, parked, due, running or waiting), so it is among the
		// runs in flight (inflightRuns), filtered by tenant as they are
		// found, then read by key alone (the other conditions apply
		// outside, so that no index of runs can serve them: OFFSET 0 keeps
		// them and the list order out) and sorted. No plan walks the runs
		// kept looking for those in flight.
		tenant := "NULL"
		if f.Tenant != "" {
			tenant = arg(f.Tenant)
		}
		from = "(SELECT * FROM " + from + " WHERE r.id = ANY (ARRAY (" + render(s.schema, inflightRuns(tenant)) + ")) OFFSET 0) r"
	} else if f.Tenant != "" {
		conds = append(conds, "r.tenant = "+arg(f.Tenant))
	}
	if f.Workflow != "" {
		conds = append(conds, "r.workflow = "+arg(f.Workflow))
	}
	if f.Version != "" {
		conds = append(conds, "r.version = "+arg(f.Version))
	}
	if f.Parent != uuid.Nil {
		conds = append(conds, "r.parent_id = "+arg([16]byte(f.Parent))+"::uuid")
	}
	if f.TopLevel {
		// No index leads with it: the walk of the index that serves the
		// rest skips the child runs it meets.
		conds = append(conds, "r.parent_id IS NULL")
	}
	if f.IdempotencyKey != "" {
		conds = append(conds, "r.idem_key = "+arg(f.IdempotencyKey)) // runs_idem_key_created_idx
	}
	if len(f.InputContains) > 0 {
		// Not indexed (migration 016): checked on the runs the other
		// conditions select, newest first, until the page is full.
		conds = append(conds, pgx.Identifier{s.schema}.Sanitize()+".input_json(r.input) @> "+arg(string(f.InputContains))+"::jsonb")
	}
	if len(lits) > 0 {
		conds = append(conds, "r.status IN ("+strings.Join(lits, ", ")+")")
	}
	if unsuccessful {
		conds = append(conds, "r.unsuccessful")
	}
	if !f.CreatedAfter.IsZero() {
		conds = append(conds, "r.created_at >= "+arg(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		conds = append(conds, "r.created_at < "+arg(f.CreatedBefore))
	}
	if !f.FinishedAfter.IsZero() {
		conds = append(conds, "r.finished_at >= "+arg(f.FinishedAfter))
	}
	if !f.FinishedBefore.IsZero() {
		conds = append(conds, "r.finished_at < "+arg(f.FinishedBefore))
	}
	if p.After != nil {
		conds = append(conds, "(r.created_at, r.id) < ("+arg(p.After.CreatedAt)+", "+arg([16]byte(p.After.ID))+"::uuid)")
	}
	sql = `SELECT r.id, r.workflow, r.tenant, r.status, coalesce(r.failed_step, ''), coalesce(r.error, ''), r.created_at, r.finished_at,
       r.parent_id, coalesce(r.parent_step, ''), r.version FROM ` + from
	if len(conds) > 0 {
		sql += " WHERE " + strings.Join(conds, " AND ")
	}
	sql += " ORDER BY r.created_at DESC, r.id DESC LIMIT " + arg(max(p.Limit, 1)+1)
	return sql, args, inflight, nil
}

// Stats implements store.Store: four queries in one round trip, over the
// ready queue, the timer and running-task indexes, the runs in flight
// (found from those) and the per-minute counts of the window.
func (s *Store) Stats(ctx context.Context, p *store.StatsParams) (*durabletype.Stats, error) {
	type wvt struct{ workflow, version, tenant string }
	queues := map[wvt]*durabletype.QueueStats{}
	queue := func(k wvt) *durabletype.QueueStats {
		q := queues[k]
		if q == nil {
			q = &durabletype.QueueStats{Workflow: k.workflow, Version: k.version, Tenant: k.tenant}
			queues[k] = q
		}
		return q
	}
	st := &durabletype.Stats{}
	tenant := pgtype.Text{String: p.Tenant, Valid: p.Tenant != ""}
	b := &pgx.Batch{}
	b.Queue(s.q.queuePlans)
	b.Queue(s.q.statsReady, tenant).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k wvt
			var n int
			var oldest time.Time
			if err := rows.Scan(&k.workflow, &k.version, &k.tenant, &n, &oldest); err != nil {
				return err
			}
			q := queue(k)
			q.Ready, q.OldestReady = n, oldest
		}
		return rows.Err()
	})
	b.Queue(s.q.statsTasks, tenant).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k wvt
			var waiting, running int
			if err := rows.Scan(&k.workflow, &k.version, &k.tenant, &waiting, &running); err != nil {
				return err
			}
			q := queue(k)
			q.Waiting += waiting
			q.Running += running
		}
		return rows.Err()
	})
	runs := func(settled bool) func(rows pgx.Rows) error {
		return func(rows pgx.Rows) error {
			for rows.Next() {
				c := durabletype.RunCount{Settled: settled}
				var status string
				if err := rows.Scan(&c.Workflow, &c.Version, &c.Tenant, &status, &c.Count); err != nil {
					return err
				}
				c.Status = durabletype.RunStatus(status)
				st.Runs = append(st.Runs, c)
			}
			return rows.Err()
		}
	}
	b.Queue(s.q.statsInflight, tenant).Query(runs(false))
	b.Queue(s.q.statsCounts, tenant, stamp(nowOf(p.Now)), int64(p.Window/time.Microsecond)).Query(runs(true))
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, classify(fmt.Errorf("pgstore: stats: %w", err))
	}
	for _, q := range queues {
		st.Queues = append(st.Queues, *q)
	}
	dag.SortStats(st)
	return st, nil
}

// PruneRuns implements store.Store: one statement deletes the oldest
// settled runs that finished before the cutoff (skipping runs a transition
// holds), their events and, by the trigger on runs, their tasks. When it
// deletes fewer than Limit it also removes the counts of settled runs
// older than the cutoff (dag.CountsExpired), merges the shards of the
// counts of the minutes just closed, and removes the shapes no run uses and
// no store made sure of for shapeGrace.
func (s *Store) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (*store.PruneRunsResult, error) {
	res := &store.PruneRunsResult{}
	limit := max(p.Limit, 0)
	if limit == 0 {
		return res, nil
	}
	dropped, overdue, err := s.maintainHistory(ctx, nowOf(p.Now), p.OlderThan, p.Lazy)
	if err != nil {
		err = s.notLeader(ctx, fmt.Errorf("pgstore: prune runs: the history's periods: %w", err))
		if errors.Is(err, durabletype.ErrNotLeader) || ctx.Err() != nil {
			return nil, classify(err)
		}
		// The periods cannot be kept (a role without DDL rights, the
		// database refusing a change): the settled runs are deleted row
		// by row, as before the periods, rather than kept forever.
		s.warnHistory("durable: the history's periods cannot be created or dropped; settled runs are deleted row by row instead (dead rows for VACUUM to reclaim)",
			"error", err)
		overdue = true
	}
	rows := s.q.pruneRuns
	if p.Lazy && !overdue {
		rows = s.q.pruneRunsDefault
	}
	plans, args := s.plans(ctx)
	b := &pgx.Batch{}
	b.Queue(plans, args...)
	deleted := 0
	b.Queue(rows, stamp(nowOf(p.Now)), int64(p.OlderThan/time.Microsecond), limit).Exec(func(ct pgconn.CommandTag) error {
		deleted = int(ct.RowsAffected())
		return nil
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, classify(s.notLeader(ctx, fmt.Errorf("pgstore: prune runs: %w", err)))
	}
	res.Deleted = dropped + deleted
	if deleted < limit {
		b := &pgx.Batch{}
		b.Queue(plans, args...)
		b.Queue(s.q.pruneCounts, stamp(nowOf(p.Now)), int64(p.OlderThan/time.Microsecond))
		b.Queue(s.q.compactCounts, stamp(nowOf(p.Now)))
		b.Queue(s.q.pruneShapes, int64(shapeGrace/time.Microsecond))
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return nil, classify(s.notLeader(ctx, fmt.Errorf("pgstore: prune counts and shapes: %w", err)))
		}
	}
	return res, nil
}
