package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/internal/core/fairq"
	"github.com/effectivelabs/durable/store"
)

// Priorities in the ready queue. A lane's tasks hold its slots (fair ids),
// and a claim takes slots in id order; the slot of a lane should go to the
// lane's task that outranks the others (fairq.Outranks), whichever slot it
// was placed in. Claims pass over a row whose lane holds a row of a higher
// priority (claim, in sql/ready.sql); reorderLanes, run before a claim whenever rows
// above the default priority are ready, gives the head of the queue's
// slots to the tasks that outrank in their lanes, moving the tasks they
// displace to the slots they held. A lane keeps its slots, so fairness
// between tenants is what it was; among a lane's tasks of one priority the
// displaced one goes to a later slot.
//
// A claim can take a row above the default priority that reorderLanes has
// not moved to its lane's head (it was queued after this store's last
// claim, which saw none, so the claim did not reorder first; or queued
// between the reorder and the claim): the claim passes over the lane's
// lower rows and takes it in its own slot. displaceClaimed then completes
// the rule: the lane's lowest lower row, whose slot the claimed one
// should have taken, moves to the claimed one's slot.
//
// Without priorities this costs a probe of the empty partial index per
// claim statement and per candidate row.
//
// Priorities rank the tasks of one version of a workflow in a lane (its
// runs pinned to that version): a task of a version the claimer does not
// serve never holds back one of a version it serves.

type readyRow struct {
	ctid     pgtype.TID
	id       int64
	workflow string
	version  string
	tenant   string
	priority int
}

// prioLane is the part of a lane whose tasks priorities rank: those of one
// version.
type prioLane struct{ workflow, version, tenant string }

// reorderLanes reorders the lanes at the head of the queue of workflows
// (of the versions queues names, as a claim), limit rows deep, in a
// transaction of its own.
func (s *Store) reorderLanes(ctx context.Context, workflows, queues []string, limit int) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.q.genericPlans); err != nil {
			return err
		}
		head, err := scanReady(tx.Query(ctx, s.q.reorderHead, workflows, limit, queues))
		if err != nil {
			return err
		}
		lanes := map[prioLane][]readyRow{}
		var keys []prioLane
		for _, r := range head {
			k := prioLane{r.workflow, r.version, r.tenant}
			if lanes[k] == nil {
				keys = append(keys, k)
			}
			lanes[k] = append(lanes[k], r)
		}
		wfs, vers, tenants, ns := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys)), make([]int32, len(keys))
		for i, k := range keys {
			wfs[i], vers[i], tenants[i], ns[i] = k.workflow, k.version, k.tenant, int32(len(lanes[k]))
		}
		best, err := scanReady(tx.Query(ctx, s.q.reorderBest, wfs, tenants, ns, vers))
		if err != nil {
			return err
		}
		if len(best) == 0 && len(head) < limit {
			// No lane at the head has a task above the default priority,
			// and the head is the whole queue: nothing to reorder until a
			// claim sees such tasks again.
			s.priorities.Store(false)
		}
		for _, r := range best {
			k := prioLane{r.workflow, r.version, r.tenant}
			if !slices.ContainsFunc(lanes[k], func(x readyRow) bool { return x.id == r.id }) {
				lanes[k] = append(lanes[k], r)
			}
		}
		// Each lane's slots at the head go by the rule of priorities
		// (fairq.Displace).
		var move []pgtype.TID
		newID := map[int64]int64{} // old id -> new id
		for i, k := range keys {
			lane := make([]fairq.Queued, len(lanes[k]))
			for j, r := range lanes[k] {
				lane[j] = fairq.Queued{ID: r.id, Priority: r.priority}
			}
			moves := fairq.Displace(lane, int(ns[i]))
			for _, r := range lanes[k] {
				if to, ok := moves[r.id]; ok {
					newID[r.id] = to
					move = append(move, r.ctid)
				}
			}
		}
		if len(move) == 0 {
			return nil
		}
		rows, err := tx.Query(ctx, s.q.reorderTake, move)
		if err != nil {
			return err
		}
		var (
			ids      []int64
			runs     [][16]byte
			names    []string
			wfs2     []string
			vers2    []string
			tenants2 []string
			ats      []time.Time
			prios    []int16
			untils   []pgtype.Timestamptz
		)
		for rows.Next() {
			var id int64
			var run [16]byte
			var name, wf, tenant, version string
			var at time.Time
			var prio int16
			var until pgtype.Timestamptz
			if err := rows.Scan(&id, &run, &name, &wf, &tenant, &at, &prio, &until, &version); err != nil {
				rows.Close()
				return err
			}
			nid, ok := newID[id]
			if !ok {
				rows.Close()
				return fmt.Errorf("pgstore: reorder: row %d has no new id", id)
			}
			ids, runs, names, wfs2, tenants2, ats, prios = append(ids, nid), append(runs, run), append(names, name),
				append(wfs2, wf), append(tenants2, tenant), append(ats, at), append(prios, prio)
			untils, vers2 = append(untils, until), append(vers2, version)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.q.reorderPut, ids, runs, names, wfs2, tenants2, ats, prios, untils, vers2)
		return err
	})
}

func scanReady(rows pgx.Rows, err error) ([]readyRow, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []readyRow
	for rows.Next() {
		var r readyRow
		var prio int16
		if err := rows.Scan(&r.ctid, &r.id, &r.workflow, &r.version, &r.tenant, &prio); err != nil {
			return nil, err
		}
		r.priority = int(prio)
		out = append(out, r)
	}
	return out, rows.Err()
}

// displaceClaimed moves, for each claimed task above the default priority
// (prios, by claim), the lowest row of its lane below it and of a lower
// priority to its slot (displaceAfterClaim): the task that the claimed one
// displaces by the rule of priorities (fairq.Displace), when no reorder
// put the claimed one at the head of its lane first. Claims are taken in
// token (slot) order, as the rule takes slots.
func (s *Store) displaceClaimed(ctx context.Context, q querier, claimed []*store.ClaimedTask, prios []int, now pgtype.Timestamptz) error {
	for i, c := range claimed {
		if prios[i] <= 0 {
			continue
		}
		if _, err := q.Exec(ctx, s.q.displaceAfterClaim, c.Workflow, c.Tenant, c.Version, c.Token, int16(prios[i]), now); err != nil {
			return fmt.Errorf("displace after claim: %w", err)
		}
	}
	return nil
}
