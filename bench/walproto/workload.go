package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// A workload replays the engine's transactions on one design: creates
// (insertRuns, insertTasks, insertReady with the lane's lock and update),
// claims (ready.sql claim, or the tasks' claim) and finishes (lockRuns,
// eventBlock, loadTasks, the lanes and insertReady of successors,
// updateTasks, updateRuns, countSettled), in one transaction each, as the
// engine's create, claim and finish do, and keeps the transaction IDs of
// each, so that the WAL is attributed to the operations.
type workload struct {
	c    *config
	d    design
	st   stmts
	dag  bool
	xids map[uint32]string // transaction -> operation
	// counters
	claims, finishes, creates int
	claimed, finished         int
	enqueued, settled         int
}

// The steps of a run: single is one step, "noop"; dag is root -> fan-0..7
// -> join (cmd/durable/internal/workloads).
var dagNames = []string{"root", "fan-0", "fan-1", "fan-2", "fan-3", "fan-4", "fan-5", "fan-6", "fan-7", "join"}

func (w *workload) workflow() string {
	if w.dag {
		return "bench-dag"
	}
	return "bench-noop"
}

func (w *workload) names() []string {
	if w.dag {
		return dagNames
	}
	return []string{"noop"}
}

// parents returns the indexes of the steps idx waits for.
func (w *workload) parents(idx int) []int {
	if !w.dag || idx == 0 {
		return nil
	}
	if idx == 9 {
		return []int{1, 2, 3, 4, 5, 6, 7, 8}
	}
	return []int{0}
}

func stamp(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// xid records the transaction's ID for the operation.
func (w *workload) xid(ctx context.Context, tx pgx.Tx, op string) error {
	var x pgtype.Text
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&x); err != nil {
		return err
	}
	if x.Valid {
		v, err := strconv.ParseUint(x.String, 10, 64)
		if err != nil {
			return err
		}
		w.xids[uint32(v)] = op
	}
	return nil
}

// lane locks the lane and returns its last block.
func (w *workload) lockLane(ctx context.Context, tx pgx.Tx) (int64, error) {
	var wf, tenant string
	var grp int64
	var last pgtype.Int8
	err := tx.QueryRow(ctx, w.st.lockLanes, []string{w.workflow()}, []string{w.c.stepTenant}).Scan(&wf, &tenant, &grp, &last)
	return last.Int64, err
}

// create inserts n runs in transactions of insertBatch runs.
func (w *workload) create(ctx context.Context, conn *pgx.Conn, n int) error {
	names := w.names()
	for done := 0; done < n; {
		k := min(w.c.insertBatch, n-done)
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		last, err := w.lockLane(ctx, tx)
		if err != nil {
			tx.Rollback(ctx)
			return err
		}
		var block int64
		var now time.Time
		if err := tx.QueryRow(ctx, w.st.eventBlock).Scan(&block, &now); err != nil {
			tx.Rollback(ctx)
			return err
		}
		base := block << 20
		var (
			ids, shapes             [][16]byte
			wfs, tenants, sts       []string
			inputs                  [][]byte
			fsteps, errs            []string
			created, finishedAt     []pgtype.Timestamptz
			versions                []string
			tRuns                   [][16]byte
			tNames, tTenants, kinds []string
			tStates, tWorkers, tErr []string
			idxs, attempts, qAtt    []int32
			tokens, qIDs, sIDs, cID []int64
			dues, starts, fins, qAt []pgtype.Timestamptz
			outputs                 [][]byte
			fair                    []int64
			tWfs, tVers             []string
			rIDs                    []int64
			rRuns                   [][16]byte
			rNames, rWfs, rTenants  []string
			rVers                   []string
		)
		ev := int64(0)
		for i := range k {
			id, err := uuid.NewV7()
			if err != nil {
				tx.Rollback(ctx)
				return err
			}
			ids, shapes = append(ids, id), append(shapes, w.c.shapeID)
			wfs, tenants, sts = append(wfs, w.workflow()), append(tenants, w.c.stepTenant), append(sts, "RUNNING")
			inputs = append(inputs, []byte(strconv.Itoa(done+i)))
			fsteps, errs = append(fsteps, ""), append(errs, "")
			created, finishedAt = append(created, stamp(now)), append(finishedAt, pgtype.Timestamptz{})
			versions = append(versions, w.c.version)
			for idx, name := range names {
				queued := len(w.parents(idx)) == 0
				tRuns, tNames, tTenants, kinds = append(tRuns, id), append(tNames, name), append(tTenants, w.c.stepTenant), append(kinds, "step")
				idxs, attempts, tokens = append(idxs, int32(idx)), append(attempts, 0), append(tokens, 0)
				tWorkers, tErr = append(tWorkers, ""), append(tErr, "")
				dues, starts, fins = append(dues, pgtype.Timestamptz{}), append(starts, pgtype.Timestamptz{}), append(fins, pgtype.Timestamptz{})
				outputs = append(outputs, nil)
				sIDs, cID = append(sIDs, 0), append(cID, 0)
				tWfs, tVers = append(tWfs, w.workflow()), append(tVers, w.c.version)
				if queued {
					ev++
					last++
					fid := last << 20 // fairq.ID(group 0, block)
					tStates = append(tStates, "QUEUED")
					qIDs, qAt, qAtt = append(qIDs, base+ev), append(qAt, stamp(now)), append(qAtt, 0)
					fair = append(fair, fid)
					rIDs, rRuns, rNames = append(rIDs, fid), append(rRuns, id), append(rNames, name)
					rWfs, rTenants, rVers = append(rWfs, w.workflow()), append(rTenants, w.c.stepTenant), append(rVers, w.c.version)
				} else {
					tStates = append(tStates, "PENDING")
					qIDs, qAt, qAtt = append(qIDs, 0), append(qAt, pgtype.Timestamptz{}), append(qAtt, 0)
					fair = append(fair, 0)
				}
			}
		}
		b := &pgx.Batch{}
		b.Queue(w.st.updateLanes, []string{w.workflow()}, []string{w.c.stepTenant}, []int64{last})
		b.Queue(w.st.insertRuns, ids, wfs, tenants, shapes, sts, inputs, fsteps, errs, created, finishedAt,
			[]string(nil), []int16(nil), []pgtype.Timestamptz(nil), versions)
		targs := []any{tRuns, tNames, tTenants, idxs, kinds, tStates, attempts, tokens, tWorkers, dues, outputs, tErr, starts, fins,
			qIDs, qAt, qAtt, sIDs, cID, []pgtype.Timestamptz(nil), []int64(nil)}
		if !w.d.ready {
			targs = append(targs, fair, tWfs, tVers, []int16(nil), []pgtype.Timestamptz(nil))
		}
		b.Queue(w.st.insertTasks, targs...)
		if w.d.ready {
			b.Queue(w.st.insertReady, rIDs, rRuns, rNames, rWfs, rTenants, stamp(now), []int16(nil), []pgtype.Timestamptz(nil), rVers)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			tx.Rollback(ctx)
			return fmt.Errorf("create: %w", err)
		}
		if err := w.xid(ctx, tx, "create"); err != nil {
			tx.Rollback(ctx)
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		w.creates++
		done += k
	}
	return nil
}

// ref is a claimed task.
type ref struct {
	run   [16]byte
	name  string
	token int64
}

// claim claims up to n tasks in one transaction.
func (w *workload) claim(ctx context.Context, conn *pgx.Conn, n int) ([]ref, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, w.st.claim, w.c.workflows, n, "bench-"+w.c.tag+"-w1", pgtype.Timestamptz{}, []string(nil))
	if err != nil {
		return nil, err
	}
	var out []ref
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, ref{run: vals[0].([16]byte), name: vals[1].(string), token: vals[5].(int64)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if err := w.xid(ctx, tx, "claim"); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	w.claims++
	w.claimed += len(out)
	return out, nil
}

// task is a task row as loadTasks reads it, and as updateTasks writes it
// back.
type task struct {
	run                 [16]byte
	name                string
	idx                 int32
	kind, state         string
	attempt             int32
	token               int64
	worker, errText     string
	due, started, fin   pgtype.Timestamptz
	qID, sID, cID       int64
	qAt, hb, timeout    pgtype.Timestamptz
	qAttempt, lost      int32
	ckey, rkey          string
	waitKey             pgtype.Text
	child               pgtype.UUID
	items, itemsLeft    pgtype.Int4
	fair                int64
	output              []byte
	changed             bool
	enqueue, completing bool
}

// finish applies the outcomes (each task completed, output {}) in one
// transaction: the runs are locked, their tasks loaded, the successors
// whose parents are all completed enqueued, and the runs whose tasks are
// all completed settled.
func (w *workload) finish(ctx context.Context, conn *pgx.Conn, refs []ref) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var ids [][16]byte
	for _, r := range refs {
		ids = append(ids, r.run)
	}
	slices.SortFunc(ids, func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)
	type runRec struct {
		workflow, tenant, version string
	}
	runs := map[[16]byte]*runRec{}
	rows, err := tx.Query(ctx, w.st.lockRuns, ids)
	if err != nil {
		return err
	}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			rows.Close()
			return err
		}
		runs[vals[0].([16]byte)] = &runRec{workflow: vals[1].(string), tenant: vals[2].(string), version: vals[14].(string)}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lockRuns: %w", err)
	}
	var block int64
	var now time.Time
	if err := tx.QueryRow(ctx, w.st.eventBlock).Scan(&block, &now); err != nil {
		return err
	}
	base := block << 20
	tasks := map[[16]byte][]*task{}
	rows, err = tx.Query(ctx, w.st.loadTasks, ids)
	if err != nil {
		return err
	}
	for rows.Next() {
		t := &task{}
		if err := rows.Scan(&t.run, &t.name, &t.idx, &t.kind, &t.state, &t.attempt, &t.token, &t.worker, &t.due, &t.errText,
			&t.started, &t.fin, &t.qID, &t.qAt, &t.qAttempt, &t.sID, &t.cID, &t.hb, &t.timeout,
			&t.ckey, &t.rkey, &t.waitKey, &t.child, &t.items, &t.itemsLeft, &t.lost, &t.fair); err != nil {
			rows.Close()
			return err
		}
		tasks[t.run] = append(tasks[t.run], t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("loadTasks: %w", err)
	}
	ev := int64(0)
	for _, r := range refs {
		var t *task
		for _, x := range tasks[r.run] {
			if x.name == r.name {
				t = x
			}
		}
		if t == nil || t.state != "RUNNING" || t.token != r.token {
			return fmt.Errorf("finish: task %x %s not running under token %d", r.run, r.name, r.token)
		}
		ev++
		t.state, t.output, t.fin, t.cID, t.timeout = "COMPLETED", []byte("{}"), stamp(now), base+ev, pgtype.Timestamptz{}
		t.changed, t.completing = true, true
	}
	// Successors, then settlements, run by run in ID order.
	var enq []*task
	var settled []*runRec
	var settledIDs [][16]byte
	for _, id := range ids {
		ts := tasks[id]
		done := 0
		for _, t := range ts {
			if t.state == "COMPLETED" {
				done++
			}
		}
		if done == len(ts) {
			settled, settledIDs = append(settled, runs[id]), append(settledIDs, id)
			continue
		}
		for _, t := range ts {
			if t.state != "PENDING" {
				continue
			}
			ready := true
			for _, p := range w.parents(int(t.idx)) {
				if ts[p].state != "COMPLETED" {
					ready = false
				}
			}
			if ready {
				enq = append(enq, t)
			}
		}
	}
	b := &pgx.Batch{}
	var rIDs []int64
	var rRuns [][16]byte
	var rNames, rWfs, rTenants, rVers []string
	if len(enq) > 0 {
		last, err := w.lockLane(ctx, tx)
		if err != nil {
			return err
		}
		for _, t := range enq {
			ev++
			last++
			fid := last << 20
			t.state, t.qID, t.qAt, t.qAttempt, t.changed = "QUEUED", base+ev, stamp(now), t.attempt, true
			if !w.d.ready {
				t.fair = fid
			}
			rr := runs[t.run]
			rIDs, rRuns, rNames = append(rIDs, fid), append(rRuns, t.run), append(rNames, t.name)
			rWfs, rTenants, rVers = append(rWfs, rr.workflow), append(rTenants, rr.tenant), append(rVers, rr.version)
		}
		b.Queue(w.st.updateLanes, []string{w.workflow()}, []string{w.c.stepTenant}, []int64{last})
	}
	// updateTasks: the changed tasks, in run and step order (as the
	// core lists a change's tasks).
	var (
		uRuns                        [][16]byte
		uNames, uStates, uWork, uErr []string
		uAtt, uQAtt, uLost           []int32
		uTok, uQID, uSID, uCID, uFID []int64
		uDue, uStart, uFin, uQAt, uT []pgtype.Timestamptz
		uOut                         [][]byte
	)
	for _, id := range ids {
		for _, t := range tasks[id] {
			if !t.changed {
				continue
			}
			uRuns, uNames, uStates, uWork, uErr = append(uRuns, t.run), append(uNames, t.name), append(uStates, t.state), append(uWork, t.worker), append(uErr, t.errText)
			uAtt, uQAtt, uLost = append(uAtt, t.attempt), append(uQAtt, t.qAttempt), append(uLost, t.lost)
			uTok, uQID, uSID, uCID, uFID = append(uTok, t.token), append(uQID, t.qID), append(uSID, t.sID), append(uCID, t.cID), append(uFID, t.fair)
			uDue, uStart, uFin, uQAt, uT = append(uDue, t.due), append(uStart, t.started), append(uFin, t.fin), append(uQAt, t.qAt), append(uT, t.timeout)
			uOut = append(uOut, t.output)
		}
	}
	if !slices.ContainsFunc(uT, func(t pgtype.Timestamptz) bool { return t.Valid }) {
		uT = nil // dropUnused
	}
	if !slices.ContainsFunc(uLost, func(v int32) bool { return v != 0 }) {
		uLost = nil // unlessAny
	}
	uargs := []any{uRuns, uNames, uStates, uAtt, uTok, uWork, uDue, uOut, uErr, uStart, uFin, uQID, uQAt, uQAtt, uSID, uCID, uT, uLost}
	if !w.d.ready {
		uargs = append(uargs, uFID)
	}
	b.Queue(w.st.updateTasks, uargs...)
	if w.d.ready && len(rIDs) > 0 {
		b.Queue(w.st.insertReady, rIDs, rRuns, rNames, rWfs, rTenants, stamp(now), []int16(nil), []pgtype.Timestamptz(nil), rVers)
	}
	if len(settled) > 0 {
		n := len(settled)
		sts, fsteps, errs, fins := make([]string, n), make([]string, n), make([]string, n), make([]pgtype.Timestamptz, n)
		for i := range n {
			sts[i], fins[i] = "COMPLETED", stamp(now)
		}
		b.Queue(w.st.updateRuns, settledIDs, sts, fsteps, errs, fins, []pgtype.Timestamptz(nil))
		minute := now.Truncate(time.Minute)
		b.Queue(w.st.countSettled, []pgtype.Timestamptz{stamp(minute)}, []string{settled[0].workflow}, []string{settled[0].tenant},
			[]string{"COMPLETED"}, []int64{int64(n)})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	if err := w.xid(ctx, tx, "finish"); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	w.finishes++
	w.finished += len(refs)
	w.enqueued += len(enq)
	w.settled += len(settled)
	return nil
}

// work claims and finishes until nothing is queued or in flight: claims
// of claimBatch while fewer than window tasks are in flight, and the
// oldest finishBatch claimed tasks finished once window are (or when a
// claim finds nothing).
func (w *workload) work(ctx context.Context, claimConn, finishConn *pgx.Conn) error {
	var inflight []ref
	for {
		got := -1
		if len(inflight) < w.c.window {
			refs, err := w.claim(ctx, claimConn, w.c.claimBatch)
			if err != nil {
				return err
			}
			inflight = append(inflight, refs...)
			got = len(refs)
		}
		if len(inflight) >= w.c.window || (got == 0 && len(inflight) > 0) {
			k := min(w.c.finishBatch, len(inflight))
			if err := w.finish(ctx, finishConn, inflight[:k]); err != nil {
				return err
			}
			inflight = inflight[k:]
			continue
		}
		if got == 0 && len(inflight) == 0 {
			return nil
		}
	}
}
