package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// pgTx is the PostgreSQL store's side of the core's runner (dag.Tx) in one
// transaction: q is the transaction, own set when it is the store's own
// (the writes commit in the same round trip; otherwise q is a caller's
// transaction, left open), and extra, when set, queues more statements
// after the writes.
type pgTx struct {
	s     *Store
	q     querier
	c     *change
	extra func(b *pgx.Batch)
	own   *ownTx
}

// persist completes and writes a change (dag.Commit) in transaction tx.
// A refusal of the core (dag.RuleError) is reported as the store's; the
// store's own errors are wrapped where they arise.
func (s *Store) persist(ctx context.Context, tx querier, c *change, extra func(b *pgx.Batch), own *ownTx) error {
	err := dag.Commit(ctx, &pgTx{s: s, q: tx, c: c, extra: extra, own: own}, c.Change)
	if _, refused := errors.AsType[*dag.RuleError](err); refused {
		err = fmt.Errorf("pgstore: %w", err)
	}
	return err
}

// errOtherChange reports a Write passed a change other than its unit's
// (see dag.Tx).
var errOtherChange = errors.New("pgstore: write: the change is not the transaction's")

// Write implements dag.Tx. It writes a change in the order that keeps
// transitions deadlock-free against claims: (1) delete the ready rows of
// dequeued tasks, failing with errRaced when a claim took one first; (2)
// lock the lanes that enqueue and place the enqueued tasks; then (3)
// tasks, (4) ready rows, (5) events, (6) runs and (7) notifications,
// pipelined in one round trip, with extra's statements after them.
//
// dc is the change of the unit (t.c.Change): t.c holds, beside it, what
// the store needs to write it (lanes, fair ids, event ids, parked heads,
// new shapes).
func (t *pgTx) Write(ctx context.Context, dc *dag.Change) error {
	if dc != t.c.Change {
		return errOtherChange
	}
	s, tx, c, extra, own := t.s, t.q, t.c, t.extra, t.own
	for _, r := range c.Runs {
		if _, ok := c.byID[r.Rec.ID]; !ok {
			c.load(r, nil) // a child run the call creates
		}
	}
	c.takePromoted()
	b := &pgx.Batch{}
	if ns := &c.newShapes; len(ns.ids) > 0 {
		b.Queue(s.q.insertShapes, u16(ns.ids), ns.wfs, ns.jss)
	}
	if err := s.queueReshapes(b, c); err != nil {
		return err
	}
	if runIDs, names := c.dequeues(); len(runIDs) > 0 {
		want := int64(len(runIDs))
		b.Queue(s.q.deleteReady, u16(runIDs), names).Exec(func(ct pgconn.CommandTag) error {
			if ct.RowsAffected() != want {
				return errRaced
			}
			return nil
		})
	}
	var keys []laneKey
	if c.lanes == nil && !c.deferred { // CreateRuns locks its lanes up front
		keys = c.lanesOf()
		c.queueLaneLock(&s.q, b, keys)
	}
	if b.Len() > 0 {
		if err := t.s.sendBatch(ctx, tx, b).Close(); err != nil {
			if errors.Is(err, errRaced) {
				return err
			}
			return fmt.Errorf("pgstore: lock queue rows: %w", err)
		}
	}
	if missing := c.missingLanes(keys); len(missing) > 0 {
		if err := s.ensureLanes(ctx, tx, c, keys, missing); err != nil {
			return err
		}
	}
	if !c.deferred {
		if err := c.placePromoted(); err != nil {
			return err
		}
		if err := c.placeAll(); err != nil {
			return err
		}
	}
	b = &pgx.Batch{}
	if err := c.queueWrites(&s.q, s.channel, b); err != nil {
		return err
	}
	c.queueFlowWrites(&s.q, s.channel, b, c.Now)
	if extra != nil {
		extra(b)
	}
	if own != nil {
		if err := own.send(ctx, b, true); err != nil {
			return writeError(err)
		}
		return nil
	}
	if b.Len() == 0 {
		return nil
	}
	if err := t.s.sendBatch(ctx, tx, b).Close(); err != nil {
		return writeError(err)
	}
	return nil
}

// writeError is the error of a change's writes: a run it creates whose ID
// exists (a child run's; see dag.Tx.NewRun) fails it with ErrRunExists.
func writeError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && isRunIDTaken(pgErr) {
		return fmt.Errorf("pgstore: write: %w: %w", err, durabletype.ErrRunExists)
	}
	return fmt.Errorf("pgstore: write: %w", err)
}

// queueReshapes queues the writes of the runs that moved to another
// version (dag.Effects.Reshaped), first in the transaction, before any
// task row is written: the shapes they take, their records' shape and
// version, the version of their queue rows (ready, incoming, parked), and
// the index of their on-failure task, which follows their steps. Their
// ready rows were locked before their tasks were loaded (UpgradeRuns
// transitions lock them up front), so no claim takes one meanwhile.
func (s *Store) queueReshapes(b *pgx.Batch, c *change) error {
	var ids, shapes [][16]byte
	var newShapes []uuid.UUID
	var versions, wfs, jss []string
	var handlers []int32
	for _, r := range c.Runs {
		fx := c.Effects[r]
		if !fx.Reshaped {
			continue
		}
		id, js, _, err := s.compileShape(r.Shape.Shape)
		if err != nil {
			return fmt.Errorf("pgstore: run %s: %w", r.Rec.ID, err)
		}
		ids, shapes = append(ids, r.Rec.ID), append(shapes, id)
		versions = append(versions, r.Rec.Version)
		handlers = append(handlers, int32(r.Shape.Len()))
		if !slices.Contains(newShapes, id) {
			newShapes, wfs, jss = append(newShapes, id), append(wfs, r.Rec.Workflow), append(jss, string(js))
		}
		// The on-failure task's events kept in its row follow it to its
		// new index, after the steps added (it was where the first of them
		// is now).
		if cols := c.cols[r]; len(r.Tasks) > r.Shape.Len() && len(fx.NewTasks) > 0 && fx.NewTasks[0] < len(cols) {
			old := fx.NewTasks[0]
			handler := cols[old]
			c.cols[r] = slices.Clone(cols[:old])
			*c.colsAt(r, r.Shape.Len()) = handler
		}
	}
	if len(ids) == 0 {
		return nil
	}
	b.Queue(s.q.insertShapes, u16(newShapes), wfs, jss)
	b.Queue(s.q.reshapeRuns, ids, shapes, versions, handlers)
	return nil
}

// dequeues returns the ready rows to delete: the core's Dequeued, net of
// tasks enqueued within the call (those never got a row). Keyed tasks are
// admit's to dequeue (flow.go): each is in ready or parked.
func (c *change) dequeues() (runIDs []uuid.UUID, names []string) {
	for _, r := range c.Runs {
		for _, i := range c.Effects[r].Dequeued {
			if r.Task(i).ConcurrencyKey != "" {
				continue
			}
			runIDs = append(runIDs, r.Rec.ID)
			names = append(names, r.Task(i).Name)
		}
	}
	return runIDs, names
}

// taskCols accumulates task rows as column arrays.
type taskCols struct {
	runIDs                 [][16]byte
	names, tenants         []string
	idxs                   []int32
	kinds, states          []string
	attempts, lost         []int32
	tokens                 []int64
	workers, errs          []string
	dues, starts, finishes []pgtype.Timestamptz
	outputs                [][]byte
	qIDs, sIDs, cIDs       []int64
	qAts                   []pgtype.Timestamptz
	qAttempts              []int32
	timeouts               []pgtype.Timestamptz
	timeoutUs              []int64
	// Waits, maps and items: nil (NULL arrays) until a task of one of
	// those kinds is added (withWaits), then one entry per task.
	withWaits   bool
	waitKeys    []string
	children    []pgtype.UUID
	items, left []pgtype.Int4
	item        []pgtype.Int4
	inputs      [][]byte
}

func newTaskCols(n int) *taskCols {
	return &taskCols{
		runIDs: make([][16]byte, 0, n), names: make([]string, 0, n), tenants: make([]string, 0, n),
		idxs: make([]int32, 0, n), kinds: make([]string, 0, n), states: make([]string, 0, n),
		attempts: make([]int32, 0, n), tokens: make([]int64, 0, n), workers: make([]string, 0, n),
		errs: make([]string, 0, n), dues: make([]pgtype.Timestamptz, 0, n), starts: make([]pgtype.Timestamptz, 0, n),
		finishes: make([]pgtype.Timestamptz, 0, n), outputs: make([][]byte, 0, n),
		qIDs: make([]int64, 0, n), sIDs: make([]int64, 0, n), cIDs: make([]int64, 0, n),
		qAts: make([]pgtype.Timestamptz, 0, n), qAttempts: make([]int32, 0, n),
		timeouts: make([]pgtype.Timestamptz, 0, n), timeoutUs: make([]int64, 0, n),
	}
}

// dropUnused sends the columns of features no task of the batch uses as
// NULL arrays (unnest pads them with NULLs), so that runs without
// timeouts cost no encoding or transfer for them.
func (tc *taskCols) dropUnused() {
	if !slices.ContainsFunc(tc.timeouts, func(t pgtype.Timestamptz) bool { return t.Valid }) {
		tc.timeouts = nil
	}
	if !slices.ContainsFunc(tc.timeoutUs, func(us int64) bool { return us != 0 }) {
		tc.timeoutUs = nil
	}
}

// unlessAny returns vs, or nil (a NULL array) when no element is set.
func unlessAny[T comparable](vs []T) []T {
	var zero T
	for _, v := range vs {
		if v != zero {
			return vs
		}
	}
	return nil
}

func (tc *taskCols) add(r *dag.Run, i int, ec *eventCols) {
	t := r.Task(i)
	tc.qIDs = append(tc.qIDs, ec.qID)
	tc.qAts = append(tc.qAts, stamp(ec.qAt))
	tc.qAttempts = append(tc.qAttempts, int32(ec.qAttempt))
	tc.sIDs = append(tc.sIDs, ec.sID)
	tc.cIDs = append(tc.cIDs, ec.cID)
	tc.runIDs = append(tc.runIDs, t.RunID)
	tc.names = append(tc.names, t.Name)
	tc.tenants = append(tc.tenants, r.Rec.Tenant)
	tc.idxs = append(tc.idxs, int32(r.StepOf(i)))
	tc.kinds = append(tc.kinds, string(t.Kind))
	tc.states = append(tc.states, string(t.State))
	tc.attempts = append(tc.attempts, int32(t.Attempt))
	tc.lost = append(tc.lost, int32(t.Lost))
	tc.tokens = append(tc.tokens, t.Token)
	tc.workers = append(tc.workers, t.Worker)
	tc.dues = append(tc.dues, stamp(t.DueAt))
	tc.outputs = append(tc.outputs, t.Output)
	tc.errs = append(tc.errs, t.Error)
	tc.starts = append(tc.starts, stamp(t.StartedAt))
	tc.finishes = append(tc.finishes, stamp(t.FinishedAt))
	tc.timeouts = append(tc.timeouts, stamp(t.TimeoutAt))
	tc.timeoutUs = append(tc.timeoutUs, r.Shape.Timeout(r.StepOf(i)).Microseconds())
	if !tc.withWaits {
		switch t.Kind {
		case durabletype.KindStep, durabletype.KindSleep, durabletype.KindOnFailure:
			if !dag.IsItem(i) { // a function's record has a number and an input
				return
			}
		}
		// The first task of those kinds: the tasks before it get the
		// columns' zero values (NULL in each).
		n := len(tc.runIDs) - 1
		tc.withWaits = true
		tc.waitKeys, tc.children = make([]string, n), make([]pgtype.UUID, n)
		tc.items, tc.left, tc.item, tc.inputs = make([]pgtype.Int4, n), make([]pgtype.Int4, n), make([]pgtype.Int4, n), make([][]byte, n)
	}
	tc.waitKeys = append(tc.waitKeys, t.WaitKey)
	tc.children = append(tc.children, pgtype.UUID{Bytes: t.Child, Valid: t.Child != uuid.Nil})
	counted := t.Kind == durabletype.KindMap || t.Kind == durabletype.KindFunc
	tc.items = append(tc.items, pgtype.Int4{Int32: int32(t.Items), Valid: counted})
	tc.left = append(tc.left, pgtype.Int4{Int32: int32(t.Left), Valid: counted})
	tc.item = append(tc.item, pgtype.Int4{Int32: int32(t.Item), Valid: dag.IsItem(i)})
	tc.inputs = append(tc.inputs, t.Input)
}

// queueWrites queues the statements that write a change: lanes, new runs,
// tasks, ready rows, events, changed runs and notifications.
func (c *change) queueWrites(q *queries, channel string, b *pgx.Batch) error {
	eventRows, err := c.placeEvents()
	if err != nil {
		return err
	}
	c.queueLaneWrites(q, b)

	// Runs first when they are new, before their tasks (no foreign key
	// checks it since migration 012; the order is kept).
	c.queueNewRuns(q, b)

	// (3) Tasks.
	n, nNew := 0, 0
	for _, r := range c.Runs {
		n += len(c.Effects[r].Tasks)
		nNew += len(c.Effects[r].NewTasks)
	}
	ins, upd := newTaskCols(nNew), newTaskCols(n-nNew)
	for _, r := range c.Runs {
		fx := c.Effects[r]
		k := 0
		for _, i := range fx.Tasks {
			for k < len(fx.NewTasks) && fx.NewTasks[k] < i {
				k++
			}
			if k < len(fx.NewTasks) && fx.NewTasks[k] == i {
				ins.add(r, i, c.colsAt(r, i))
			} else {
				upd.add(r, i, c.colsAt(r, i))
			}
		}
	}
	upd.dropUnused()
	ins.dropUnused()
	if len(upd.runIDs) > 0 {
		args := []any{upd.runIDs, upd.names, upd.states, upd.attempts, upd.tokens, upd.workers,
			upd.dues, upd.outputs, upd.errs, upd.starts, upd.finishes, upd.qIDs, upd.qAts, upd.qAttempts, upd.sIDs, upd.cIDs,
			upd.timeouts, unlessAny(upd.lost)}
		if upd.withWaits {
			b.Queue(q.updateTasksWaits, append(args, upd.waitKeys, upd.children, upd.items, upd.left, upd.inputs)...)
		} else {
			b.Queue(q.updateTasks, args...)
		}
	}
	if len(ins.runIDs) > 0 {
		args := []any{ins.runIDs, ins.names, ins.tenants, ins.idxs, ins.kinds, ins.states, ins.attempts,
			ins.tokens, ins.workers, ins.dues, ins.outputs, ins.errs, ins.starts, ins.finishes,
			ins.qIDs, ins.qAts, ins.qAttempts, ins.sIDs, ins.cIDs, ins.timeouts, ins.timeoutUs}
		if ins.withWaits {
			b.Queue(q.insertTasksWaits, append(args, ins.item, ins.inputs, ins.children)...)
		} else {
			b.Queue(q.insertTasks, args...)
		}
	}

	// (4) Ready rows, or incoming rows for runs created in a caller's
	// transaction.
	n = len(c.Enqueued)
	var (
		rIDs     = make([]int64, 0, n)
		rRuns    = make([][16]byte, 0, n)
		rNames   = make([]string, 0, n)
		rWfs     = make([]string, 0, n)
		rVers    = make([]string, 0, n)
		rTenants = make([]string, 0, n)
		rPrios   = make([]int16, 0, n)
		rUntil   = make([]pgtype.Timestamptz, 0, n)
	)
	for k, e := range c.Enqueued {
		if !c.deferred {
			rIDs = append(rIDs, c.ids[k])
		}
		rRuns = append(rRuns, e.R.Rec.ID)
		rNames = append(rNames, e.R.Task(e.I).Name)
		rWfs = append(rWfs, e.R.Rec.Workflow)
		rVers = append(rVers, e.R.Rec.Version)
		rTenants = append(rTenants, e.R.Rec.Tenant)
		rPrios = append(rPrios, int16(e.R.Rec.Priority))
		var until time.Time
		if c.Admitted != nil {
			until = c.Admitted.Until[e]
		}
		rUntil = append(rUntil, stamp(until))
	}
	switch {
	case n == 0:
	case c.deferred:
		b.Queue(q.insertIncoming, rRuns, rNames, rWfs, rTenants, unlessAny(rPrios), unlessAny(rVers))
	default:
		b.Queue(q.insertReady, rIDs, rRuns, rNames, rWfs, rTenants, stamp(c.Now), unlessAny(rPrios), unlessAny(rUntil), unlessAny(rVers))
	}

	// (5) Events that do not live in task rows.
	queueEvents(q, b, eventRows)

	// (6) Runs that changed, and the messages left for other runs.
	c.queueRunUpdates(q, b)
	c.queueOutbox(q, b)

	// (7) Notifications, delivered on commit.
	var notes []string
	switch {
	case n == 0:
	case c.deferred:
		notes = append(notes, payloadIncoming)
	default:
		notes = append(notes, string(store.TopicReady))
	}
	if c.Timer() {
		notes = append(notes, string(store.TopicTimer))
	}
	for _, r := range c.Cancelled() {
		notes = append(notes, string(store.TopicCancel)+":"+r.Rec.ID.String())
	}
	for _, r := range c.Settled() {
		notes = append(notes, string(store.TopicRun)+":"+r.Rec.ID.String())
	}
	if len(notes) > 0 {
		b.Queue(q.notify, channel, notes)
	}
	c.notes = notes
	return nil
}

// queueNewRuns queues the insert of the runs the change created, unless
// they are inserted already.
func (c *change) queueNewRuns(q *queries, b *pgx.Batch) {
	if !c.runsInserted {
		c.queueNewRunsWith(q, false, b)
	}
}

// queueNewRunsWith queues the insert of the runs the change created, by
// insertRunsNew inside a caller's transaction (inTx), else by insertRuns
// (or their variants with parents and trace parents), or nothing (nil)
// when there are none.
func (c *change) queueNewRunsWith(q *queries, inTx bool, b *pgx.Batch) *pgx.QueuedQuery {
	var (
		ids, shapes           [][16]byte
		wfs, tenants, sts     []string
		fsteps, errs          []string
		inputs                [][]byte
		createdAt, finishedAt []pgtype.Timestamptz
		keys, versions        []string
		prios                 []int16
		deadlines             []pgtype.Timestamptz
		parents               []pgtype.UUID
		pSteps, pResults      []string
		traces                []string
	)
	for _, r := range c.Runs {
		if !c.Effects[r].Created {
			continue
		}
		rec := &r.Rec
		ids = append(ids, rec.ID)
		wfs = append(wfs, rec.Workflow)
		tenants = append(tenants, rec.Tenant)
		shapes = append(shapes, c.shapeIDs[r.Rec.ID])
		sts = append(sts, string(rec.Status))
		inputs = append(inputs, rec.Input)
		fsteps = append(fsteps, rec.FailedStep)
		errs = append(errs, rec.Error)
		createdAt = append(createdAt, stamp(rec.CreatedAt))
		finishedAt = append(finishedAt, stamp(rec.FinishedAt))
		keys = append(keys, rec.IdempotencyKey)
		versions = append(versions, rec.Version)
		prios = append(prios, int16(rec.Priority))
		deadlines = append(deadlines, stamp(rec.Deadline))
		// The parents' columns exist from the first child run on (most
		// batches have none); the runs before it have no parent.
		if rec.Parent != nil && parents == nil {
			n := len(ids) - 1
			parents, pSteps, pResults = make([]pgtype.UUID, n), make([]string, n), make([]string, n)
		}
		if parents != nil {
			var parent pgtype.UUID
			var pStep, pResult string
			if p := rec.Parent; p != nil {
				parent, pStep, pResult = pgtype.UUID{Bytes: p.RunID, Valid: true}, p.Step, p.Result
			}
			parents, pSteps, pResults = append(parents, parent), append(pSteps, pStep), append(pResults, pResult)
		}
		// Likewise the trace parents' column, from the first run with one.
		if rec.TraceParent != "" && traces == nil {
			traces = make([]string, len(ids)-1)
		}
		if traces != nil {
			traces = append(traces, rec.TraceParent)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	args := []any{ids, wfs, tenants, shapes, sts, inputs, fsteps, errs, createdAt, finishedAt,
		unlessAny(keys), unlessAny(prios), unlessAny(deadlines), unlessAny(versions)}
	sql := q.insertRuns
	if inTx {
		sql = q.insertRunsNew
	}
	if parents != nil {
		// Child runs come from transitions, never from a caller's
		// transaction (insertRunsNew).
		sql = q.insertChildRuns
		args = append(args, parents, pSteps, pResults)
	}
	if traces != nil {
		switch sql {
		case q.insertRuns:
			sql = q.insertRunsTraced
		case q.insertRunsNew:
			sql = q.insertRunsNewTraced
		default:
			sql = q.insertChildRunsTraced
		}
		args = append(args, traces)
	}
	return b.Queue(sql, args...)
}

// queueRunUpdates queues the update of existing runs whose record changed,
// and counts the runs that settled in run_counts (and out of it the runs
// that settle no more, c.uncounted).
func (c *change) queueRunUpdates(q *queries, b *pgx.Batch) {
	var (
		ids               [][16]byte
		sts, fsteps, errs []string
		finishedAt        []pgtype.Timestamptz
		deadlines         []pgtype.Timestamptz
		counts            = map[dag.RunCountKey]int64{}
	)
	for _, r := range c.Runs {
		fx := c.Effects[r]
		if !fx.RunChanged {
			continue
		}
		rec := &r.Rec
		if fx.Settled {
			counts[dag.SettledCount(rec)]++
		}
		if fx.Created {
			continue
		}
		ids = append(ids, rec.ID)
		sts = append(sts, string(rec.Status))
		fsteps = append(fsteps, rec.FailedStep)
		errs = append(errs, rec.Error)
		finishedAt = append(finishedAt, stamp(rec.FinishedAt))
		deadlines = append(deadlines, stamp(rec.Deadline))
	}
	for k, n := range c.uncounted {
		counts[k] -= n
	}
	if len(ids) > 0 {
		b.Queue(q.updateRuns, ids, sts, fsteps, errs, finishedAt, unlessAny(deadlines))
	}
	queueCounts(q, b, counts)
}

// queueCounts queues the addition of settled runs to run_counts, its keys
// sorted so that transactions lock the rows they share in one order.
func queueCounts(q *queries, b *pgx.Batch, counts map[dag.RunCountKey]int64) {
	maps.DeleteFunc(counts, func(_ dag.RunCountKey, n int64) bool { return n == 0 })
	if len(counts) == 0 {
		return
	}
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b dag.RunCountKey) int {
		return cmp.Or(a.Minute.Compare(b.Minute), cmp.Compare(a.Workflow, b.Workflow),
			cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Status, b.Status))
	})
	minutes := make([]pgtype.Timestamptz, len(keys))
	wfs, tenants, sts := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	ns := make([]int64, len(keys))
	for i, k := range keys {
		minutes[i], wfs[i], tenants[i], sts[i], ns[i] = stamp(k.Minute), k.Workflow, k.Tenant, string(k.Status), counts[k]
	}
	b.Queue(q.countSettled, minutes, wfs, tenants, sts, ns)
}

// queueEvents queues the insert of event rows.
func queueEvents(q *queries, b *pgx.Batch, rows []durabletype.Event) {
	n := len(rows)
	if n == 0 {
		return
	}
	var (
		eRuns     = make([][16]byte, 0, n)
		eIDs      = make([]int64, 0, n)
		eSteps    = make([]string, 0, n)
		eTypes    = make([]string, 0, n)
		eDet      = make([]string, 0, n)
		eAttempts = make([]int32, 0, n)
		eAt       = make([]pgtype.Timestamptz, 0, n)
		eDue      = make([]pgtype.Timestamptz, 0, n)
	)
	for k := range rows {
		e := &rows[k]
		eRuns = append(eRuns, e.RunID)
		eIDs = append(eIDs, e.ID)
		eSteps = append(eSteps, e.Step)
		eTypes = append(eTypes, string(e.Type))
		eAttempts = append(eAttempts, int32(e.Attempt))
		eAt = append(eAt, stamp(e.At))
		eDet = append(eDet, e.Detail)
		eDue = append(eDue, stamp(e.DueAt))
	}
	b.Queue(q.insertEvents, eRuns, eIDs, eSteps, eTypes, eAttempts, eAt, eDet, eDue)
}

// queueOutbox queues the writes of the messages the call's transitions
// left for other runs, and of the messages it applied (deleted), and the
// deletion of items a map step no longer has.
func (c *change) queueOutbox(q *queries, b *pgx.Batch) {
	var (
		runs, children              []uuid.UUID
		kinds, steps, statuses      []string
		results, resultStates, errs []string
		dRuns                       []uuid.UUID
		dNames                      []string
	)
	for _, r := range c.Runs {
		fx := c.Effects[r]
		for _, i := range fx.Deleted {
			dRuns, dNames = append(dRuns, r.Rec.ID), append(dNames, r.Task(i).Name)
		}
		for _, m := range fx.Outbox {
			kind := "cancel"
			if m.Kind == dag.MsgChild {
				kind = "child"
			}
			runs, kinds, steps, children = append(runs, m.Run), append(kinds, kind), append(steps, m.Step), append(children, m.Child)
			statuses, results = append(statuses, string(m.Status)), append(results, m.Result)
			resultStates, errs = append(resultStates, string(m.ResultState)), append(errs, dag.Text(m.Error))
			if !slices.Contains(c.inboxRuns, m.Run) {
				c.inboxRuns = append(c.inboxRuns, m.Run)
			}
		}
	}
	if len(dRuns) > 0 {
		b.Queue(q.deleteItems, u16(dRuns), dNames)
	}
	if len(runs) > 0 {
		b.Queue(q.insertInbox, u16(runs), kinds, steps, nullUUIDs(children), statuses, results, resultStates, errs)
	}
	if len(c.inboxDone) > 0 {
		b.Queue(q.deleteInbox, c.inboxDone)
	}
}

// nullUUIDs returns ids as a uuid array, the nil UUID as NULL.
func nullUUIDs(ids []uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for k, id := range ids {
		out[k] = pgtype.UUID{Bytes: id, Valid: id != uuid.Nil}
	}
	return out
}
