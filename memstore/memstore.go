// Package memstore is an in-memory implementation of the durable store, for
// tests and demos. It runs the same transition logic as the PostgreSQL store
// (internal/core/dag), passes the same conformance suite, implements fair queuing
// with the same arithmetic (internal/core/fairq), and supports notifications and
// leader election between engines sharing one Store. Inside a
// testing/synctest bubble it follows virtual time, so the real engine runs a
// 24-hour sleep in milliseconds.
//
// Nothing survives the process; use pgstore for durability.
package memstore

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/core/fairq"
	"github.com/effectivelabs/durable/store"
)

// Store is an in-memory store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	runs     map[uuid.UUID]*runState
	shapes   map[*durabletype.Shape]*dag.Compiled
	versions []store.VersionRecord // versions.go
	queues   fairq.Queues
	ready    readyHeap
	queued   map[taskKey]int64     // task -> id of its live ready entry
	queuedAt map[taskKey]time.Time // task -> when it became ready
	timers   map[taskKey]time.Time
	running  map[taskKey]string        // task -> tenant
	inFlight map[string]int            // tenant -> RUNNING tasks
	counts   map[dag.RunCountKey]int   // settled runs, by minute
	keys     map[dag.IdemKey]uuid.UUID // idempotency keys of the runs kept
	prio     map[laneKey][]readyEntry  // ready entries above the default priority, by lane
	deadline map[uuid.UUID]time.Time   // runs with a deadline, not settled
	eventID  int64

	// Concurrency keys and rate limits (see internal/core/dag/flow.go): slots held per
	// key, parked tasks per key in FIFO order, the key of each parked task,
	// and admissions per rate-limit window.
	slots     map[string]int
	parked    map[string][]taskKey
	parkedKey map[taskKey]string
	rates     map[dag.RateKey]int
	// rateUntil: when a ready task admitted under a rate limit stops being
	// claimable (dag.RateExpired); FireTimers requeues it then.
	rateUntil map[taskKey]time.Time
	// schedules holds the cron schedules (see schedule.go); nil until the
	// first is created.
	schedules map[durabletype.ScheduleKey]*durabletype.Schedule

	// Events and waits (see events.go): the WAITING tasks of each tenant
	// and wait key, each waiting task's key, the events kept (by tenant
	// and key, in the order sent) and the last message ID.
	waiting   map[waitKey]map[taskKey]struct{}
	waitOf    map[taskKey]waitKey
	sent      map[waitKey][]message
	messageID int64
	// waitingAll holds every WAITING task (events, signals, child runs,
	// map steps), for the stats.
	waitingAll map[taskKey]struct{}

	// workers holds the worker records (see workers.go), by ID; nil until
	// the first registers.
	workers map[string]*store.Worker

	subMu  sync.Mutex
	subs   map[int]func(store.Notification)
	nextID int

	leader chan struct{}
	// leaderID is the ID of the caller of Lead that leads now ("" when none),
	// under mu: ListWorkers lists it as the leader, and nobody else.
	leaderID string
	// terms counts the leaderships Lead handed out, and term is the
	// current one's (0 when none leads), under mu: the fence of the
	// leader-only writes (fenced).
	terms, term int64
}

var (
	_ store.Store     = (*Store)(nil)
	_ store.Listener  = (*Store)(nil)
	_ store.Elector   = (*Store)(nil)
	_ store.TxCreator = (*Store)(nil)
)

type taskKey struct {
	run  uuid.UUID
	task int
}

type laneKey struct{ workflow, tenant string }

// outranking returns the live ready entry of e's lane that takes e's slot
// by the rule of priorities (fairq.Displace: e holds the lane's lowest
// slot), if another does, and removes it from the lane's list, which it
// prunes of dead entries on the way. Priorities rank the entries of one
// version of the workflow (their runs'), as in pgstore.
func (s *Store) outranking(e readyEntry, now time.Time) (readyEntry, bool) {
	lk := laneKey{e.workflow, e.tenant}
	list := s.prio[lk]
	if len(list) == 0 {
		return readyEntry{}, false
	}
	list = slices.DeleteFunc(list, func(x readyEntry) bool { id, ok := s.queued[x.key]; return !ok || id != x.id })
	lane := []fairq.Queued{{ID: e.id, Priority: e.priority}}
	for _, x := range list {
		if x.key != e.key && !dag.RateExpired(s.rateUntil[x.key], now) &&
			s.runs[x.key.run].rec.Version == s.runs[e.key.run].rec.Version {
			lane = append(lane, fairq.Queued{ID: x.id, Priority: x.priority})
		}
	}
	moves := fairq.Displace(lane, 1)
	best := slices.IndexFunc(list, func(x readyEntry) bool { to, ok := moves[x.id]; return ok && to == e.id })
	if best < 0 {
		s.setPrio(lk, list)
		return readyEntry{}, false
	}
	h := list[best]
	s.setPrio(lk, slices.Delete(list, best, best+1))
	return h, true
}

func (s *Store) setPrio(lk laneKey, list []readyEntry) {
	if len(list) == 0 {
		delete(s.prio, lk)
		return
	}
	s.prio[lk] = list
}

type runState struct {
	rec    store.Run
	shape  *dag.Compiled
	tasks  []store.Task
	events []durabletype.Event
	// items holds the items of each map step that fanned out, by number.
	items map[int][]store.Task
	// signals are the signals sent to the run, in order.
	signals []message
}

// New returns an empty store.
func New() *Store {
	return &Store{
		runs:       make(map[uuid.UUID]*runState),
		shapes:     make(map[*durabletype.Shape]*dag.Compiled),
		queued:     make(map[taskKey]int64),
		queuedAt:   make(map[taskKey]time.Time),
		timers:     make(map[taskKey]time.Time),
		running:    make(map[taskKey]string),
		inFlight:   make(map[string]int),
		counts:     make(map[dag.RunCountKey]int),
		keys:       make(map[dag.IdemKey]uuid.UUID),
		prio:       make(map[laneKey][]readyEntry),
		deadline:   make(map[uuid.UUID]time.Time),
		slots:      make(map[string]int),
		parked:     make(map[string][]taskKey),
		parkedKey:  make(map[taskKey]string),
		rates:      make(map[dag.RateKey]int),
		rateUntil:  make(map[taskKey]time.Time),
		waiting:    make(map[waitKey]map[taskKey]struct{}),
		waitOf:     make(map[taskKey]waitKey),
		sent:       make(map[waitKey][]message),
		waitingAll: make(map[taskKey]struct{}),
		subs:       make(map[int]func(store.Notification)),
		leader:     make(chan struct{}, 1),
	}
}

func now(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return dag.Timestamp(t)
}

// notes collects the notifications of one call, delivered after the lock is
// released.
type notes struct {
	ready, timer bool
	runs         []uuid.UUID
	cancelled    []uuid.UUID
	// settled are the settlements of the call, to report (see
	// store.SettledRun); with omit, those of its first change are left out
	// (FinishTasks reports them per outcome).
	settled []store.SettledRun
	omit    bool
}

func (s *Store) publish(n *notes) {
	if !n.ready && !n.timer && len(n.runs) == 0 && len(n.cancelled) == 0 {
		return
	}
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for _, deliver := range s.subs {
		if n.ready {
			deliver(store.Notification{Topic: store.TopicReady})
		}
		if n.timer {
			deliver(store.Notification{Topic: store.TopicTimer})
		}
		for _, id := range n.cancelled {
			deliver(store.Notification{Topic: store.TopicCancel, Payload: id.String()})
		}
		for _, id := range n.runs {
			deliver(store.Notification{Topic: store.TopicRun, Payload: id.String()})
		}
	}
}

// Listen implements store.Listener.
func (s *Store) Listen(ctx context.Context, deliver func(store.Notification)) error {
	s.subMu.Lock()
	id := s.nextID
	s.nextID++
	s.subs[id] = deliver
	s.subMu.Unlock()
	deliver(store.Notification{Topic: store.TopicResync})
	<-ctx.Done()
	s.subMu.Lock()
	delete(s.subs, id)
	s.subMu.Unlock()
	return ctx.Err()
}

// Lead implements store.Elector: one caller at a time leads; leadership
// passes on when the leader's context is done. Each leadership has a new
// term, which lead's context carries (store.WithTerm). One process cannot
// freeze apart from the store, so a leadership has no expiry here.
func (s *Store) Lead(ctx context.Context, id string, lead func(ctx context.Context)) error {
	for {
		select {
		case s.leader <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		term := s.setLeader(id)
		lead(store.WithTerm(ctx, term))
		s.setLeader("")
		<-s.leader
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// compile compiles the shape of a new run of workflow, once per shape
// value, and records its version (versions.go).
func (s *Store) compile(workflow string, shape *durabletype.Shape, at time.Time) (*dag.Compiled, error) {
	if c, ok := s.shapes[shape]; ok {
		return c, nil
	}
	c, err := dag.Compile(shape)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", durabletype.ErrInvalidRun, err)
	}
	s.shapes[shape] = c
	s.recordVersion(workflow, c, at)
	return c, nil
}

// CreateRuns implements store.Store.
func (s *Store) CreateRuns(ctx context.Context, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	return s.CreateRunsTx(ctx, nil, p)
}

// CreateRunsTx implements store.TxCreator. The in-memory store has no
// transactions of its own; tx is ignored.
func (s *Store) CreateRunsTx(ctx context.Context, _ any, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := now(p.Now)
	var n notes
	s.mu.Lock()
	res, err := s.createRuns(p, t, &n)
	s.mu.Unlock()
	s.publish(&n)
	return res, err
}

func (s *Store) createRuns(p *store.CreateRunsParams, t time.Time, n *notes) (*store.CreateRunsResult, error) {
	shapes := make([]*dag.Compiled, len(p.Runs))
	for i := range p.Runs {
		nr := &p.Runs[i]
		if err := dag.CheckNewRun(nr); err != nil {
			return nil, fmt.Errorf("memstore: run %s: %w", nr.ID, err)
		}
		if err := dag.CheckKeys(nr); err != nil {
			return nil, fmt.Errorf("memstore: run %s: %w", nr.ID, err)
		}
		c, err := s.compile(nr.Workflow, nr.Shape, t)
		if err != nil {
			return nil, fmt.Errorf("memstore: run %s: %w", nr.ID, err)
		}
		shapes[i] = c
	}
	res, err := dag.Dedupe(p.Runs, func(id uuid.UUID) (string, string, bool) {
		rs, ok := s.runs[id]
		if !ok {
			return "", "", false
		}
		return rs.rec.Workflow, rs.rec.Tenant, true
	}, func(k dag.IdemKey) (uuid.UUID, bool) {
		id, ok := s.keys[k]
		return id, ok
	})
	if err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	// New tenants get their groups in ascending name order, as in PostgreSQL
	// (which locks tenant rows in that order).
	names := make([]string, 0, len(p.Runs))
	for i := range p.Runs {
		if !res.Runs[i].Duplicate {
			names = append(names, p.Runs[i].Tenant)
		}
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if !s.queues.Ensure(name) {
			return nil, fmt.Errorf("memstore: tenant %s: %w", dag.Quote(name), durabletype.ErrTooManyTenants)
		}
	}
	c := dag.NewChange(t)
	for i := range p.Runs {
		nr := &p.Runs[i]
		if res.Runs[i].Duplicate {
			continue
		}
		startAt, _ := dag.Times(nr, t)
		rec := dag.NewRecord(nr, shapes[i], t)
		rec.Input = clone(nr.Input)
		r, fx := dag.StartKeyed(rec, shapes[i], nr.Keys, t, startAt)
		c.Add(r, fx)
		if k, ok := dag.KeyOf(nr); ok {
			s.keys[k] = nr.ID
		}
	}
	return res, s.persist(c, n)
}

// memTx is the in-memory store's side of the core's runner (dag.Tx): the
// store's lock is held for the whole call, which makes it one atomic unit.
type memTx struct {
	s *Store
	n *notes
	// shapes are the shapes new to the store of the child runs NewRun
	// prepared, recorded by Write with the unit's other writes.
	shapes []newShape
}

// newShape is a shape new to the store, compiled.
type newShape struct {
	workflow string
	shape    *durabletype.Shape
	c        *dag.Compiled
}

// persist completes and writes what a call's transitions did (dag.Commit),
// then applies the messages they left for other runs, each in a transition
// of its own, as pgstore does after its commit (deliver).
func (s *Store) persist(c *dag.Change, n *notes) error {
	if err := dag.Commit(context.Background(), &memTx{s: s, n: n}, c); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	return s.deliver(c, n)
}

// deliver applies the messages that committed change c left for other
// runs, each in a transition of its own, committed as persist commits
// (the messages those leave follow).
func (s *Store) deliver(c *dag.Change, n *notes) error {
	var outbox []dag.Message
	for {
		n.omit = false
		for _, r := range c.Runs {
			outbox = append(outbox, c.Effects[r].Outbox...)
		}
		if len(outbox) == 0 {
			return nil
		}
		m := outbox[0]
		outbox = outbox[1:]
		c = dag.NewChange(c.Now)
		if m.Kind == dag.MsgChild {
			// The result's output, as pgstore reads it when it writes the
			// message.
			m.Payload = nil
			if child := s.runs[m.Child]; child != nil {
				if i, ok := child.shape.Index(m.Result); ok && i < len(child.tasks) && child.tasks[i].State == durabletype.TaskCompleted {
					m.Payload = clone(child.tasks[i].Output)
				}
			}
		}
		c.Apply([]dag.Message{m}, func(m *dag.Message) *dag.Run {
			if s.runs[m.Run] == nil {
				return nil
			}
			return s.load(map[uuid.UUID]*dag.Run{}, m.Run)
		})
		if err := dag.Commit(context.Background(), &memTx{s: s, n: n}, c); err != nil {
			return fmt.Errorf("memstore: %w", err)
		}
	}
}

// Write implements dag.Tx: the new shapes NewRun prepared are recorded,
// queue entries of dequeued tasks go, then the runs, their tasks and the
// indexes over them (timers, running tasks) are updated, the enqueued
// tasks are placed in the fair queue in order, and the events are
// appended.
func (tx *memTx) Write(_ context.Context, c *dag.Change) error {
	s, n := tx.s, tx.n
	for _, ns := range tx.shapes {
		if _, ok := s.shapes[ns.shape]; !ok {
			s.shapes[ns.shape] = ns.c
			s.recordVersion(ns.workflow, ns.c, c.Now)
		}
	}
	var until map[dag.TaskAt]time.Time
	if c.Admitted != nil {
		if err := s.writeAdmission(c); err != nil {
			return err
		}
		n.ready = true
		until = c.Admitted.Until
	}
	for _, r := range c.Runs {
		fx := c.Effects[r]
		id := r.Rec.ID
		for _, i := range fx.Dequeued {
			k := keyOf(r, i)
			delete(s.queued, k)
			delete(s.queuedAt, k)
			delete(s.rateUntil, k)
		}
		rs := s.runs[id]
		if fx.Created {
			rs = &runState{shape: r.Shape}
			s.runs[id] = rs
		}
		rs.rec, rs.tasks = r.Rec, r.Tasks[:len(r.Tasks):len(r.Tasks)]
		if fx.Reshaped {
			// Moved to another version: its steps kept their indexes, so
			// its queue entries, timers and claims stand as they are.
			rs.shape = r.Shape
			s.recordVersion(r.Rec.Workflow, r.Shape, c.Now)
		}
		if r.Rec.Deadline.IsZero() {
			delete(s.deadline, id)
		} else {
			s.deadline[id] = r.Rec.Deadline
		}
		for _, i := range fx.Deleted {
			s.deleteItem(rs, keyOf(r, i))
		}
		for _, i := range fx.Tasks {
			k, t := keyOf(r, i), r.Task(i)
			if dag.IsItem(i) {
				s.storeItem(rs, r.StepOf(i), t)
			}
			s.noteWait(k, rs, t)
			if at := dag.Timer(t); at.IsZero() {
				delete(s.timers, k)
			} else {
				s.timers[k] = at
			}
			tenant, wasRunning := s.running[k]
			if isRunning := t.State == durabletype.TaskRunning; isRunning && !wasRunning {
				s.running[k] = r.Rec.Tenant
				s.inFlight[r.Rec.Tenant]++
			} else if !isRunning && wasRunning {
				delete(s.running, k)
				if s.inFlight[tenant]--; s.inFlight[tenant] == 0 {
					delete(s.inFlight, tenant)
				}
			}
		}
		for _, e := range fx.Events {
			s.eventID++
			e.ID = s.eventID
			rs.events = append(rs.events, e)
		}
		if fx.Settled {
			n.runs = append(n.runs, id)
			s.counts[dag.SettledCount(&r.Rec)]++
			if !n.omit {
				n.settled = append(n.settled, r.Settlement())
			}
		}
		if fx.Cancelled {
			n.cancelled = append(n.cancelled, id)
		}
	}
	for _, e := range c.Enqueued {
		// Every run's tenant got a group when the run was created.
		if err := s.place(keyOf(e.R, e.I), e.R.Rec.Workflow, e.R.Rec.Tenant, c); err != nil {
			return err
		}
		if at := until[e]; !at.IsZero() {
			s.rateUntil[keyOf(e.R, e.I)] = at
		}
	}
	n.ready = n.ready || len(c.Enqueued) > 0
	n.timer = n.timer || c.Timer()
	return nil
}

// load wraps a stored run for transitions, once per call: loaded caches
// the runs a call already loaded.
func (s *Store) load(loaded map[uuid.UUID]*dag.Run, id uuid.UUID) *dag.Run {
	if r, ok := loaded[id]; ok {
		return r
	}
	rs := s.runs[id]
	r, err := dag.Load(rs.rec, rs.shape, slices.Clone(rs.tasks))
	if err != nil {
		panic(err) // the store built rs itself; this is an invariant
	}
	r.LoadItems = func(_ *dag.Run, m int) ([]store.Task, error) { return cloneTasks(present(rs.items[m])), nil }
	loaded[id] = r
	return r
}

// loadRecords loads into its run every record of the function's body
// outcome o records calls of (dag.HasRecords), as pgstore does.
func (s *Store) loadRecords(loaded map[uuid.UUID]*dag.Run, o *store.Outcome) {
	if !dag.HasRecords(o) {
		return
	}
	rs, key, ok := s.find(o.Task)
	if !ok || key.task >= dag.ItemBase || !rs.shape.IsFunc(key.task) {
		return
	}
	r := s.load(loaded, o.Task.RunID)
	if err := r.SetRecords(key.task, cloneTasks(present(rs.items[key.task]))); err != nil {
		panic(err) // the store built rs itself
	}
}

// index returns the index of the task k names in r, loading it into r if
// it is an item.
func (s *Store) index(r *dag.Run, k taskKey) int {
	if k.task < dag.ItemBase {
		return k.task
	}
	m, n := itemOf(k)
	if i, ok := r.ItemIndex(m, n); ok {
		return i
	}
	rs := s.runs[k.run]
	idx, err := r.AddItems([]store.Task{cloneTask(rs.items[m][n])})
	if err != nil {
		panic(err) // the store built rs itself
	}
	return idx[0]
}

// keyOf returns the key of task i of r: its index for a step, a stable
// encoding of its map step and number for an item (indexes of items are
// only good for one call).
func keyOf(r *dag.Run, i int) taskKey {
	if !dag.IsItem(i) {
		return taskKey{r.Rec.ID, i}
	}
	return taskKey{r.Rec.ID, dag.ItemBase + r.StepOf(i)*dag.MaxItems + r.Task(i).Item}
}

// compareTasks orders the tasks of a run as pgstore does (by idx, then
// item): each step, then its items in item order.
func compareTasks(a, b taskKey) int {
	order := func(k taskKey) (int, int) {
		if k.task < dag.ItemBase {
			return k.task, -1
		}
		return itemOf(k)
	}
	am, ak := order(a)
	bm, bk := order(b)
	return cmp.Or(cmp.Compare(am, bm), cmp.Compare(ak, bk))
}

// itemOf decodes the key of an item: its map step and number.
func itemOf(k taskKey) (m, n int) {
	x := k.task - dag.ItemBase
	return x / dag.MaxItems, x % dag.MaxItems
}

// task returns the stored task k names.
func (rs *runState) task(k taskKey) *store.Task {
	if k.task < dag.ItemBase {
		return &rs.tasks[k.task]
	}
	m, n := itemOf(k)
	return &rs.items[m][n]
}

// storeItem records item t of map step m.
func (s *Store) storeItem(rs *runState, m int, t *store.Task) {
	if rs.items == nil {
		rs.items = map[int][]store.Task{}
	}
	list := rs.items[m]
	for len(list) <= t.Item {
		list = append(list, store.Task{})
	}
	list[t.Item] = cloneTask(*t)
	rs.items[m] = list
}

// deleteItem removes an item that a map step no longer fans out to; such
// items are finished (no queue entry, timer or claim).
func (s *Store) deleteItem(rs *runState, k taskKey) {
	m, n := itemOf(k)
	if list := rs.items[m]; n < len(list) {
		rs.items[m] = list[:n]
	}
}

func cloneTask(t store.Task) store.Task {
	t.Output = clone(t.Output)
	t.Input = clone(t.Input)
	return t
}

// present returns the items of a list that are there: a function's
// records may be recorded out of their order (its steps run in
// parallel), leaving gaps for a while.
func present(ts []store.Task) []store.Task {
	out := ts[:0:0]
	for _, t := range ts {
		if t.Name != "" {
			out = append(out, t)
		}
	}
	return out
}

func cloneTasks(ts []store.Task) []store.Task {
	out := make([]store.Task, len(ts))
	for i := range ts {
		out[i] = cloneTask(ts[i])
	}
	return out
}

// ClaimTasks implements store.Store.
func (s *Store) ClaimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := now(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := dag.NewChange(t)
	loaded := map[uuid.UUID]*dag.Run{}
	// claimed are the tasks claimed, with when each became ready.
	type claim struct {
		key     taskKey
		readyAt time.Time
	}
	var claimed []claim
	var skipped []readyEntry
	var top int64
	for len(claimed) < p.Limit && s.ready.Len() > 0 {
		e := heap.Pop(&s.ready).(readyEntry)
		if id, ok := s.queued[e.key]; !ok || id != e.id {
			continue // dequeued or re-enqueued since
		}
		if !dag.ClaimServes(p, e.workflow, s.runs[e.key.run].rec.Version) ||
			!dag.UnderTenantLimit(p.TenantLimit, s.inFlight[e.tenant]) ||
			dag.RateExpired(s.rateUntil[e.key], t) {
			skipped = append(skipped, e)
			continue
		}
		top = e.id
		key := e.key
		if h, ok := s.outranking(e, t); ok {
			// h takes e's slot; e moves to h's.
			key = h.key
			moved := readyEntry{id: h.id, key: e.key, workflow: e.workflow, tenant: e.tenant, priority: e.priority}
			s.queued[e.key] = h.id
			heap.Push(&s.ready, moved)
			if moved.priority > 0 {
				lk := laneKey{e.workflow, e.tenant}
				s.prio[lk] = append(s.prio[lk], moved)
			}
		} else {
			delete(s.queued, e.key)
		}
		delete(s.queued, key)
		readyAt := s.queuedAt[key]
		delete(s.queuedAt, key)
		delete(s.rateUntil, key)
		r := s.load(loaded, key.run)
		fx, ok := r.Claim(s.index(r, key), e.id, p.WorkerID, t)
		if !ok {
			continue
		}
		c.Add(r, fx)
		s.inFlight[e.tenant]++ // counted now, for the cap within this call
		s.running[key] = e.tenant
		claimed = append(claimed, claim{key, readyAt})
	}
	for _, e := range skipped {
		heap.Push(&s.ready, e)
	}
	if top != 0 {
		s.queues.Claimed(p.WorkerID, p.Workflows, top)
	}
	var n notes
	if err := s.persist(c, &n); err != nil {
		return nil, err
	}
	out := make([]*store.ClaimedTask, len(claimed))
	for k, c := range claimed {
		out[k] = s.claimed(s.runs[c.key.run], c.key)
		out[k].ReadyAt, out[k].ClaimedAt = c.readyAt, t
	}
	return out, nil
}

func (s *Store) claimed(rs *runState, k taskKey) *store.ClaimedTask {
	t := rs.task(k)
	i := k.task
	input := rs.rec.Input
	if k.task >= dag.ItemBase {
		i, _ = itemOf(k)
		input = t.Input
	}
	c := &store.ClaimedTask{
		RunID: rs.rec.ID, Workflow: rs.rec.Workflow, Version: rs.rec.Version, Tenant: rs.rec.Tenant, Step: t.Name, Kind: t.Kind,
		Attempt: t.Attempt, Token: t.Token, Retry: rs.shape.Retry(i), Input: clone(input),
		Timeout: rs.shape.Timeout(i), TraceParent: rs.rec.TraceParent,
	}
	if t.Kind == durabletype.KindItem {
		c.Map, c.Item = rs.shape.Name(i), t.Item
		return c
	}
	if t.Kind == durabletype.KindFunc {
		for _, rec := range present(rs.items[i]) {
			// What pgstore reads of a record (funcRecords).
			c.Records = append(c.Records, store.Task{RunID: rec.RunID, Name: rec.Name, Kind: rec.Kind, State: rec.State,
				Attempt: rec.Attempt, Output: clone(rec.Output), Error: rec.Error, Child: rec.Child, Item: rec.Item, Input: clone(rec.Input)})
		}
		return c
	}
	for _, p := range rs.shape.Parents(i) {
		pt := &rs.tasks[p]
		if pt.State != durabletype.TaskCompleted {
			continue
		}
		if pt.Kind == durabletype.KindMap {
			if c.ParentItems == nil {
				c.ParentItems = make(map[string][][]byte)
			}
			items := make([][]byte, pt.Items)
			for n := range items {
				items[n] = clone(rs.items[p][n].Output)
			}
			c.ParentItems[pt.Name] = items
			continue
		}
		if c.ParentOutputs == nil {
			c.ParentOutputs = make(map[string][]byte)
		}
		c.ParentOutputs[pt.Name] = clone(pt.Output)
	}
	if t.Kind == durabletype.KindOnFailure {
		c.FailedStep, c.Error = rs.rec.FailedStep, rs.rec.Error
	}
	return c
}

// find returns the run and the key of the task a claim names.
func (s *Store) find(ref store.TaskRef) (*runState, taskKey, bool) {
	rs, ok := s.runs[ref.RunID]
	if !ok {
		return nil, taskKey{}, false
	}
	if step, n, ok := dag.ParseItem(ref.Step); ok {
		m, ok := rs.shape.Index(step)
		if !ok || m >= rs.shape.Len() || n >= len(rs.items[m]) {
			return nil, taskKey{}, false
		}
		return rs, taskKey{ref.RunID, dag.ItemBase + m*dag.MaxItems + n}, true
	}
	i, ok := rs.shape.Index(ref.Step)
	if !ok || i >= len(rs.tasks) {
		return nil, taskKey{}, false
	}
	return rs, taskKey{ref.RunID, i}, true
}

// FinishTasks implements store.Store.
func (s *Store) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	return s.finishTasks(ctx, p, nil)
}

// finishTasks is FinishTasks; recorded, when set, is called with the
// results once the outcomes are recorded, before anything is published and
// with the store still locked.
func (s *Store) finishTasks(ctx context.Context, p *store.FinishTasksParams, recorded func([]store.FinishResult)) ([]store.FinishResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for k := range p.Outcomes {
		if !dag.ValidOutcome(&p.Outcomes[k]) {
			return nil, fmt.Errorf("memstore: outcome %d: %w: kind %d", k, durabletype.ErrInvalidOutcome, p.Outcomes[k].Kind)
		}
	}
	t := now(p.Now)
	n := notes{omit: true}
	s.mu.Lock()
	c := dag.NewChange(t)
	loaded := map[uuid.UUID]*dag.Run{}
	outcomes := slices.Clone(p.Outcomes)
	for k := range outcomes {
		outcomes[k].Output = clone(outcomes[k].Output)
	}
	for k := range outcomes {
		s.loadRecords(loaded, &outcomes[k])
	}
	res := c.Finish(outcomes, func(ref store.TaskRef) (*dag.Run, int, bool) {
		_, key, ok := s.find(ref)
		if !ok {
			return nil, 0, false
		}
		r := s.load(loaded, ref.RunID)
		return r, s.index(r, key), true
	})
	err := s.persist(c, &n)
	if err == nil && recorded != nil {
		recorded(res)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.publish(&n)
	if len(res) > 0 {
		res[0].Cascade = n.settled
	}
	return res, nil
}

// Heartbeat implements store.Store.
func (s *Store) Heartbeat(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := now(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &store.HeartbeatResult{}
	for _, ref := range p.Tasks {
		rs, key, ok := s.find(ref)
		if !ok {
			res.Lost = append(res.Lost, ref)
			continue
		}
		task := rs.task(key)
		if dag.Beats(task, ref.Token) {
			task.HeartbeatAt = t
		}
		if !dag.Current(task, ref.Token, rs.rec.Status) {
			res.Lost = append(res.Lost, ref)
			switch {
			case dag.LostToCancel(task, rs.rec.Status):
				res.Cancelled = append(res.Cancelled, ref)
			case dag.LostToTimeout(task):
				res.TimedOut = append(res.TimedOut, ref)
			}
		}
	}
	return res, nil
}

// FireTimers implements store.Store.
func (s *Store) FireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
	if err := s.fenced(ctx); err != nil {
		return nil, err
	}
	t := now(p.Now)
	var n notes
	s.mu.Lock()
	type due struct {
		k  taskKey
		at time.Time
	}
	var fire []due
	for k, at := range s.timers {
		if !at.After(t) {
			fire = append(fire, due{k, at})
		}
	}
	slices.SortFunc(fire, func(a, b due) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.k.run.String(), b.k.run.String()), compareTasks(a.k, b.k))
	})
	if p.Limit > 0 && len(fire) > p.Limit {
		fire = fire[:p.Limit]
	}
	res := &store.FireTimersResult{}
	c := dag.NewChange(t)
	loaded := map[uuid.UUID]*dag.Run{}
	var expired []uuid.UUID
	for id, at := range s.deadline {
		if !at.After(t) {
			expired = append(expired, id)
		}
	}
	slices.SortFunc(expired, func(a, b uuid.UUID) int {
		return cmp.Or(s.deadline[a].Compare(s.deadline[b]), cmp.Compare(a.String(), b.String()))
	})
	if p.Limit > 0 && len(expired) > p.Limit {
		expired = expired[:p.Limit]
	}
	var timers []dag.Due
	for _, id := range expired {
		timers = append(timers, dag.Due{R: s.load(loaded, id), Kind: dag.DueDeadline})
	}
	for _, d := range fire {
		r := s.load(loaded, d.k.run)
		timers = append(timers, dag.Due{R: r, I: s.index(r, d.k)})
	}
	var lapsed []due
	for k, at := range s.rateUntil {
		if dag.RateExpired(at, t) {
			lapsed = append(lapsed, due{k, at})
		}
	}
	slices.SortFunc(lapsed, func(a, b due) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.k.run.String(), b.k.run.String()), cmp.Compare(a.k.task, b.k.task))
	})
	for _, d := range lapsed {
		r := s.load(loaded, d.k.run)
		timers = append(timers, dag.Due{R: r, I: s.index(r, d.k), Kind: dag.DueLapsed})
	}
	res.Fired = c.Fire(timers, p.Rand)
	if err := s.persist(c, &n); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	for _, at := range s.timers {
		if wait := at.Sub(t); !res.HasNext || wait < res.Next {
			res.Next, res.HasNext = wait, true
		}
	}
	for _, at := range s.deadline {
		if wait := at.Sub(t); !res.HasNext || wait < res.Next {
			res.Next, res.HasNext = wait, true
		}
	}
	for _, at := range s.rateUntil {
		if wait := at.Sub(t); !res.HasNext || wait < res.Next {
			res.Next, res.HasNext = wait, true
		}
	}
	res.Next = max(res.Next, 0)
	res.Settled = n.settled
	s.mu.Unlock()
	s.publish(&n)
	return res, nil
}

// RescueTasks implements store.Store.
func (s *Store) RescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	if err := s.fenced(ctx); err != nil {
		return nil, err
	}
	t := now(p.Now)
	var n notes
	s.mu.Lock()
	s.queues.Prune() // as pgstore's leader prunes its frontier rows
	var dead []taskKey
	for k := range s.running {
		if dag.Dead(s.runs[k.run].task(k), t, p.DeadAfter) {
			dead = append(dead, k)
		}
	}
	slices.SortFunc(dead, func(a, b taskKey) int {
		return cmp.Or(cmp.Compare(a.run.String(), b.run.String()), compareTasks(a, b))
	})
	if p.Limit > 0 && len(dead) > p.Limit {
		dead = dead[:p.Limit]
	}
	res := &store.RescueTasksResult{}
	c := dag.NewChange(t)
	loaded := map[uuid.UUID]*dag.Run{}
	at := make([]dag.TaskAt, len(dead))
	for n, k := range dead {
		r := s.load(loaded, k.run)
		at[n] = dag.TaskAt{R: r, I: s.index(r, k)}
	}
	res.Rescued, res.Workflows = c.Rescue(at, p.DeadAfter, p.Rand)
	err := s.persist(c, &n)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.publish(&n)
	res.Settled = n.settled
	return res, nil
}

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, id uuid.UUID) (*store.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, ok := s.runs[id]
	if !ok {
		return nil, durabletype.ErrRunNotFound
	}
	rec := rs.rec
	rec.Input = clone(rec.Input)
	rec.Shape = rs.shape.Shape
	if rec.Parent != nil {
		p := *rec.Parent
		rec.Parent = &p
	}
	return &rec, nil
}

// ListTasks implements store.Store.
func (s *Store) ListTasks(ctx context.Context, id uuid.UUID) ([]*store.Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, ok := s.runs[id]
	if !ok {
		return nil, durabletype.ErrRunNotFound
	}
	out := make([]*store.Task, 0, len(rs.tasks))
	for i := range rs.tasks {
		t := cloneTask(rs.tasks[i])
		out = append(out, &t)
		if t.Kind == durabletype.KindMap || t.Kind == durabletype.KindFunc {
			for _, it := range present(rs.items[i]) {
				it := cloneTask(it)
				out = append(out, &it)
			}
		}
	}
	return out, nil
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, id uuid.UUID) ([]*durabletype.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, ok := s.runs[id]
	if !ok {
		return nil, durabletype.ErrRunNotFound
	}
	out := make([]*durabletype.Event, len(rs.events))
	for i := range rs.events {
		e := rs.events[i]
		out[i] = &e
	}
	return out, nil
}

// ListRuns implements store.Store.
func (s *Store) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.ListRunsResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := max(p.Limit, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []store.RunKey
	for id, rs := range s.runs {
		k := store.RunKey{CreatedAt: rs.rec.CreatedAt, ID: id}
		if (p.After == nil || dag.Newer(*p.After, k)) && dag.Matches(&p.Filter, &rs.rec) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b store.RunKey) int {
		if dag.Newer(a, b) {
			return -1
		}
		return 1
	})
	res := &store.ListRunsResult{More: len(keys) > limit}
	for _, k := range keys[:min(limit, len(keys))] {
		rec := &s.runs[k.ID].rec
		sum := durabletype.RunSummary{
			ID: rec.ID, Workflow: rec.Workflow, Version: rec.Version, Tenant: rec.Tenant, Status: rec.Status,
			FailedStep: rec.FailedStep, Error: rec.Error, CreatedAt: rec.CreatedAt, FinishedAt: rec.FinishedAt,
		}
		if rec.Parent != nil {
			sum.ParentID, sum.ParentStep = rec.Parent.RunID, rec.Parent.Step
		}
		res.Runs = append(res.Runs, sum)
	}
	return res, nil
}

// ActOnRuns implements store.Store: the runs are loaded under the
// store's lock, the core applies the action (dag.Change.Act), and the
// change is committed as one unit (persist), as for every transition.
func (s *Store) ActOnRuns(ctx context.Context, p *store.ActOnRunsParams) ([]store.RunActionResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var n notes
	c := dag.NewChange(now(p.Now))
	loaded := map[uuid.UUID]*dag.Run{}
	s.mu.Lock()
	out, err := c.Act(p, func(id uuid.UUID) *dag.Run {
		if s.runs[id] == nil {
			return nil
		}
		return s.load(loaded, id)
	})
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("memstore: %w", err)
	}
	s.uncount(loaded)
	err = s.persist(c, &n)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.publish(&n)
	if len(out) > 0 {
		out[0].Settled = n.settled
	}
	return out, nil
}

// uncount takes the runs an action made settle no more (a replay) out of
// the settled counts, where they were counted when they settled: the
// stats count each run under its current status, once. The records in
// s.runs are still those from before the action.
func (s *Store) uncount(loaded map[uuid.UUID]*dag.Run) {
	for id, r := range loaded {
		old := &s.runs[id].rec
		if !old.Settled() || (r.Rec.FinishedAt.Equal(old.FinishedAt) && r.Rec.Status == old.Status) {
			continue
		}
		k := dag.SettledCount(old)
		if s.counts[k]--; s.counts[k] <= 0 {
			delete(s.counts, k)
		}
	}
}

// Stats implements store.Store.
func (s *Store) Stats(ctx context.Context, p *store.StatsParams) (*durabletype.Stats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := now(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	type wvt struct{ workflow, version, tenant string }
	queues := map[wvt]*durabletype.QueueStats{}
	queue := func(rs *runState) *durabletype.QueueStats {
		k := wvt{rs.rec.Workflow, rs.rec.Version, rs.rec.Tenant}
		q := queues[k]
		if q == nil {
			q = &durabletype.QueueStats{Workflow: k.workflow, Version: k.version, Tenant: k.tenant}
			queues[k] = q
		}
		return q
	}
	in := func(rs *runState) bool { return p.Tenant == "" || rs.rec.Tenant == p.Tenant }
	// The tasks counted are found from the indexes that hold them (as
	// pgstore finds them from its queues), each once, and dag.CountTask
	// says where each counts.
	seen := map[taskKey]bool{}
	count := func(k taskKey) {
		if seen[k] {
			return
		}
		seen[k] = true
		rs := s.runs[k.run]
		if !in(rs) {
			return
		}
		t := rs.task(k)
		_, parked := s.parkedKey[k]
		if dag.GaugeOf(t, parked) != dag.Uncounted {
			dag.CountTask(queue(rs), t, parked, s.queuedAt[k])
		}
	}
	for k := range s.queued {
		count(k)
	}
	for k := range s.timers {
		count(k)
	}
	for k := range s.waitingAll { // waiting for an event, a child run or items
		count(k)
	}
	for k := range s.parkedKey { // parked behind a concurrency key
		count(k)
	}
	for k := range s.running {
		count(k)
	}
	st := &durabletype.Stats{}
	inflight := map[durabletype.RunCount]int{}
	for _, rs := range s.runs {
		if in(rs) && dag.InFlight(&rs.rec) {
			inflight[durabletype.RunCount{Workflow: rs.rec.Workflow, Version: rs.rec.Version, Tenant: rs.rec.Tenant, Status: rs.rec.Status}]++
		}
	}
	settled := map[dag.RunCountKey]int{}
	for k, n := range s.counts {
		if (p.Tenant == "" || k.Tenant == p.Tenant) && dag.Counted(k.Minute, t, p.Window) {
			k.Minute = time.Time{}
			settled[k] += n
		}
	}
	for k, n := range inflight {
		k.Count = n
		st.Runs = append(st.Runs, k)
	}
	for k, n := range settled {
		if n <= 0 {
			continue
		}
		st.Runs = append(st.Runs, durabletype.RunCount{Workflow: k.Workflow, Tenant: k.Tenant, Status: k.Status, Settled: true, Count: n})
	}
	for _, q := range queues {
		st.Queues = append(st.Queues, *q)
	}
	dag.SortStats(st)
	return st, nil
}

// PruneRuns implements store.Store: the runs dag.Expired says retention may
// delete, in dag.PruneOrder.
func (s *Store) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (*store.PruneRunsResult, error) {
	if err := s.fenced(ctx); err != nil {
		return nil, err
	}
	before := dag.PruneCutoff(now(p.Now), p.OlderThan)
	s.mu.Lock()
	defer s.mu.Unlock()
	var expired []*runState
	for _, rs := range s.runs {
		if dag.Expired(&rs.rec, before) {
			expired = append(expired, rs)
		}
	}
	slices.SortFunc(expired, func(a, b *runState) int { return dag.PruneOrder(&a.rec, &b.rec) })
	limit := max(p.Limit, 0)
	if len(expired) < limit {
		for k := range s.counts {
			if dag.CountsExpired(k.Minute, before) {
				delete(s.counts, k)
			}
		}
	}
	expired = expired[:min(len(expired), limit)]
	for _, rs := range expired {
		delete(s.runs, rs.rec.ID) // settled: no queue entry, timer or claim is left
		if k := rs.rec.IdempotencyKey; k != "" {
			delete(s.keys, dag.IdemKey{Workflow: rs.rec.Workflow, Tenant: rs.rec.Tenant, Key: k})
		}
	}
	return &store.PruneRunsResult{Deleted: len(expired)}, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return slices.Clone(b)
}

type readyEntry struct {
	id       int64
	key      taskKey
	workflow string
	tenant   string
	priority int
}

type readyHeap []readyEntry

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	return h[i].id < h[j].id || (h[i].id == h[j].id && h[i].workflow < h[j].workflow)
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(readyEntry)) }
func (h *readyHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
