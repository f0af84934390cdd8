package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/store"
)

// ClaimTasks implements store.Store. Without a tenant cap it is one
// statement; with one it is a short transaction that takes a transaction
// advisory lock per candidate tenant (skipping tenants another claimer holds),
// counts their RUNNING tasks and claims within the caps.
func (s *Store) ClaimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	claimed, err := s.claimTasks(ctx, p)
	return claimed, classify(err)
}

func (s *Store) claimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	if p.Limit <= 0 || len(p.Workflows) == 0 {
		return nil, nil
	}
	s.promoteIfNeeded(ctx)
	now := stamp(nowOf(p.Now))
	var (
		claimed []*store.ClaimedTask
		shapeOf []uuid.UUID
		idxs    []int
		prios   []int
		err     error
	)
	if s.priorities.Load() {
		if err := s.reorderLanes(ctx, p.Workflows, p.Queues, p.Limit); err != nil {
			return nil, fmt.Errorf("pgstore: claim: reorder by priority: %w", err)
		}
	}
	if p.TenantLimit <= 0 {
		b := &pgx.Batch{}
		b.Queue(s.q.genericPlans)
		b.Queue(s.q.claim, p.Workflows, p.Limit, p.WorkerID, now, p.Queues).Query(func(rows pgx.Rows) error {
			var err error
			claimed, shapeOf, idxs, prios, err = s.scanClaimed(rows, nil)
			return err
		})
		err = s.sendBatch(ctx, s.pool, b).Close()
		if err == nil {
			// The claims committed: a failure here only leaves a task in
			// its slot (an order among equals), not worth losing them for.
			_ = s.displaceClaimed(ctx, s.pool, claimed, prios, now)
		}
	} else {
		claimed, shapeOf, idxs, err = s.claimCapped(ctx, p, now)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim: %w", err)
	}
	if len(claimed) == 0 {
		return nil, nil
	}
	claimed, shapeOf, idxs, shapes := s.dropUnread(ctx, claimed, shapeOf, idxs)
	if len(claimed) == 0 {
		return nil, nil
	}
	if err := s.completeClaimsRetrying(ctx, claimed, shapeOf, idxs, shapes); err != nil {
		// The claims committed but cannot be run without their parents'
		// outputs: give them back now instead of leaving them RUNNING until
		// a rescue counts a failed attempt.
		s.release(context.WithoutCancel(ctx), claimed)
		return nil, err
	}
	for _, c := range claimed {
		if c.Timeout > 0 {
			// The claims set timers (their timeouts): the leader is told,
			// as transitions that set timers tell it. If this is lost, the
			// leader still finds them at its next look (within a minute),
			// and the worker's own context ends the attempt on time.
			_, _ = s.pool.Exec(ctx, s.q.notify, s.channel, []string{string(store.TopicTimer)})
			break
		}
	}
	return claimed, nil
}

// completeBudget bounds how long ClaimTasks keeps trying to complete claims
// that committed when reading their parents' outputs fails transiently (the
// server restarting, say). Until they are returned nobody heartbeats them,
// so it must stay well below any sensible DeadAfter (30s by default).
const completeBudget = 10 * time.Second

// completeClaimsRetrying calls completeClaims until it succeeds, fails for
// good, or completeBudget runs out. A claim that committed is worth keeping:
// giving it back needs the database as much as completing it does, and a
// claim neither completed nor released is only rescued after DeadAfter, as
// a failed attempt of a live worker. shapes, when not nil, are the claims'
// shapes, read already.
func (s *Store) completeClaimsRetrying(ctx context.Context, claimed []*store.ClaimedTask, shapeOf []uuid.UUID, idxs []int, shapes map[uuid.UUID]*dag.Compiled) error {
	deadline := time.Now().Add(completeBudget)
	delay := 50 * time.Millisecond
	for {
		err := s.completeClaims(ctx, claimed, shapeOf, idxs, shapes)
		if err == nil || !transient(err) || time.Now().Add(delay).After(deadline) || !sleep.For(ctx, delay) {
			return err
		}
		delay = min(2*delay, time.Second)
	}
}

// release gives claimed tasks back to the queue without counting the
// attempt, as far as it can; whatever it cannot release is rescued later.
func (s *Store) release(ctx context.Context, claimed []*store.ClaimedTask) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	outs := make([]store.Outcome, len(claimed))
	for i, c := range claimed {
		outs[i] = store.Outcome{Task: c.Ref(), Kind: store.OutcomeRelease}
	}
	_, _ = s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: outs})
}

// scanClaimed reads the rows of a claim statement, and records in
// s.priorities whether ready tasks above the default priority exist (each
// row says it).
func (s *Store) scanClaimed(rows pgx.Rows, err error) (claimed []*store.ClaimedTask, shapeOf []uuid.UUID, idxs []int, prios []int, _ error) {
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		c := &store.ClaimedTask{}
		var idx int32
		var kind string
		var shapeID uuid.UUID
		var prio bool
		var item, priority int32
		if err := rows.Scan(p16(&c.RunID), &c.Step, &idx, &kind, &c.Attempt, &c.Token, &c.Workflow, &c.Version, &c.Tenant,
			&c.Input, p16(&shapeID), &c.FailedStep, &c.Error, &prio, &item, &c.ReadyAt, &c.ClaimedAt, &c.TraceParent, &priority); err != nil {
			return nil, nil, nil, nil, err
		}
		c.Item = int(item)
		c.ReadyAt, c.ClaimedAt = c.ReadyAt.UTC(), c.ClaimedAt.UTC()
		if len(claimed) == 0 {
			s.priorities.Store(prio)
		}
		c.Kind = durabletype.TaskKind(kind)
		if c.Kind != durabletype.KindOnFailure {
			c.FailedStep, c.Error = "", ""
		}
		claimed = append(claimed, c)
		shapeOf = append(shapeOf, shapeID)
		idxs = append(idxs, int(idx))
		prios = append(prios, int(priority))
	}
	return claimed, shapeOf, idxs, prios, rows.Err()
}

// completeClaims fills in what the shapes say (retry policy) and the outputs
// of completed parents (for a map step, its items' outputs). Parent outputs
// never change once written, so reading them after the claim committed is
// safe. shapes, when not nil, are the claims' shapes, read already
// (dropUnread); else they are read here.
func (s *Store) completeClaims(ctx context.Context, claimed []*store.ClaimedTask, shapeOf []uuid.UUID, idxs []int, shapes map[uuid.UUID]*dag.Compiled) error {
	if shapes == nil {
		read, unread, err := s.shapesFor(ctx, s.pool, shapeOf)
		if err != nil {
			return err
		}
		for _, err := range unread { // dropUnread took them out
			return fmt.Errorf("pgstore: claim: %w", err)
		}
		shapes = read
	}
	var pRuns []uuid.UUID
	var pNames []string
	var mRuns []uuid.UUID
	var mSteps, mLo, mHi []string
	var mClaims []int
	want := make(map[uuid.UUID][]int)          // run -> claims needing its parents
	var funcs map[uuid.UUID]*store.ClaimedTask // made for the first function body
	for k, c := range claimed {
		sh := shapes[shapeOf[k]]
		c.Retry = sh.Retry(idxs[k])
		c.Timeout = sh.Timeout(idxs[k])
		switch c.Kind {
		case durabletype.KindItem:
			c.Map = sh.Name(idxs[k])
			continue
		case durabletype.KindFunc:
			if funcs == nil {
				funcs = make(map[uuid.UUID]*store.ClaimedTask)
			}
			funcs[c.RunID] = c
			continue
		}
		for _, pi := range sh.Parents(idxs[k]) {
			if sh.Kind(pi) == durabletype.KindMap {
				prefix := dag.ItemPrefix(sh.Name(pi))
				mRuns, mSteps, mLo, mHi = append(mRuns, c.RunID), append(mSteps, sh.Name(pi)), append(mLo, prefix), append(mHi, upperBound(prefix))
				mClaims = append(mClaims, k)
				continue
			}
			pRuns = append(pRuns, c.RunID)
			pNames = append(pNames, sh.Name(pi))
		}
		if len(sh.Parents(idxs[k])) > 0 {
			want[c.RunID] = append(want[c.RunID], k)
		}
	}
	if len(mRuns) > 0 {
		if err := s.mapOutputs(ctx, claimed, mRuns, mSteps, mLo, mHi, mClaims); err != nil {
			return err
		}
	}
	if len(funcs) > 0 {
		if err := s.funcRecords(ctx, funcs); err != nil {
			return err
		}
	}
	if len(pRuns) == 0 {
		return nil
	}
	rows, err := s.queryRouted(ctx, s.pool, s.q.parentOutputs, u16(pRuns), pNames)
	if err != nil {
		return fmt.Errorf("pgstore: parent outputs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var run uuid.UUID
		var name string
		var out []byte
		if err := rows.Scan(p16(&run), &name, &out); err != nil {
			return fmt.Errorf("pgstore: parent outputs: %w", err)
		}
		for _, k := range want[run] {
			sh := shapes[shapeOf[k]]
			pi, ok := sh.Index(name)
			if !ok || !slices.Contains(sh.Parents(idxs[k]), pi) {
				continue
			}
			c := claimed[k]
			if c.ParentOutputs == nil {
				c.ParentOutputs = make(map[string][]byte)
			}
			c.ParentOutputs[name] = out
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: parent outputs: %w", err)
	}
	return nil
}

// claimCapped claims under a per-tenant cap on RUNNING tasks. Ready rows are
// scanned in fair order with SKIP LOCKED; each newly seen tenant is locked
// with pg_try_advisory_xact_lock (in name order; a tenant another claimer
// holds is skipped) and its RUNNING tasks counted once locked, so that
// concurrent claimers never overshoot the cap. Rows of tenants at their cap
// are passed over, as memstore does.
func (s *Store) claimCapped(ctx context.Context, p *store.ClaimTasksParams, now pgtype.Timestamptz) (
	claimed []*store.ClaimedTask, shapeOf []uuid.UUID, idxs []int, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, s.q.genericPlans); err != nil {
		return nil, nil, nil, err
	}

	room := make(map[string]int) // tenant -> claims left under the cap
	excluded := []string{}       // tenants locked elsewhere or at their cap
	var chosen []pgtype.TID
	after, afterWf := int64(0), ""
	for len(chosen) < p.Limit {
		need := p.Limit - len(chosen)
		type cand struct {
			ctid     pgtype.TID
			id       int64
			workflow string
			tenant   string
		}
		var cands []cand
		rows, err := tx.Query(ctx, s.q.claimCandidate, p.Workflows, excluded, after, afterWf, need, now, p.Queues)
		if err != nil {
			return nil, nil, nil, err
		}
		for rows.Next() {
			var c cand
			if err := rows.Scan(&c.ctid, &c.id, &c.workflow, &c.tenant); err != nil {
				rows.Close()
				return nil, nil, nil, err
			}
			cands = append(cands, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, nil, err
		}
		if len(cands) == 0 {
			break
		}
		after, afterWf = cands[len(cands)-1].id, cands[len(cands)-1].workflow

		// Lock and count the tenants seen for the first time.
		var fresh []string
		for _, c := range cands {
			if _, ok := room[c.tenant]; !ok && !slices.Contains(fresh, c.tenant) && !slices.Contains(excluded, c.tenant) {
				fresh = append(fresh, c.tenant)
			}
		}
		if len(fresh) > 0 {
			slices.Sort(fresh)
			if err := s.lockTenantsForCap(ctx, tx, fresh, p.TenantLimit, room, &excluded); err != nil {
				return nil, nil, nil, err
			}
		}
		for _, c := range cands {
			if len(chosen) == p.Limit {
				break
			}
			if n, ok := room[c.tenant]; ok && n > 0 {
				chosen = append(chosen, c.ctid)
				room[c.tenant] = n - 1
				if n == 1 {
					excluded = append(excluded, c.tenant)
				}
			}
		}
		if len(cands) < need {
			break // the queue is exhausted
		}
	}
	if err := probeRow(tx.QueryRow(ctx, s.q.anyPriority, p.Workflows), &s.priorities); err != nil {
		return nil, nil, nil, err
	}
	if len(chosen) == 0 {
		return nil, nil, nil, tx.Commit(ctx)
	}
	rows, qerr := tx.Query(ctx, s.q.claimIDs, chosen, 0, p.WorkerID, now, p.Workflows)
	claimed, shapeOf, idxs, prios, err := s.scanClaimed(rows, qerr)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := s.displaceClaimed(ctx, tx, claimed, prios, now); err != nil {
		return nil, nil, nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, nil, nil, err
	}
	return claimed, shapeOf, idxs, nil
}

// lockTenantsForCap try-locks tenants and sets their room under the cap;
// tenants it cannot lock or that are at their cap are excluded.
func (s *Store) lockTenantsForCap(ctx context.Context, tx pgx.Tx, names []string, limit int, room map[string]int, excluded *[]string) error {
	keys := make([]int64, len(names))
	for i, n := range names {
		keys[i] = lockKey("tenant", s.schema, n)
	}
	var locked []string
	rows, err := tx.Query(ctx, s.q.tryTenantLocks, names, keys)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var ok bool
		if err := rows.Scan(&name, &ok); err != nil {
			rows.Close()
			return err
		}
		if ok {
			locked = append(locked, name)
		} else {
			*excluded = append(*excluded, name)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(locked) == 0 {
		return nil
	}
	// A new statement, so a new snapshot: it sees every claim committed by
	// the previous holders of these locks.
	running := make(map[string]int, len(locked))
	rows, err = tx.Query(ctx, s.q.runningCounts, locked)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			rows.Close()
			return err
		}
		running[name] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, name := range locked {
		n := dag.TenantRoom(limit, running[name])
		room[name] = n
		if n == 0 {
			*excluded = append(*excluded, name)
		}
	}
	return nil
}

// probeRow stores the result of the anyPriority probe in to.
func probeRow(row pgx.Row, to *atomic.Bool) error {
	var any bool
	if err := row.Scan(&any); err != nil {
		return err
	}
	to.Store(any)
	return nil
}

// mapOutputs fills in the ParentItems of claims whose parents are map
// steps: for each (run, step, name range, claim), the outputs of the
// step's items in item order, if it completed.
func (s *Store) mapOutputs(ctx context.Context, claimed []*store.ClaimedTask, runs []uuid.UUID, steps, lo, hi []string, claims []int) error {
	rows, err := s.queryRouted(ctx, s.pool, s.q.mapOutputs, u16(runs), steps, lo, hi)
	if err != nil {
		return fmt.Errorf("pgstore: map outputs: %w", err)
	}
	defer rows.Close()
	got := make(map[int][][]byte) // ordinality -> outputs
	for rows.Next() {
		var ord int64
		var item int32
		var out []byte
		if err := rows.Scan(&ord, &item, &out); err != nil {
			return fmt.Errorf("pgstore: map outputs: %w", err)
		}
		got[int(ord)-1] = append(got[int(ord)-1], out)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: map outputs: %w", err)
	}
	// A completed map step whose items are all gone cannot be; one with
	// none fanned out to an empty list: the step's state says which, so
	// read it for the steps without rows.
	for n, k := range claims {
		outs, ok := got[n]
		if !ok {
			completed, err := s.completed(ctx, runs[n], steps[n])
			if err != nil {
				return err
			}
			if !completed {
				continue
			}
			outs = [][]byte{}
		}
		c := claimed[k]
		if c.ParentItems == nil {
			c.ParentItems = make(map[string][][]byte)
		}
		c.ParentItems[steps[n]] = outs
	}
	return nil
}

// completed reports whether a task is COMPLETED.
func (s *Store) completed(ctx context.Context, run uuid.UUID, name string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, s.routed(s.q.taskCompleted, [16]byte(run)), [16]byte(run), name).Scan(&ok)
	if err != nil {
		s.forgetPeriods(err) // a period dropped since the store read them
		return false, fmt.Errorf("pgstore: map outputs: %w", err)
	}
	return ok, nil
}

// funcRecords reads the records of the claimed function bodies (their
// runs' items) into their claims. Records never change under a claim but
// by its own outcomes, so reading them after the claim committed is safe.
func (s *Store) funcRecords(ctx context.Context, funcs map[uuid.UUID]*store.ClaimedTask) error {
	ids := make([]uuid.UUID, 0, len(funcs))
	for id := range funcs {
		ids = append(ids, id)
	}
	rows, err := s.queryRouted(ctx, s.pool, s.q.funcRecords, u16(ids))
	if err != nil {
		return fmt.Errorf("pgstore: function records: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t store.Task
		var kind, state string
		var child pgtype.UUID
		if err := rows.Scan(p16(&t.RunID), &t.Name, &kind, &state, &t.Attempt, &t.Output, &t.Error, &child, &t.Item, &t.Input); err != nil {
			return fmt.Errorf("pgstore: function records: %w", err)
		}
		t.Kind, t.State = durabletype.TaskKind(kind), durabletype.TaskState(state)
		if child.Valid {
			t.Child = child.Bytes
		}
		c := funcs[t.RunID]
		c.Records = append(c.Records, t)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: function records: %w", err)
	}
	return nil
}
