// Package memstore is an in-memory implementation of the durable store, for
// tests and demos. It runs the same transition logic as the PostgreSQL store
// (internal/dag), passes the same conformance suite, implements fair queuing
// with the same block arithmetic, and supports notifications and leader
// election between engines sharing one Store. Inside a testing/synctest
// bubble it follows virtual time, so the real engine runs a 24-hour sleep in
// milliseconds.
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

	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/internal/fairq"
	"github.com/effectivelabs/durable/store"
)

// Store is an in-memory store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	runs     map[uuid.UUID]*runState
	shapes   map[*store.Shape]*dag.Compiled
	tenants  fairq.Tenants
	ready    readyHeap
	queued   map[taskKey]int64 // task -> id of its live ready entry
	timers   map[taskKey]time.Time
	running  map[taskKey]string // task -> tenant
	inFlight map[string]int     // tenant -> RUNNING tasks
	eventID  int64

	subMu  sync.Mutex
	subs   map[int]func(store.Notification)
	nextID int

	leader chan struct{}
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

type runState struct {
	rec    store.Run
	shape  *dag.Compiled
	tasks  []store.Task
	events []store.Event
}

// New returns an empty store.
func New() *Store {
	return &Store{
		runs:     make(map[uuid.UUID]*runState),
		shapes:   make(map[*store.Shape]*dag.Compiled),
		queued:   make(map[taskKey]int64),
		timers:   make(map[taskKey]time.Time),
		running:  make(map[taskKey]string),
		inFlight: make(map[string]int),
		subs:     make(map[int]func(store.Notification)),
		leader:   make(chan struct{}, 1),
	}
}

func now(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return dag.Timestamp(t)
}

// notes collects the notifications of one transition, delivered after the
// lock is released.
type notes struct {
	ready, timer bool
	runs         []uuid.UUID
}

func (s *Store) publish(n *notes) {
	if !n.ready && !n.timer && len(n.runs) == 0 {
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
// passes on when the leader's context is done.
func (s *Store) Lead(ctx context.Context, id string, lead func(ctx context.Context)) error {
	for {
		select {
		case s.leader <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		lead(ctx)
		<-s.leader
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func (s *Store) compile(shape *store.Shape) (*dag.Compiled, error) {
	if c, ok := s.shapes[shape]; ok {
		return c, nil
	}
	c, err := dag.Compile(shape)
	if err != nil {
		return nil, err
	}
	s.shapes[shape] = c
	return c, nil
}

// CreateRuns implements store.Store.
func (s *Store) CreateRuns(ctx context.Context, p *store.CreateRunsParams) error {
	return s.CreateRunsTx(ctx, nil, p)
}

// CreateRunsTx implements store.TxCreator. The in-memory store has no
// transactions of its own; tx is ignored.
func (s *Store) CreateRunsTx(_ context.Context, _ any, p *store.CreateRunsParams) error {
	t := now(p.Now)
	var n notes
	s.mu.Lock()
	err := s.createRuns(p, t, &n)
	s.mu.Unlock()
	s.publish(&n)
	return err
}

func (s *Store) createRuns(p *store.CreateRunsParams, t time.Time, n *notes) error {
	shapes := make([]*dag.Compiled, len(p.Runs))
	seen := make(map[uuid.UUID]bool, len(p.Runs))
	for i := range p.Runs {
		nr := &p.Runs[i]
		c, err := s.compile(nr.Shape)
		if err != nil {
			return fmt.Errorf("memstore: run %s: %w", nr.ID, err)
		}
		if !dag.ValidTenant(nr.Tenant) {
			return fmt.Errorf("memstore: run %s: invalid tenant %q", nr.ID, nr.Tenant)
		}
		if _, ok := s.runs[nr.ID]; ok || seen[nr.ID] {
			return fmt.Errorf("memstore: run %s: %w", nr.ID, store.ErrRunExists)
		}
		seen[nr.ID] = true
		shapes[i] = c
	}
	// New tenants get their groups in ascending name order, as in PostgreSQL
	// (which locks tenant rows in that order).
	names := make([]string, 0, len(p.Runs))
	for i := range p.Runs {
		names = append(names, p.Runs[i].Tenant)
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if !s.tenants.Ensure(name) {
			return fmt.Errorf("memstore: tenant %q: %w", name, store.ErrTooManyTenants)
		}
	}
	for i := range p.Runs {
		nr := &p.Runs[i]
		rec := store.Run{ID: nr.ID, Workflow: nr.Workflow, Tenant: nr.Tenant, Input: clone(nr.Input)}
		r := dag.Start(rec, shapes[i], t)
		rs := &runState{shape: shapes[i]}
		s.runs[nr.ID] = rs
		if err := s.apply(rs, r, n); err != nil {
			return err
		}
	}
	return nil
}

// apply persists a transition: it copies the run back and maintains the
// queue, timer and running indexes for the tasks that changed.
func (s *Store) apply(rs *runState, r *dag.Run, n *notes) error {
	rs.rec = r.Rec
	rs.tasks = r.Tasks
	for _, i := range r.Dequeued {
		delete(s.queued, taskKey{r.Rec.ID, i})
	}
	for i, dirty := range r.Dirty {
		if !dirty || i >= len(r.Tasks) {
			continue
		}
		k, t := taskKey{r.Rec.ID, i}, &r.Tasks[i]
		if t.DueAt.IsZero() {
			delete(s.timers, k)
		} else {
			s.timers[k] = t.DueAt
		}
		tenant, wasRunning := s.running[k]
		if isRunning := t.State == store.TaskRunning; isRunning && !wasRunning {
			s.running[k] = r.Rec.Tenant
			s.inFlight[r.Rec.Tenant]++
		} else if !isRunning && wasRunning {
			delete(s.running, k)
			if s.inFlight[tenant]--; s.inFlight[tenant] == 0 {
				delete(s.inFlight, tenant)
			}
		}
	}
	for _, i := range r.Enqueued {
		id, ok := s.tenants.Next(r.Rec.Tenant)
		if !ok { // every run's tenant got a group when the run was created
			return store.ErrTooManyTenants
		}
		k := taskKey{r.Rec.ID, i}
		s.queued[k] = id
		heap.Push(&s.ready, readyEntry{id: id, key: k, workflow: r.Rec.Workflow, tenant: r.Rec.Tenant})
	}
	for i := range r.Events {
		s.eventID++
		e := r.Events[i]
		e.ID = s.eventID
		rs.events = append(rs.events, e)
	}
	n.ready = n.ready || len(r.Enqueued) > 0
	n.timer = n.timer || r.TimerSet
	if r.Settled {
		n.runs = append(n.runs, r.Rec.ID)
	}
	return nil
}

func (s *Store) load(rs *runState) *dag.Run {
	r, err := dag.Load(rs.rec, rs.shape, rs.tasks)
	if err != nil {
		panic(err) // the store built rs itself; this is an invariant
	}
	return r
}

// ClaimTasks implements store.Store.
func (s *Store) ClaimTasks(_ context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	t := now(p.Now)
	served := make(map[string]bool, len(p.Workflows))
	for _, w := range p.Workflows {
		served[w] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var claimed []*store.ClaimedTask
	var skipped []readyEntry
	for len(claimed) < p.Limit && s.ready.Len() > 0 {
		e := heap.Pop(&s.ready).(readyEntry)
		if id, ok := s.queued[e.key]; !ok || id != e.id {
			continue // dequeued or re-enqueued since
		}
		if !served[e.workflow] || (p.TenantLimit > 0 && s.inFlight[e.tenant] >= p.TenantLimit) {
			skipped = append(skipped, e)
			continue
		}
		delete(s.queued, e.key)
		s.tenants.Claimed(e.id)
		rs := s.runs[e.key.run]
		r := s.load(rs)
		if !r.Claim(e.key.task, e.id, p.WorkerID, t) {
			continue
		}
		var n notes
		if err := s.apply(rs, r, &n); err != nil {
			return nil, err
		}
		claimed = append(claimed, s.claimed(rs, e.key.task))
	}
	for _, e := range skipped {
		heap.Push(&s.ready, e)
	}
	return claimed, nil
}

func (s *Store) claimed(rs *runState, i int) *store.ClaimedTask {
	t := &rs.tasks[i]
	c := &store.ClaimedTask{
		RunID: rs.rec.ID, Workflow: rs.rec.Workflow, Tenant: rs.rec.Tenant, Step: t.Name, Kind: t.Kind,
		Attempt: t.Attempt, Token: t.Token, Retry: rs.shape.Retry(i), Input: clone(rs.rec.Input),
	}
	for _, p := range rs.shape.Parents(i) {
		if pt := &rs.tasks[p]; pt.State == store.TaskCompleted {
			if c.ParentOutputs == nil {
				c.ParentOutputs = make(map[string][]byte)
			}
			c.ParentOutputs[pt.Name] = clone(pt.Output)
		}
	}
	if t.Kind == store.KindOnFailure {
		c.FailedStep, c.Error = rs.rec.FailedStep, rs.rec.Error
	}
	return c
}

func (s *Store) find(ref store.TaskRef) (*runState, int, bool) {
	rs, ok := s.runs[ref.RunID]
	if !ok {
		return nil, 0, false
	}
	i, ok := rs.shape.Index(ref.Step)
	if !ok || i >= len(rs.tasks) {
		return nil, 0, false
	}
	return rs, i, true
}

// FinishTasks implements store.Store.
func (s *Store) FinishTasks(_ context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	t := now(p.Now)
	res := make([]store.FinishResult, len(p.Outcomes))
	var n notes
	s.mu.Lock()
	for k := range p.Outcomes {
		o := p.Outcomes[k]
		o.Output = clone(o.Output)
		rs, i, ok := s.find(o.Task)
		if !ok {
			res[k].Status = store.FinishStale
			continue
		}
		r := s.load(rs)
		res[k].Status = r.Finish(i, &o, t)
		if err := s.apply(rs, r, &n); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	s.mu.Unlock()
	s.publish(&n)
	return res, nil
}

// Heartbeat implements store.Store.
func (s *Store) Heartbeat(_ context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	t := now(p.Now)
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &store.HeartbeatResult{}
	for _, ref := range p.Tasks {
		rs, i, ok := s.find(ref)
		if !ok {
			res.Lost = append(res.Lost, ref)
			continue
		}
		if task := &rs.tasks[i]; task.State == store.TaskRunning && task.Token == ref.Token {
			task.HeartbeatAt = t
		}
		if !s.load(rs).Current(i, ref.Token) {
			res.Lost = append(res.Lost, ref)
		}
	}
	return res, nil
}

// FireTimers implements store.Store.
func (s *Store) FireTimers(_ context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
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
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.k.run.String(), b.k.run.String()), cmp.Compare(a.k.task, b.k.task))
	})
	if p.Limit > 0 && len(fire) > p.Limit {
		fire = fire[:p.Limit]
	}
	res := &store.FireTimersResult{}
	for _, d := range fire {
		rs := s.runs[d.k.run]
		r := s.load(rs)
		if r.Wake(d.k.task, t) {
			res.Fired++
		}
		if err := s.apply(rs, r, &n); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	for _, at := range s.timers {
		if wait := at.Sub(t); !res.HasNext || wait < res.Next {
			res.Next, res.HasNext = wait, true
		}
	}
	if res.Next < 0 {
		res.Next = 0
	}
	s.mu.Unlock()
	s.publish(&n)
	return res, nil
}

// RescueTasks implements store.Store.
func (s *Store) RescueTasks(_ context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	t := now(p.Now)
	var n notes
	s.mu.Lock()
	var dead []taskKey
	for k := range s.running {
		task := &s.runs[k.run].tasks[k.task]
		last := task.StartedAt
		if task.HeartbeatAt.After(last) {
			last = task.HeartbeatAt
		}
		if t.Sub(last) >= p.DeadAfter {
			dead = append(dead, k)
		}
	}
	slices.SortFunc(dead, func(a, b taskKey) int {
		return cmp.Or(cmp.Compare(a.run.String(), b.run.String()), cmp.Compare(a.task, b.task))
	})
	if p.Limit > 0 && len(dead) > p.Limit {
		dead = dead[:p.Limit]
	}
	res := &store.RescueTasksResult{}
	for _, k := range dead {
		rs := s.runs[k.run]
		task := rs.tasks[k.task]
		r := s.load(rs)
		msg := fmt.Sprintf("worker %s lost: no heartbeat for %s", task.Worker, p.DeadAfter)
		if r.Rescue(k.task, msg, p.Rand, t) {
			res.Rescued = append(res.Rescued, store.TaskRef{RunID: k.run, Step: task.Name, Token: task.Token})
		}
		if err := s.apply(rs, r, &n); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	s.mu.Unlock()
	s.publish(&n)
	return res, nil
}

// GetRun implements store.Store.
func (s *Store) GetRun(_ context.Context, id uuid.UUID) (*store.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, ok := s.runs[id]
	if !ok {
		return nil, store.ErrRunNotFound
	}
	rec := rs.rec
	rec.Input = clone(rec.Input)
	return &rec, nil
}

// ListTasks implements store.Store.
func (s *Store) ListTasks(_ context.Context, id uuid.UUID) ([]*store.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, ok := s.runs[id]
	if !ok {
		return nil, store.ErrRunNotFound
	}
	out := make([]*store.Task, len(rs.tasks))
	for i := range rs.tasks {
		t := rs.tasks[i]
		t.Output = clone(t.Output)
		out[i] = &t
	}
	return out, nil
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(_ context.Context, id uuid.UUID) ([]*store.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, ok := s.runs[id]
	if !ok {
		return nil, store.ErrRunNotFound
	}
	out := make([]*store.Event, len(rs.events))
	for i := range rs.events {
		e := rs.events[i]
		out[i] = &e
	}
	return out, nil
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
}

type readyHeap []readyEntry

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].id < h[j].id }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(readyEntry)) }
func (h *readyHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
