package pgstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/core/fairq"
)

// Fair queuing in PostgreSQL: the lanes table holds each lane's fairq.Lane
// (a tenant's group and last block in one workflow's queue) and the frontier
// table each claimer's fairq.Claimer (its block and the workflows it serves). A transition that enqueues
// locks the lanes it places tasks in (in (workflow, tenant) order: the lock
// order of every transition), reads the frontiers without locking them, and
// places each task with fairq.Lane.Place, as memstore does.

// laneKey names a lane.
type laneKey struct{ workflow, tenant string }

// placement is a change's fair-queue state: lanes holds the locked lanes
// of the enqueued tasks, frontiers the frontier of their workflows, and
// ids the fair id of each task of Change.Enqueued, once placed.
type placement struct {
	lanes     map[laneKey]*laneRow
	frontiers map[string]int64
	ids       []int64
}

// laneRow is a locked lane.
type laneRow struct {
	fairq.Lane
	dirty bool
}

// lanesOf returns the lanes the change enqueues into, sorted.
func (c *change) lanesOf() []laneKey {
	var keys []laneKey
	for _, e := range c.Enqueued {
		keys = append(keys, laneKey{e.R.Rec.Workflow, e.R.Rec.Tenant})
	}
	keys = append(keys, c.promotedLanes()...)
	return sortedLanes(keys)
}

func sortedLanes(keys []laneKey) []laneKey {
	slices.SortFunc(keys, func(a, b laneKey) int {
		if a.workflow != b.workflow {
			if a.workflow < b.workflow {
				return -1
			}
			return 1
		}
		switch {
		case a.tenant < b.tenant:
			return -1
		case a.tenant > b.tenant:
			return 1
		}
		return 0
	})
	return slices.Compact(keys)
}

// queueLaneLock queues the statements that lock lanes (which must be
// sorted) and read their workflows' frontiers.
func (c *change) queueLaneLock(q *queries, b *pgx.Batch, keys []laneKey) {
	if len(keys) == 0 {
		return
	}
	c.lanes = make(map[laneKey]*laneRow, len(keys))
	wfs, tenants := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		wfs[i], tenants[i] = k.workflow, k.tenant
	}
	b.Queue(q.lockLanes, wfs, tenants).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var k laneKey
			var l laneRow
			var last pgtype.Int8
			if err := rows.Scan(&k.workflow, &k.tenant, &l.Group, &last); err != nil {
				return err
			}
			l.Last, l.HasLast = last.Int64, last.Valid
			c.lanes[k] = &l
		}
		return rows.Err()
	})
	c.frontiers = make(map[string]int64)
	b.Queue(q.readFrontiers).Query(func(rows pgx.Rows) error {
		var claimers []fairq.Claimer
		for rows.Next() {
			var cl fairq.Claimer
			if err := rows.Scan(&cl.Block, &cl.Workflows); err != nil {
				return err
			}
			claimers = append(claimers, cl)
		}
		for _, w := range wfs {
			c.frontiers[w] = fairq.Frontiers(claimers, w)
		}
		return rows.Err()
	})
}

// missingLanes returns the lanes of keys that queueLaneLock did not find.
func (c *change) missingLanes(keys []laneKey) []laneKey {
	var out []laneKey
	for _, k := range keys {
		if c.lanes[k] == nil {
			out = append(out, k)
		}
	}
	return out
}

// ensureLanes creates the lanes of missing (and their tenants' groups),
// then locks every lane of keys again. Lanes are created with their runs;
// this covers runs created inside a caller's transaction that enqueue
// before their root is promoted (a sleeping root, say).
func (s *Store) ensureLanes(ctx context.Context, tx querier, c *change, keys, missing []laneKey) error {
	wfs, tenants := make([]string, len(missing)), make([]string, len(missing))
	for i, k := range missing {
		wfs[i], tenants[i] = k.workflow, k.tenant
	}
	names := slices.Clone(tenants)
	slices.Sort(names)
	b := &pgx.Batch{}
	b.Queue(s.q.ensureTenants, slices.Compact(names), [][16]byte{})
	b.Queue(s.q.ensureLanes, wfs, tenants)
	c.queueLaneLock(&s.q, b, keys)
	if err := s.sendBatch(ctx, tx, b).Close(); err != nil {
		return s.createError(err)
	}
	if missing := c.missingLanes(keys); len(missing) > 0 {
		return fmt.Errorf("pgstore: lane of tenant %s in workflow %s is missing", dag.Quote(missing[0].tenant), dag.Quote(missing[0].workflow))
	}
	return nil
}

// placeAll gives every enqueued task its fair id, in the order the core
// enqueued them.
func (c *change) placeAll() error {
	c.ids = make([]int64, len(c.Enqueued))
	for k, e := range c.Enqueued {
		key := laneKey{e.R.Rec.Workflow, e.R.Rec.Tenant}
		l := c.lanes[key]
		if l == nil {
			return fmt.Errorf("pgstore: lane of tenant %s in workflow %s is not locked", dag.Quote(key.tenant), dag.Quote(key.workflow))
		}
		c.ids[k] = l.Place(c.frontiers[key.workflow])
		l.dirty = true
	}
	return nil
}

// queueLaneWrites queues the update of the lanes whose last block moved.
func (c *change) queueLaneWrites(q *queries, b *pgx.Batch) {
	var wfs, tenants []string
	var lasts []int64
	for k, l := range c.lanes {
		if l.dirty {
			wfs, tenants, lasts = append(wfs, k.workflow), append(tenants, k.tenant), append(lasts, l.Last)
		}
	}
	if len(wfs) > 0 {
		b.Queue(q.updateLanes, wfs, tenants, lasts)
	}
}
