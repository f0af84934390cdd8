package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/store"
)

// Runs created inside a caller's transaction (CreateRunsTx) must not take
// locks the engines need while that transaction is open: a tenant's
// fair-queue row stays locked until commit, and would stall every transition
// that enqueues for the tenant, and with it the engine's recording of
// outcomes for all tenants. So their root tasks are written to the incoming
// table, QUEUED but without fair-queue ids, and promoted to the ready queue
// afterwards by promote, in a short transaction of the store's own.
//
// What prompts a promotion: the caller's commit notifies "incoming" (which
// engines also hear as "ready"), which sets Store.incoming; ClaimTasks
// promotes first whenever it is set. The leader also promotes in every
// rescue pass, in case a notification was lost.

// payloadIncoming is the notification payload of CreateRunsTx.
const payloadIncoming = "incoming"

// promoteBatch is the most incoming tasks promoted in one transaction.
const promoteBatch = 1000

// promoteIfNeeded promotes incoming tasks when some may be waiting. Errors
// leave the flag set, so that the next claim tries again.
func (s *Store) promoteIfNeeded(ctx context.Context) {
	if !s.incoming.Swap(false) {
		return
	}
	n, err := s.promote(ctx)
	if err != nil || n == promoteBatch {
		s.incoming.Store(true)
	}
}

// promote gives fair-queue ids to up to promoteBatch incoming tasks, in the
// order they arrived, and moves them to the ready queue. It returns how many
// it moved.
func (s *Store) promote(ctx context.Context) (int, error) {
	type row struct {
		seq      int64
		runID    [16]byte
		name     string
		workflow string
		tenant   string
		priority int16
		version  string
	}
	var rows []row
	c := newChange(time.Time{})
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		plans, args := s.plans(ctx)
		if _, err := tx.Exec(ctx, plans, args...); err != nil {
			return err
		}
		rs, err := tx.Query(ctx, s.q.takeIncoming, promoteBatch)
		if err != nil {
			return err
		}
		for rs.Next() {
			var r row
			if err := rs.Scan(&r.seq, &r.runID, &r.name, &r.workflow, &r.tenant, &r.priority, &r.version); err != nil {
				rs.Close()
				return err
			}
			rows = append(rows, r)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		// Fair ids in arrival order, placed like a transition's.
		slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.seq, b.seq) })
		keys := make([]laneKey, len(rows))
		for i, r := range rows {
			keys[i] = laneKey{r.workflow, r.tenant}
		}
		keys = sortedLanes(keys)
		b := &pgx.Batch{}
		c.queueLaneLock(&s.q, b, keys)
		if err := s.sendBatch(ctx, tx, b).Close(); err != nil {
			return err
		}
		if missing := c.missingLanes(keys); len(missing) > 0 {
			if err := s.ensureLanes(ctx, tx, c, keys, missing); err != nil {
				return err
			}
		}
		ids := make([]int64, len(rows))
		runs := make([][16]byte, len(rows))
		tasks := make([]string, len(rows))
		wfs := make([]string, len(rows))
		tenants := make([]string, len(rows))
		prios := make([]int16, len(rows))
		versions := make([]string, len(rows))
		for i, r := range rows {
			l := c.lanes[laneKey{r.workflow, r.tenant}]
			l.dirty = true
			ids[i] = l.Place(c.frontiers[r.workflow])
			runs[i], tasks[i], wfs[i], tenants[i], prios[i], versions[i] = r.runID, r.name, r.workflow, r.tenant, r.priority, r.version
		}
		b = &pgx.Batch{}
		c.queueLaneWrites(&s.q, b)
		b.Queue(s.q.insertReady, ids, runs, tasks, wfs, tenants, pgtype.Timestamptz{}, prios, []pgtype.Timestamptz(nil), versions)
		b.Queue(s.q.notify, s.channel, []string{string(store.TopicReady)})
		return s.sendBatch(ctx, tx, b).Close()
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: promote incoming tasks: %w", err)
	}
	return len(rows), nil
}
