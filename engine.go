package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/internal/sleep"
	"github.com/effectivelabs/durable/store"
)

// Config configures an Engine. The zero value is valid: every field has a
// documented default.
type Config struct {
	// WorkerID identifies this engine in claims and heartbeats; it must be
	// unique among the engines sharing a store. Defaults to
	// "<hostname>-<pid>-<random>".
	WorkerID string

	// Concurrency is the most steps this engine runs at once. Defaults to 100.
	Concurrency int

	// ClaimBatch is the most tasks claimed in one store call. Defaults to
	// Concurrency, capped at 200.
	ClaimBatch int

	// FinishBatch is the most step outcomes recorded in one store call.
	// Outcomes are batched only when they pile up, so a lone step is
	// recorded at once. Defaults to 500.
	FinishBatch int

	// PollInterval is how often an idle engine looks for work it was not
	// notified of. With a store that sends notifications (both stores do) it
	// doubles while idle, up to MaxPollInterval. Defaults to 1s.
	PollInterval time.Duration

	// MaxPollInterval caps PollInterval's idle back-off. Defaults to 30s.
	MaxPollInterval time.Duration

	// HeartbeatInterval is how often the engine tells the store that its
	// running steps are alive. Defaults to 5s.
	HeartbeatInterval time.Duration

	// DeadAfter is how long a worker may miss heartbeats before the leader
	// treats its running steps as dead and retries them (or fails them when
	// their retries are used up). It must exceed 2×HeartbeatInterval; the
	// leader scans every DeadAfter/4, so a dead step is rescued within
	// 1.25×DeadAfter. Defaults to 30s.
	DeadAfter time.Duration

	// TenantLimit, when positive, caps the steps of one tenant running at
	// once across all engines sharing the store. Defaults to 0 (no cap).
	TenantLimit int

	// Codec encodes inputs and outputs. Defaults to JSONCodec.
	Codec Codec

	// Logger receives the engine's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// Clock, when set, supplies the timestamps the engine records. Defaults
	// to nil: the store's clock, which for PostgreSQL is the database's, so
	// that workers with skewed clocks agree. Inside a testing/synctest
	// bubble time.Now is already virtual, so tests rarely need it.
	Clock func() time.Time
}

// ErrInvalidConfig is returned by New for a Config it cannot use.
var ErrInvalidConfig = errors.New("durable: invalid config")

func (c *Config) setDefaults() error {
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Concurrency == 0 {
		c.Concurrency = 100
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = min(c.Concurrency, 200)
	}
	if c.FinishBatch == 0 {
		c.FinishBatch = 500
	}
	def(&c.PollInterval, time.Second)
	def(&c.MaxPollInterval, 30*time.Second)
	def(&c.HeartbeatInterval, 5*time.Second)
	def(&c.DeadAfter, 30*time.Second)
	if c.Codec == nil {
		c.Codec = JSONCodec{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	switch {
	case c.Concurrency < 0 || c.ClaimBatch < 0 || c.FinishBatch < 0 || c.TenantLimit < 0:
		return fmt.Errorf("%w: negative count", ErrInvalidConfig)
	case c.PollInterval < 0 || c.HeartbeatInterval < 0 || c.DeadAfter < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	case c.MaxPollInterval < c.PollInterval:
		return fmt.Errorf("%w: MaxPollInterval %s < PollInterval %s", ErrInvalidConfig, c.MaxPollInterval, c.PollInterval)
	case c.DeadAfter <= 2*c.HeartbeatInterval:
		return fmt.Errorf("%w: DeadAfter %s must exceed 2×HeartbeatInterval %s", ErrInvalidConfig, c.DeadAfter, c.HeartbeatInterval)
	}
	return nil
}

// Engine runs workflows on a store. Many engines (in one process or many)
// can share one store: they claim work fairly, and one of them at a time
// leads (fires durable timers and rescues the steps of dead workers).
//
// An engine that is never started can still trigger and wait for runs, as a
// client of the engines that do work.
type Engine struct {
	store store.Store
	cfg   Config
	log   *slog.Logger

	mu        sync.Mutex
	workflows map[string]*workflowDef
	names     []string
	rt        *runtime
	stopped   bool

	waitMu    sync.Mutex
	waiters   map[uuid.UUID]map[chan struct{}]struct{}
	notifying atomic.Bool
}

// New returns an engine on store s. It does not start it.
func New(s store.Store, cfg Config) (*Engine, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidConfig)
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Engine{
		store:     s,
		cfg:       cfg,
		log:       cfg.Logger.With(slog.String("worker", cfg.WorkerID)),
		workflows: map[string]*workflowDef{},
		waiters:   map[uuid.UUID]map[chan struct{}]struct{}{},
	}, nil
}

// WorkerID returns the engine's worker ID.
func (e *Engine) WorkerID() string { return e.cfg.WorkerID }

// Register validates workflow definitions and makes this engine execute
// their runs. It reports every definition error it finds (as
// *DefinitionError values joined together) and registers nothing if there is
// any. Registering may happen before or after Start.
func (e *Engine) Register(defs ...Definition) error {
	var errs []error
	seen := map[string]bool{}
	var add []*workflowDef
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, def := range defs {
		if def == nil {
			errs = append(errs, &DefinitionError{Err: ErrNilFunc, Detail: "nil workflow"})
			continue
		}
		d := def.definition()
		if _, err := d.freeze(); err != nil {
			errs = append(errs, err)
			continue
		}
		if e.workflows[d.name] != nil || seen[d.name] {
			errs = append(errs, &DefinitionError{Workflow: d.name, Err: ErrDuplicateWorkflow})
			continue
		}
		seen[d.name] = true
		add = append(add, d)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	names := slices.Clone(e.names)
	for _, d := range add {
		e.workflows[d.name] = d
		names = append(names, d.name)
	}
	slices.Sort(names)
	e.names = names
	return nil
}

// wakeClaims tells this engine's claim loop, if it is running, that work
// may have been enqueued.
func (e *Engine) wakeClaims() {
	e.mu.Lock()
	rt := e.rt
	stopped := e.stopped
	e.mu.Unlock()
	if rt != nil && !stopped {
		signal(rt.readySig)
	}
}

func (e *Engine) workflow(name string) *workflowDef {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.workflows[name]
}

func (e *Engine) workflowNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.names
}

func (e *Engine) now() time.Time {
	if e.cfg.Clock != nil {
		return e.cfg.Clock()
	}
	return time.Time{}
}

// runtime holds what exists between Start and Stop.
type runtime struct {
	ctx    context.Context // background loops; cancelled last
	cancel context.CancelFunc

	claimCtx  context.Context // the claim loop and leadership; cancelled first
	stopClaim context.CancelFunc

	work     context.Context // parent of step contexts; cancelled on a hard stop
	stopWork context.CancelCauseFunc

	flushCtx  context.Context // recording outcomes; cancelled when Stop gives up
	stopFlush context.CancelFunc

	slots     chan struct{}
	slotFreed chan struct{}
	readySig  chan struct{}
	timerSig  chan struct{}
	outcomes  chan outcomeMsg

	flightMu sync.Mutex
	flights  map[flightKey]*flight

	execs     sync.WaitGroup // step executors
	loops     sync.WaitGroup // claim loop, leader
	completed chan struct{}  // closed when the completer has exited
	hbStop    chan struct{}
	hbDone    chan struct{}
	aux       sync.WaitGroup // listener
}

type flightKey struct {
	run  uuid.UUID
	step string
}

type flight struct {
	ref    store.TaskRef
	cancel context.CancelCauseFunc
}

type outcomeMsg struct {
	o store.Outcome
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Start starts the engine's background work: claiming and running steps,
// heartbeats, listening for notifications and campaigning for leadership.
// It returns at once; ctx only bounds the start itself. Call Stop to stop.
func (e *Engine) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c, ok := e.store.(store.Checker); ok {
		if err := c.Check(ctx); err != nil {
			return fmt.Errorf("durable: store not ready: %w", err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return ErrEngineStopped
	}
	if e.rt != nil {
		return ErrAlreadyStarted
	}
	rt := &runtime{
		slots:     make(chan struct{}, e.cfg.Concurrency),
		slotFreed: make(chan struct{}, 1),
		readySig:  make(chan struct{}, 1),
		timerSig:  make(chan struct{}, 1),
		outcomes:  make(chan outcomeMsg, e.cfg.Concurrency),
		flights:   map[flightKey]*flight{},
		completed: make(chan struct{}),
		hbStop:    make(chan struct{}),
		hbDone:    make(chan struct{}),
	}
	rt.ctx, rt.cancel = context.WithCancel(context.WithoutCancel(ctx))
	rt.claimCtx, rt.stopClaim = context.WithCancel(rt.ctx)
	rt.work, rt.stopWork = context.WithCancelCause(rt.ctx)
	rt.flushCtx, rt.stopFlush = context.WithCancel(rt.ctx)
	e.rt = rt

	if l, ok := e.store.(store.Listener); ok {
		rt.aux.Go(func() {
			deliver := func(n store.Notification) { e.deliver(rt, n) }
			if err := l.Listen(rt.ctx, deliver); err != nil && rt.ctx.Err() == nil {
				e.log.Error("durable: listener stopped", slog.Any("error", err))
			}
			e.notifying.Store(false)
		})
	}
	go e.completeLoop(rt)
	go e.heartbeatLoop(rt)
	rt.loops.Go(func() { e.claimLoop(rt) })
	rt.loops.Go(func() {
		if el, ok := e.store.(store.Elector); ok {
			if err := el.Lead(rt.claimCtx, e.cfg.WorkerID, func(ctx context.Context) { e.lead(ctx, rt) }); err != nil && rt.claimCtx.Err() == nil {
				e.log.Error("durable: leader election stopped", slog.Any("error", err))
			}
			return
		}
		e.lead(rt.claimCtx, rt)
	})
	e.log.Info("durable: engine started", slog.Int("concurrency", e.cfg.Concurrency), slog.Any("workflows", e.names))
	return nil
}

// Stop stops the engine gracefully: it stops claiming and leading at once,
// lets running steps finish until ctx is done, then cancels their contexts
// (cause ErrEngineStopped) and gives their tasks back to the queue without
// counting the attempt. It waits for steps to return, so step functions must
// honour their context. Stop returns nil if every step finished in time, and
// ctx's error if some had to be cancelled.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	rt := e.rt
	already := e.stopped
	e.stopped = true
	e.mu.Unlock()
	if rt == nil || already {
		return nil
	}
	rt.stopClaim()
	rt.loops.Wait() // the claim loop and leader duties have returned

	execsDone := make(chan struct{})
	go func() { rt.execs.Wait(); close(execsDone) }()
	var stopErr error
	select {
	case <-execsDone:
	case <-ctx.Done():
		stopErr = ctx.Err()
		e.log.Warn("durable: drain deadline reached; cancelling running steps")
		rt.stopWork(ErrEngineStopped)
		<-execsDone
	}
	close(rt.outcomes)
	flushDeadline := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		flushDeadline, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
	}
	select {
	case <-rt.completed:
	case <-flushDeadline.Done():
		rt.stopFlush()
		<-rt.completed
	}
	close(rt.hbStop)
	<-rt.hbDone
	rt.stopWork(ErrEngineStopped)
	rt.cancel()
	rt.aux.Wait()
	e.wakeAllWaiters()
	e.log.Info("durable: engine stopped")
	return stopErr
}

// deliver handles a store notification; it must not block.
func (e *Engine) deliver(rt *runtime, n store.Notification) {
	switch n.Topic {
	case store.TopicReady:
		signal(rt.readySig)
	case store.TopicTimer:
		signal(rt.timerSig)
	case store.TopicRun:
		if id, err := uuid.Parse(n.Payload); err == nil {
			e.wakeWaiters(id)
		}
	case store.TopicResync:
		e.notifying.Store(true)
		signal(rt.readySig)
		signal(rt.timerSig)
		e.wakeAllWaiters()
	}
}

func (e *Engine) claimLoop(rt *runtime) {
	interval := e.cfg.PollInterval
	errDelay := 100 * time.Millisecond
	for {
		free := cap(rt.slots) - len(rt.slots)
		if free == 0 {
			select {
			case <-rt.slotFreed:
				continue
			case <-rt.claimCtx.Done():
				return
			}
		}
		want := min(free, e.cfg.ClaimBatch)
		// A claim in flight is not cancelled by Stop: once it commits, its
		// tasks are this engine's, and the drain must run (or release) them
		// rather than leave them RUNNING until a rescue.
		claimCtx, cancel := context.WithTimeout(context.WithoutCancel(rt.claimCtx), claimTimeout)
		claimed, err := e.store.ClaimTasks(claimCtx, &store.ClaimTasksParams{
			Now: e.now(), WorkerID: e.cfg.WorkerID, Limit: want,
			Workflows: e.workflowNames(), TenantLimit: e.cfg.TenantLimit,
		})
		cancel()
		if err != nil {
			if rt.claimCtx.Err() != nil {
				return
			}
			e.log.Error("durable: claiming tasks", slog.Any("error", err))
			if !sleep.For(rt.claimCtx, errDelay) {
				return
			}
			errDelay = min(2*errDelay, 5*time.Second)
			continue
		}
		errDelay = 100 * time.Millisecond
		for _, c := range claimed {
			rt.slots <- struct{}{}
			e.startStep(rt, c)
		}
		if rt.claimCtx.Err() != nil {
			return
		}
		if len(claimed) == want {
			interval = e.cfg.PollInterval
			continue
		}
		timer := time.NewTimer(interval)
		select {
		case <-rt.readySig:
			interval = e.cfg.PollInterval
		case <-timer.C:
			if e.notifying.Load() {
				interval = min(2*interval, e.cfg.MaxPollInterval)
			}
		case <-rt.claimCtx.Done():
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// claimTimeout bounds one claim call, which Stop does not interrupt.
const claimTimeout = 30 * time.Second

func (e *Engine) startStep(rt *runtime, c *store.ClaimedTask) {
	ctx, cancel := context.WithCancelCause(rt.work)
	f := &flight{ref: c.Ref(), cancel: cancel}
	key := flightKey{c.RunID, c.Step}
	rt.flightMu.Lock()
	rt.flights[key] = f
	rt.flightMu.Unlock()
	rt.execs.Go(func() {
		o := e.runStep(ctx, cancel, c)
		cancel(nil)
		rt.outcomes <- outcomeMsg{o: o}
		<-rt.slots
		signal(rt.slotFreed)
	})
}

// completeLoop records outcomes. Under load outcomes pile up while a batch
// is being written, and the next batch takes them all at once.
func (e *Engine) completeLoop(rt *runtime) {
	defer close(rt.completed)
	for {
		m, ok := <-rt.outcomes
		if !ok {
			return
		}
		batch := []store.Outcome{m.o}
		open := true
	drain:
		for len(batch) < e.cfg.FinishBatch {
			select {
			case m, ok := <-rt.outcomes:
				if !ok {
					open = false
					break drain
				}
				batch = append(batch, m.o)
			default:
				break drain
			}
		}
		e.flush(rt, batch)
		if !open {
			return
		}
	}
}

func (e *Engine) flush(rt *runtime, batch []store.Outcome) {
	delay := 50 * time.Millisecond
	for {
		res, err := e.store.FinishTasks(rt.flushCtx, &store.FinishTasksParams{Now: e.now(), Outcomes: batch})
		if err == nil {
			// The outcomes may have made children ready: look at once
			// rather than wait for the store's notification to come back.
			signal(rt.readySig)
			for i, r := range res {
				if r.Status == store.FinishStale {
					o := batch[i]
					e.log.Warn("durable: outcome rejected, the claim is no longer current",
						slog.String("run_id", o.Task.RunID.String()), slog.String("step", o.Task.Step))
				}
			}
			break
		}
		if rt.flushCtx.Err() != nil {
			e.log.Error("durable: giving up recording outcomes; their steps will be rescued and run again",
				slog.Int("outcomes", len(batch)), slog.Any("error", err))
			break
		}
		e.log.Error("durable: recording outcomes", slog.Int("outcomes", len(batch)), slog.Any("error", err))
		if !sleep.For(rt.flushCtx, delay) {
			continue // one last attempt is made above, then we give up
		}
		delay = min(2*delay, 5*time.Second)
	}
	rt.flightMu.Lock()
	for _, o := range batch {
		delete(rt.flights, flightKey{o.Task.RunID, o.Task.Step})
	}
	rt.flightMu.Unlock()
}

func (e *Engine) heartbeatLoop(rt *runtime) {
	defer close(rt.hbDone)
	t := time.NewTicker(e.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-rt.hbStop:
			return
		}
		rt.flightMu.Lock()
		refs := make([]store.TaskRef, 0, len(rt.flights))
		for _, f := range rt.flights {
			refs = append(refs, f.ref)
		}
		rt.flightMu.Unlock()
		if len(refs) == 0 {
			continue
		}
		res, err := e.store.Heartbeat(rt.ctx, &store.HeartbeatParams{Now: e.now(), WorkerID: e.cfg.WorkerID, Tasks: refs})
		if err != nil {
			e.log.Warn("durable: heartbeat failed", slog.Any("error", err))
			continue
		}
		rt.flightMu.Lock()
		for _, ref := range res.Lost {
			if f := rt.flights[flightKey{ref.RunID, ref.Step}]; f != nil && f.ref.Token == ref.Token {
				f.cancel(ErrClaimLost)
			}
		}
		rt.flightMu.Unlock()
	}
}

// maxTimerWait bounds how long the leader trusts its knowledge of the next
// due timer before asking the store again.
const maxTimerWait = time.Minute

// lead runs the leader's duties until ctx is cancelled (leadership lost or
// the engine stopping).
func (e *Engine) lead(ctx context.Context, rt *runtime) {
	e.log.Info("durable: leading")
	var wg sync.WaitGroup
	wg.Go(func() { e.timerLoop(ctx, rt) })
	wg.Go(func() { e.rescueLoop(ctx) })
	wg.Wait()
	e.log.Info("durable: no longer leading")
}

func (e *Engine) timerLoop(ctx context.Context, rt *runtime) {
	const limit = 1000
	errDelay := 100 * time.Millisecond
	for {
		res, err := e.store.FireTimers(ctx, &store.FireTimersParams{Now: e.now(), Limit: limit})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.log.Error("durable: firing timers", slog.Any("error", err))
			if !sleep.For(ctx, errDelay) {
				return
			}
			errDelay = min(2*errDelay, 5*time.Second)
			continue
		}
		errDelay = 100 * time.Millisecond
		if res.Fired == limit {
			continue
		}
		wait := maxTimerWait
		if res.HasNext && res.Next < wait {
			wait = res.Next
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-rt.timerSig:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

func (e *Engine) rescueLoop(ctx context.Context) {
	interval := e.cfg.DeadAfter / 4
	for {
		res, err := e.store.RescueTasks(ctx, &store.RescueTasksParams{
			Now: e.now(), DeadAfter: e.cfg.DeadAfter, Limit: 1000, Rand: randFloat(),
		})
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Error("durable: rescuing dead tasks", slog.Any("error", err))
		case err == nil:
			for _, r := range res.Rescued {
				e.log.Warn("durable: rescued the step of a dead worker",
					slog.String("run_id", r.RunID.String()), slog.String("step", r.Step))
			}
			if len(res.Rescued) == 1000 {
				continue
			}
		}
		if !sleep.For(ctx, interval) {
			return
		}
	}
}
