package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/internal/fairq"
	"github.com/effectivelabs/durable/store"
)

// errRaced reports that a transition lost a race with a concurrent claim:
// a task it cancels was claimed after it was loaded. The transaction is
// rolled back and the call retried.
var errRaced = errors.New("pgstore: a ready task was claimed concurrently")

// maxAttempts bounds the attempts of a transition. The first attempt is
// optimistic; after losing a race, an attempt locks the ready rows of its
// runs before loading their tasks, so that no claim can take them meanwhile,
// and cannot lose again. The bound is a safety net.
const maxAttempts = 3

// retryRaced runs fn again while it loses races with concurrent claims;
// fn's argument tells it to lock the runs' ready rows up front.
func retryRaced(fn func(lockReady bool) error) error {
	for attempt := 1; ; attempt++ {
		err := fn(attempt > 1)
		if !errors.Is(err, errRaced) {
			return err
		}
		if attempt == maxAttempts {
			return fmt.Errorf("pgstore: gave up after %d attempts: %w", attempt, err)
		}
	}
}

// change is the set of runs one call transitions, and what the core decided
// for them. persist writes it.
type change struct {
	now     time.Time
	created bool // the runs are new: insert them and their tasks
	// deferred: enqueued tasks go to the incoming table instead of the ready
	// queue, and no fair-queue state is touched (runs created inside a
	// caller's transaction; see incoming.go).
	deferred bool
	runs     []*dag.Run
	byID     map[uuid.UUID]*dag.Run

	// enq lists the tasks enqueued by the call, in the order the core
	// enqueued them across runs: fair ids are assigned in that order, as in
	// memstore.
	enq   []enqueued
	marks map[*dag.Run]int

	tenants  map[string]*tenantRow
	frontier int64
	notes    []string

	// Event ids: eventBase + k for the call's k-th event (see
	// docs/design.md, "The event log"); cols holds each run's happy-path
	// events kept in task rows, as loaded and as changed by the call.
	eventBase int64
	eventK    int64
	cols      map[*dag.Run][]eventCols

	shapeIDs map[*dag.Run]uuid.UUID // of new runs
}

type enqueued struct {
	r  *dag.Run
	i  int
	id int64
}

type tenantRow struct {
	grp     int64
	last    int64
	hasLast bool
	dirty   bool
}

func newChange(now time.Time) *change {
	return &change{now: now, byID: make(map[uuid.UUID]*dag.Run), marks: make(map[*dag.Run]int),
		cols: make(map[*dag.Run][]eventCols)}
}

// eventCols are the events of the happy path a task row holds instead of
// the events table: its latest QUEUED event without detail, its latest
// STARTED event (whose time and attempt are the row's started_at and
// attempt) and its COMPLETED event (finished_at, attempt). Zero ids mean
// none. attempt and startedAt are the row's values as loaded.
type eventCols struct {
	qID       int64
	qAt       time.Time
	qAttempt  int
	sID       int64
	cID       int64
	attempt   int
	startedAt time.Time
}

// errTooManyEvents: one call produced more events than an event block holds.
var errTooManyEvents = errors.New("pgstore: too many events in one call")

func (c *change) nextEventID() (int64, error) {
	if c.eventK >= eventBlockSize {
		return 0, errTooManyEvents
	}
	id := c.eventBase + c.eventK
	c.eventK++
	return id, nil
}

// placeEvents numbers the call's events and decides where each is stored:
// a QUEUED event without detail and a COMPLETED event go to their task's
// columns, the rest to the events table. An event a column held is moved to
// the events table when a newer one takes its place, and a STARTED event
// when its task goes back to the queue (a retry, rescue or release). It
// returns the rows to insert.
func (c *change) placeEvents() ([]store.Event, error) {
	var rows []store.Event
	for _, r := range c.runs {
		cols := c.cols[r]
		for len(cols) < len(r.Tasks) {
			cols = append(cols, eventCols{})
		}
		c.cols[r] = cols
		for i := range r.Tasks {
			t, ec := &r.Tasks[i], &cols[i]
			// A task going back to the queue will be claimed again, which
			// overwrites started_at and attempt: its STARTED event moves to
			// the events table now, so that claims never have to.
			if ec.sID != 0 && (t.State == store.TaskQueued || t.Attempt != ec.attempt || !t.StartedAt.Equal(ec.startedAt)) {
				rows = append(rows, store.Event{ID: ec.sID, RunID: r.Rec.ID, Step: t.Name, Type: store.EventStarted,
					Attempt: ec.attempt, At: ec.startedAt})
				ec.sID = 0
			}
		}
		for k := range r.Events {
			e := r.Events[k]
			id, err := c.nextEventID()
			if err != nil {
				return nil, err
			}
			e.ID = id
			i, _ := r.Shape.Index(e.Step)
			ec := &cols[i]
			switch {
			case e.Type == store.EventQueued && e.Detail == "":
				if ec.qID != 0 {
					rows = append(rows, store.Event{ID: ec.qID, RunID: e.RunID, Step: e.Step, Type: store.EventQueued,
						Attempt: ec.qAttempt, At: ec.qAt})
				}
				ec.qID, ec.qAt, ec.qAttempt = id, e.At, e.Attempt
			case e.Type == store.EventCompleted:
				ec.cID = id
			default:
				rows = append(rows, e)
			}
		}
	}
	return rows, nil
}

func (c *change) add(r *dag.Run) {
	c.runs = append(c.runs, r)
	c.byID[r.Rec.ID] = r
}

// record notes the tasks r enqueued since the last call, after each
// transition applied to r.
func (c *change) record(r *dag.Run) {
	for _, i := range r.Enqueued[c.marks[r]:] {
		c.enq = append(c.enq, enqueued{r: r, i: i})
	}
	c.marks[r] = len(r.Enqueued)
}

// enqueuedIn reports whether task i of r was enqueued by this call.
func (c *change) enqueuedIn(r *dag.Run, i int) bool {
	return slices.Contains(r.Enqueued, i)
}

// tenantNames returns the sorted tenants that enqueue tasks.
func (c *change) tenantNames() []string {
	var names []string
	for _, e := range c.enq {
		names = append(names, e.r.Rec.Tenant)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// queueTenantLock queues the statements that lock the tenants that enqueue
// (in name order) and read the frontier (without locking it).
func (c *change) queueTenantLock(q *queries, b *pgx.Batch, names []string) {
	if len(names) == 0 {
		return
	}
	c.tenants = make(map[string]*tenantRow, len(names))
	b.Queue(q.lockTenants, names).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var name string
			var t tenantRow
			var last pgtype.Int8
			if err := rows.Scan(&name, &t.grp, &last); err != nil {
				return err
			}
			t.last, t.hasLast = last.Int64, last.Valid
			c.tenants[name] = &t
		}
		return rows.Err()
	})
	b.Queue(q.readFrontier).QueryRow(func(row pgx.Row) error { return row.Scan(&c.frontier) })
}

// assignIDs gives every enqueued task its fair id, in enqueue order.
func (c *change) assignIDs() error {
	for k := range c.enq {
		e := &c.enq[k]
		t := c.tenants[e.r.Rec.Tenant]
		if t == nil {
			return fmt.Errorf("pgstore: tenant %q of run %s has no fair-queue group", e.r.Rec.Tenant, e.r.Rec.ID)
		}
		t.last = fairq.NextBlock(t.last, t.hasLast, c.frontier)
		t.hasLast, t.dirty = true, true
		e.id = fairq.ID(t.grp, t.last)
	}
	return nil
}

// dequeues returns the ready rows to delete: tasks the core dequeued that
// were queued before this call (a task enqueued and dequeued within the call
// never got a row).
func (c *change) dequeues() (runIDs []uuid.UUID, names []string) {
	for _, r := range c.runs {
		for _, i := range r.Dequeued {
			if !c.enqueuedIn(r, i) {
				runIDs = append(runIDs, r.Rec.ID)
				names = append(names, r.Tasks[i].Name)
			}
		}
	}
	return runIDs, names
}

// persist writes a change in the order that keeps transitions deadlock-free
// against claims: (1) delete the ready rows of dequeued tasks, failing with
// errRaced when a claim took one first; (2) lock the tenants that enqueue and
// assign fair ids; then (3) tasks, (4) ready rows, (5) events, (6) runs and
// (7) notifications, pipelined in one round trip. extra, when set, queues
// more statements after them.
//
// own, when set, is the store's own transaction: the writes commit in the
// same round trip. Otherwise tx is a caller's transaction, left open.
func (s *Store) persist(ctx context.Context, tx querier, c *change, extra func(b *pgx.Batch), own *ownTx) error {
	b := &pgx.Batch{}
	if runIDs, names := c.dequeues(); len(runIDs) > 0 {
		want := int64(len(runIDs))
		b.Queue(s.q.deleteReady, u16(runIDs), names).Exec(func(ct pgconn.CommandTag) error {
			if ct.RowsAffected() != want {
				return errRaced
			}
			return nil
		})
	}
	if c.tenants == nil && !c.deferred { // CreateRuns locks its tenants up front
		c.queueTenantLock(&s.q, b, c.tenantNames())
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			if errors.Is(err, errRaced) {
				return err
			}
			return fmt.Errorf("pgstore: lock queue rows: %w", err)
		}
	}
	if !c.deferred {
		if err := c.assignIDs(); err != nil {
			return err
		}
	}
	b = &pgx.Batch{}
	if err := c.queueWrites(&s.q, s.channel, b); err != nil {
		return err
	}
	if extra != nil {
		extra(b)
	}
	if own != nil {
		if err := own.send(ctx, b, true); err != nil {
			return fmt.Errorf("pgstore: write: %w", err)
		}
		return nil
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgstore: write: %w", err)
	}
	return nil
}

// taskCols accumulates task rows as column arrays.
type taskCols struct {
	runIDs                 [][16]byte
	names, tenants         []string
	idxs                   []int32
	kinds, states          []string
	attempts               []int32
	tokens                 []int64
	workers, errs          []string
	dues, starts, finishes []pgtype.Timestamptz
	outputs                [][]byte
	qIDs, sIDs, cIDs       []int64
	qAts                   []pgtype.Timestamptz
	qAttempts              []int32
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
	}
}

func (tc *taskCols) add(r *dag.Run, i int, ec *eventCols) {
	t := &r.Tasks[i]
	tc.qIDs = append(tc.qIDs, ec.qID)
	tc.qAts = append(tc.qAts, stamp(ec.qAt))
	tc.qAttempts = append(tc.qAttempts, int32(ec.qAttempt))
	tc.sIDs = append(tc.sIDs, ec.sID)
	tc.cIDs = append(tc.cIDs, ec.cID)
	tc.runIDs = append(tc.runIDs, t.RunID)
	tc.names = append(tc.names, t.Name)
	tc.tenants = append(tc.tenants, r.Rec.Tenant)
	tc.idxs = append(tc.idxs, int32(i))
	tc.kinds = append(tc.kinds, string(t.Kind))
	tc.states = append(tc.states, string(t.State))
	tc.attempts = append(tc.attempts, int32(t.Attempt))
	tc.tokens = append(tc.tokens, t.Token)
	tc.workers = append(tc.workers, t.Worker)
	tc.dues = append(tc.dues, stamp(t.DueAt))
	tc.outputs = append(tc.outputs, t.Output)
	tc.errs = append(tc.errs, t.Error)
	tc.starts = append(tc.starts, stamp(t.StartedAt))
	tc.finishes = append(tc.finishes, stamp(t.FinishedAt))
}

// queueWrites queues the statements that write a change.
func (c *change) queueWrites(q *queries, channel string, b *pgx.Batch) error {
	eventRows, err := c.placeEvents()
	if err != nil {
		return err
	}
	// Tenants whose last block moved.
	var tNames []string
	var tLasts []int64
	for name, t := range c.tenants {
		if t.dirty {
			tNames = append(tNames, name)
			tLasts = append(tLasts, t.last)
		}
	}
	if len(tNames) > 0 {
		b.Queue(q.updateTenants, tNames, tLasts)
	}

	// Runs first when they are new, for the foreign key of tasks.
	if c.created {
		n := len(c.runs)
		var (
			ids        = make([][16]byte, 0, n)
			wfs        = make([]string, 0, n)
			tenants    = make([]string, 0, n)
			sts        = make([]string, 0, n)
			fsteps     = make([]string, 0, n)
			errs       = make([]string, 0, n)
			shapes     = make([][16]byte, 0, n)
			inputs     = make([][]byte, 0, n)
			createdAt  = make([]pgtype.Timestamptz, 0, n)
			finishedAt = make([]pgtype.Timestamptz, 0, n)
		)
		for _, r := range c.runs {
			rec := &r.Rec
			ids = append(ids, rec.ID)
			wfs = append(wfs, rec.Workflow)
			tenants = append(tenants, rec.Tenant)
			shapes = append(shapes, c.shapeOf(r))
			sts = append(sts, string(rec.Status))
			inputs = append(inputs, rec.Input)
			fsteps = append(fsteps, rec.FailedStep)
			errs = append(errs, rec.Error)
			createdAt = append(createdAt, stamp(rec.CreatedAt))
			finishedAt = append(finishedAt, stamp(rec.FinishedAt))
		}
		b.Queue(q.insertRuns, ids, wfs, tenants, shapes, sts, inputs, fsteps, errs, createdAt, finishedAt)
	}

	// (3) Tasks.
	nDirty := 0
	for _, r := range c.runs {
		for _, dirty := range r.Dirty {
			if dirty {
				nDirty++
			}
		}
	}
	var ins, upd *taskCols
	if c.created {
		ins, upd = newTaskCols(nDirty), newTaskCols(0)
	} else {
		ins, upd = newTaskCols(0), newTaskCols(nDirty)
	}
	for _, r := range c.runs {
		for i, dirty := range r.Dirty {
			if !dirty || i >= len(r.Tasks) {
				continue
			}
			if c.created || (r.OnFailureCreated && i == r.Shape.Len()) {
				ins.add(r, i, &c.cols[r][i])
			} else {
				upd.add(r, i, &c.cols[r][i])
			}
		}
	}
	if len(upd.runIDs) > 0 {
		b.Queue(q.updateTasks, upd.runIDs, upd.names, upd.states, upd.attempts, upd.tokens, upd.workers,
			upd.dues, upd.outputs, upd.errs, upd.starts, upd.finishes, upd.qIDs, upd.qAts, upd.qAttempts, upd.sIDs, upd.cIDs)
	}
	if len(ins.runIDs) > 0 {
		b.Queue(q.insertTasks, ins.runIDs, ins.names, ins.tenants, ins.idxs, ins.kinds, ins.states, ins.attempts,
			ins.tokens, ins.workers, ins.dues, ins.outputs, ins.errs, ins.starts, ins.finishes,
			ins.qIDs, ins.qAts, ins.qAttempts, ins.sIDs, ins.cIDs)
	}

	// (4) Ready rows, for enqueued tasks the call did not dequeue again.
	n := len(c.enq)
	var (
		rIDs     = make([]int64, 0, n)
		rRuns    = make([][16]byte, 0, n)
		rNames   = make([]string, 0, n)
		rWfs     = make([]string, 0, n)
		rTenants = make([]string, 0, n)
	)
	for _, e := range c.enq {
		if slices.Contains(e.r.Dequeued, e.i) {
			continue
		}
		rIDs = append(rIDs, e.id)
		rRuns = append(rRuns, e.r.Rec.ID)
		rNames = append(rNames, e.r.Tasks[e.i].Name)
		rWfs = append(rWfs, e.r.Rec.Workflow)
		rTenants = append(rTenants, e.r.Rec.Tenant)
	}
	switch {
	case len(rRuns) == 0:
	case c.deferred:
		b.Queue(q.insertIncoming, rRuns, rNames, rWfs, rTenants)
	default:
		b.Queue(q.insertReady, rIDs, rRuns, rNames, rWfs, rTenants)
	}

	// (5) Events that do not live in task rows.
	if n := len(eventRows); n > 0 {
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
		for k := range eventRows {
			e := &eventRows[k]
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

	// (6) Runs that changed.
	if !c.created {
		var (
			ids               [][16]byte
			sts, fsteps, errs []string
			finishedAt        []pgtype.Timestamptz
		)
		for _, r := range c.runs {
			if !r.RunChanged {
				continue
			}
			ids = append(ids, r.Rec.ID)
			sts = append(sts, string(r.Rec.Status))
			fsteps = append(fsteps, r.Rec.FailedStep)
			errs = append(errs, r.Rec.Error)
			finishedAt = append(finishedAt, stamp(r.Rec.FinishedAt))
		}
		if len(ids) > 0 {
			b.Queue(q.updateRuns, ids, sts, fsteps, errs, finishedAt)
		}
	}

	// (7) Notifications, delivered on commit.
	var notes []string
	switch {
	case len(rRuns) == 0:
	case c.deferred:
		notes = append(notes, payloadIncoming)
	default:
		notes = append(notes, string(store.TopicReady))
	}
	for _, r := range c.runs {
		if r.TimerSet {
			notes = append(notes, string(store.TopicTimer))
			break
		}
	}
	for _, r := range c.runs {
		if r.Settled {
			notes = append(notes, string(store.TopicRun)+":"+r.Rec.ID.String())
		}
	}
	if len(notes) > 0 {
		b.Queue(q.notify, channel, notes)
	}
	c.notes = notes
	return nil
}

// shapeOf returns the shape id recorded for a new run.
func (c *change) shapeOf(r *dag.Run) uuid.UUID { return c.shapeIDs[r] }

// ---- loading ------------------------------------------------------------------

// runRow is a locked run as loaded for a transition.
type runRow struct {
	rec     store.Run
	shapeID uuid.UUID
}

// loader loads runs for a transition: it locks their rows in id order, then
// reads their tasks, in the same round trip.
type loader struct {
	recs  []runRow
	tasks map[uuid.UUID][]store.Task
	cols  map[uuid.UUID][]eventCols
	// eventBase and clock are read after the locks are taken.
	eventBase int64
	clock     time.Time
}

func (l *loader) queue(q *queries, b *pgx.Batch, ids []uuid.UUID, lockReady bool) {
	l.tasks = make(map[uuid.UUID][]store.Task, len(ids))
	l.cols = make(map[uuid.UUID][]eventCols, len(ids))
	b.Queue(q.lockRuns, u16(ids)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var rr runRow
			var fin pgtype.Timestamptz
			var status string
			if err := rows.Scan(p16(&rr.rec.ID), &rr.rec.Workflow, &rr.rec.Tenant, p16(&rr.shapeID), &status,
				&rr.rec.FailedStep, &rr.rec.Error, &rr.rec.CreatedAt, &fin); err != nil {
				return err
			}
			rr.rec.Status = store.RunStatus(status)
			rr.rec.FinishedAt = tm(fin)
			l.recs = append(l.recs, rr)
		}
		return rows.Err()
	})
	if lockReady {
		// Waits for claims holding these rows; a new statement then sees
		// their commits when it loads the tasks.
		b.Queue(q.lockReady, u16(ids))
	}
	b.Queue(q.loadTasks, u16(ids)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var t store.Task
			var idx int32
			var kind, state string
			var due, start, fin, qAt, beat pgtype.Timestamptz
			var ec eventCols
			if err := rows.Scan(p16(&t.RunID), &t.Name, &idx, &kind, &state, &t.Attempt, &t.Token, &t.Worker,
				&due, &t.Error, &start, &fin, &ec.qID, &qAt, &ec.qAttempt, &ec.sID, &ec.cID, &beat); err != nil {
				return err
			}
			t.Kind, t.State = store.TaskKind(kind), store.TaskState(state)
			t.DueAt, t.StartedAt, t.FinishedAt, t.HeartbeatAt = tm(due), tm(start), tm(fin), tm(beat)
			ec.qAt, ec.attempt, ec.startedAt = tm(qAt), t.Attempt, t.StartedAt
			l.tasks[t.RunID] = append(l.tasks[t.RunID], t)
			l.cols[t.RunID] = append(l.cols[t.RunID], ec)
		}
		return rows.Err()
	})
	b.Queue(q.eventBlock).QueryRow(func(row pgx.Row) error {
		var block int64
		if err := row.Scan(&block, &l.clock); err != nil {
			return err
		}
		l.eventBase = block * eventBlockSize
		return nil
	})
}

// build wraps the loaded runs for the core, in id order.
func (l *loader) build(ctx context.Context, s *Store, q querier, c *change) error {
	ids := make([]uuid.UUID, len(l.recs))
	for i := range l.recs {
		ids[i] = l.recs[i].shapeID
	}
	shapes, err := s.shapesFor(ctx, q, ids)
	if err != nil {
		return err
	}
	for i := range l.recs {
		rr := &l.recs[i]
		r, err := dag.Load(rr.rec, shapes[rr.shapeID], l.tasks[rr.rec.ID])
		if err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
		c.add(r)
		c.cols[r] = l.cols[rr.rec.ID]
	}
	c.eventBase = l.eventBase
	return nil
}

// plan describes one transition call for transition.
type plan struct {
	// now is the transition time; zero means the database's now(), read
	// once in the transaction.
	now time.Time
	// ids are the runs to lock and load, when known up front.
	ids []uuid.UUID
	// pick, when set, queues queries in the first round trip (after BEGIN)
	// that choose the runs, and picked returns their ids afterwards.
	pick   func(b *pgx.Batch)
	picked func() []uuid.UUID
	// apply runs the core's transitions on the loaded runs.
	apply func(ctx context.Context, tx querier, c *change) error
	// extra queues statements after the writes, in the same round trip.
	extra func(b *pgx.Batch, c *change)
	// lockReady locks the ready rows of the runs before loading their tasks
	// (after a lost race).
	lockReady bool
}

// transition runs one transition in its own transaction: it locks and loads
// the runs, calls apply, persists the change and commits. It takes two round
// trips (begin+load, writes+commit), three when the change enqueues or
// dequeues (tenant locks) or when pick is set (pick, then load).
func (s *Store) transition(ctx context.Context, p *plan) error {
	now := p.now
	b := &pgx.Batch{}
	if now.IsZero() {
		b.Queue(s.q.now).QueryRow(func(row pgx.Row) error { return row.Scan(&now) })
	}
	var l loader
	if p.pick != nil {
		p.pick(b)
	} else if len(p.ids) > 0 {
		l.queue(&s.q, b, p.ids, p.lockReady)
	}
	tx, err := s.beginOwn(ctx, b)
	if err != nil {
		return fmt.Errorf("pgstore: begin: %w", err)
	}
	defer tx.close(ctx)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgstore: load runs: %w", err)
	}
	if p.pick != nil {
		ids := p.picked()
		if len(ids) > 0 {
			b = &pgx.Batch{}
			l.queue(&s.q, b, ids, p.lockReady)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return fmt.Errorf("pgstore: load runs: %w", err)
			}
		}
	}
	if p.now.IsZero() && l.eventBase != 0 {
		// Transition times are read after the runs are locked, so that they
		// never go back along a run's history.
		now = l.clock
	}
	c := newChange(now)
	if err := l.build(ctx, s, tx, c); err != nil {
		return err
	}
	if err := p.apply(ctx, tx, c); err != nil {
		return err
	}
	var extra func(b *pgx.Batch)
	if p.extra != nil {
		extra = func(b *pgx.Batch) { p.extra(b, c) }
	}
	return s.persist(ctx, tx, c, extra, tx)
}
