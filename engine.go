package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/internal/service/claimer"
	"github.com/effectivelabs/durable/internal/service/completer"
	"github.com/effectivelabs/durable/internal/service/duty"
	"github.com/effectivelabs/durable/internal/service/heartbeat"
	"github.com/effectivelabs/durable/internal/service/inflight"
	"github.com/effectivelabs/durable/internal/service/leader"
	"github.com/effectivelabs/durable/internal/service/listener"
	"github.com/effectivelabs/durable/internal/service/registrar"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

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
	tel   telemetry

	mu sync.Mutex
	// reg holds the registered workflows (registry.go).
	reg     registry
	rt      *runtime
	stopped bool

	waitMu    sync.Mutex
	waiters   map[uuid.UUID]map[chan struct{}]struct{}
	notifying atomic.Bool

	// staleChecks are what the engine read of the workers serving the
	// versions it starts runs of (version.go).
	staleChecks staleChecks
}

// New returns an engine on store s. It does not start it.
func New(s store.Store, cfg Config) (*Engine, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidConfig)
	}
	if err := cfg.setDefaults(s); err != nil {
		return nil, err
	}
	tel, err := newTelemetry(&cfg)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		store:   s,
		cfg:     cfg,
		tel:     tel,
		log:     cfg.Logger.With(slog.String("worker", cfg.WorkerID)),
		reg:     registry{byName: map[string][]*registered{}},
		waiters: map[uuid.UUID]map[chan struct{}]struct{}{},
	}
	if cfg.MeterProvider != nil {
		if e.tel.storage, err = newStorageMeters(cfg.MeterProvider.Meter(InstrumentationName), e); err != nil {
			return nil, fmt.Errorf("durable: metrics: %w", err)
		}
	}
	return e, nil
}

// WorkerID returns the engine's worker ID.
func (e *Engine) WorkerID() string { return e.cfg.WorkerID }

// isStopped reports whether Stop was called.
func (e *Engine) isStopped() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopped
}

// wakeClaims tells this engine's claim loop, if it is running, that work
// may have been enqueued.
func (e *Engine) wakeClaims() {
	e.mu.Lock()
	rt := e.rt
	stopped := e.stopped
	e.mu.Unlock()
	if rt != nil && !stopped {
		rt.claimer.Wake()
	}
}

func (e *Engine) now() time.Time {
	if e.cfg.Clock != nil {
		return e.cfg.Clock()
	}
	return time.Time{}
}

// runtime holds what exists between Start and Stop: the engine's services
// and what they share.
type runtime struct {
	ctx    context.Context // the services' parent; cancelled last
	cancel context.CancelFunc

	work     context.Context // parent of step contexts; cancelled on a hard stop
	stopWork context.CancelCauseFunc

	// The services, in the order Start starts them (Stop stops them in an
	// order of its own).
	registrar *registrar.Registrar              // keeps the worker's record
	listener  *listener.Listener                // delivers the store's notifications (deliver)
	completer *completer.Completer[outcomeMeta] // records the steps' outcomes
	heartbeat *heartbeat.Heartbeat              // vouches for the running steps' claims
	claimer   *claimer.Claimer                  // claims tasks for the executor (claim.go)
	upgrader  *startstop.Func                   // moves the runs of accepted versions (upgrade.go)
	leader    *leader.Leader                    // campaigns for leadership, and leads (leader.go)
	// The leader's duties that are woken: by notifications (timers,
	// inbox, schedules; schedules is nil on a store without them) and by
	// this engine (wakeSchedules).
	timers    *duty.Timers
	inbox     *duty.Inbox
	schedules *duty.Schedules

	// upgradeSig wakes the upgrade loop (upgrade.go).
	upgradeSig chan struct{}
	// host is the host name in the worker's record.
	host string

	// steps are the steps this engine runs, keyed by their claims.
	steps *inflight.Steps

	execs sync.WaitGroup // step executors
	aux   sync.WaitGroup // late declarations of schedules (declareLate)
}

// newRuntime returns the runtime of an engine starting with ctx, its
// services not started.
func (e *Engine) newRuntime(ctx context.Context) *runtime {
	rt := &runtime{
		upgradeSig: make(chan struct{}, 1),
		host:       hostname(),
		steps:      inflight.New(inflight.Causes{RunCancelled: ErrRunCancelled, TimedOut: ErrStepTimeout, ClaimLost: ErrClaimLost}),
	}
	rt.ctx, rt.cancel = context.WithCancel(context.WithoutCancel(ctx))
	rt.work, rt.stopWork = context.WithCancelCause(rt.ctx)
	// Each service is given what it uses of the others: the claimer
	// comes first (the completer and notifications wake it).
	rt.claimer = e.newClaimer(rt)
	rt.registrar = e.newRegistrar(rt)
	rt.listener = e.newListener(rt)
	rt.completer = e.newCompleter(rt)
	rt.heartbeat = heartbeat.New(heartbeat.Config{
		Store: e.store, Claims: rt.steps, WorkerID: e.cfg.WorkerID, Interval: e.cfg.HeartbeatInterval,
		Now: e.now, Logger: e.log,
	})
	rt.upgrader = startstop.NewFunc(func(ctx context.Context) { e.upgradeLoop(ctx, rt) })
	rt.leader = e.newLeader(rt)
	return rt
}

// newCompleter returns the completer of rt: it records the outcomes of
// the steps rt runs, FinishBatch at a time, with up to Concurrency of
// them queued, and wakes the claim loop after each batch; with metrics,
// it counts them.
func (e *Engine) newCompleter(rt *runtime) *completer.Completer[outcomeMeta] {
	cfg := completer.Config[outcomeMeta]{
		Store: e.store, Steps: rt.steps, Batch: e.cfg.FinishBatch, Queue: e.cfg.Concurrency,
		Now: e.now, Logger: e.log,
		Wake: rt.claimer.Wake,
	}
	if m := e.tel.m; m != nil {
		cfg.Metrics = func(batch []store.Outcome, meta []outcomeMeta, res []store.FinishResult) {
			m.recordFinish(rt.ctx, batch, meta, res)
		}
		cfg.CallTook = func(d time.Duration) { m.storeDuration.Record(rt.ctx, d.Seconds(), m.finishOp.rec...) }
	}
	return completer.New(cfg)
}

// outcomeMeta is what the metrics of an outcome need besides it.
type outcomeMeta struct {
	attrs            *attrs
	workflow, tenant string
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Start starts the engine's background work: claiming and running steps,
// heartbeats, listening for notifications and campaigning for leadership.
// It first makes the store hold the schedules its workflows declare
// (Workflow.DeclareSchedule), and fails if it cannot. It returns at once;
// ctx only bounds the start itself. Call Stop to stop.
func (e *Engine) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c, ok := e.store.(store.Checker); ok {
		if err := c.Check(ctx); err != nil {
			return fmt.Errorf("durable: store not ready: %w", err)
		}
	}
	if err := e.applyDeclared(ctx, nil); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return ErrEngineStopped
	}
	if e.rt != nil {
		return ErrAlreadyStarted
	}
	rt := e.newRuntime(ctx)
	e.rt = rt
	// Registered before Start returns, so that the engine is listed at
	// once; the registrar tries again if this fails.
	rt.registrar.Register(ctx, e.recordOf(rt, e.reg.record()))
	if err := startstop.StartAll(rt.ctx,
		rt.registrar, rt.listener, rt.completer, rt.heartbeat, rt.claimer, rt.upgrader, rt.leader,
	); err != nil {
		// None of them fails (each starts a goroutine); were one to,
		// those started would be stopped, and the engine not started.
		rt.registrar.Remove(ctx)
		rt.cancel()
		e.rt = nil
		return err
	}
	e.log.Info("durable: engine started", slog.Int("concurrency", e.cfg.Concurrency), slog.Any("workflows", e.reg.versions))
	return nil
}

// Stop stops the engine gracefully: it stops claiming and leading at once,
// lets running steps finish until ctx is done, then cancels their contexts
// (cause ErrEngineStopped) and gives their tasks back to the queue without
// counting the attempt. It waits for steps to return, so step functions must
// honour their context. Stop returns nil if every step finished in time and
// every outcome was recorded; ctx's error if some steps had to be
// cancelled; and an error matching ErrNotRecorded if the store refused or
// could not take some outcomes (those steps are rescued and run again).
// After Stop the engine triggers nothing: Run, RunNoWait, RunManyNoWait,
// RunNoWaitTx and Register return ErrEngineStopped.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	rt := e.rt
	already := e.stopped
	e.stopped = true
	e.mu.Unlock()
	if rt == nil || already {
		return nil
	}
	// Claiming, leading and moving runs stop at once. A claim in flight
	// completes: its tasks are this engine's, to run or give back. Leading
	// stops once claiming has: an engine that says it no longer leads
	// claims nothing more (a claim's few milliseconds are all it waits).
	startstop.StopAll(rt.claimer, rt.upgrader)
	startstop.StopAll(rt.leader)

	// Running steps finish until ctx is done; then they are cancelled.
	execsDone := make(chan struct{})
	go func() { rt.execs.Wait(); close(execsDone) }()
	var stopErr error
	select {
	case <-execsDone:
	case <-ctx.Done():
		stopErr = ctx.Err()
		e.log.Warn("durable: drain deadline reached; cancelling running steps")
		rt.stopWork(ErrEngineStopped)
		// The steps return now, and their outcomes are recorded within
		// flushGrace; then recording gives up, so that steps blocked on a
		// full outcome queue (the store unreachable, the completer retrying)
		// are not waited for forever.
		giveUp := time.AfterFunc(flushGrace, rt.completer.GiveUp)
		defer giveUp.Stop()
		<-execsDone
	}

	// Their outcomes are recorded until ctx is done, or, once it is,
	// within flushGrace.
	flushDeadline := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		flushDeadline, cancel = context.WithTimeout(context.Background(), flushGrace)
		defer cancel()
	}
	rt.completer.Drain(flushDeadline)
	// Heartbeats vouch for the steps' claims until then.
	rt.heartbeat.Stop()
	rt.stopWork(ErrEngineStopped)

	// Then the rest at once: notifications, the refreshes of the worker's
	// record, late declarations of schedules; and last, the record goes.
	rt.cancel()
	startstop.StopAll(rt.listener, rt.registrar)
	rt.aux.Wait()
	rt.registrar.Remove(ctx)
	e.wakeAllWaiters()
	e.log.Info("durable: engine stopped")
	if lost, lostErr := rt.completer.Lost(); lost > 0 {
		return errors.Join(stopErr, fmt.Errorf("%w: %d step outcomes, their steps will be rescued and run again: %w",
			ErrNotRecorded, lost, lostErr))
	}
	return stopErr
}

// flushGrace is how long Stop lets outcomes be recorded after its context
// is done before it gives up on them.
const flushGrace = 5 * time.Second

// newListener returns the listener of rt: on a store that sends
// notifications, it delivers them to rt's services (deliver) and keeps
// e.notifying; on another, it does nothing.
func (e *Engine) newListener(rt *runtime) *listener.Listener {
	cfg := listener.Config{Deliver: func(n store.Notification) { e.deliver(rt, n) }, Heard: &e.notifying, Logger: e.log}
	if l, ok := e.store.(store.Listener); ok {
		cfg.Source = l
	}
	return listener.New(cfg)
}

// deliver routes a store notification to the services it concerns (the
// listener noted already whether notifications are heard); it must not
// block.
func (e *Engine) deliver(rt *runtime, n store.Notification) {
	switch n.Topic {
	case store.TopicReady:
		rt.claimer.Wake()
	case store.TopicTimer:
		rt.wakeTimers()
	case store.TopicSchedule:
		rt.wakeSchedules()
	case store.TopicInbox:
		rt.inbox.Wake()
	case store.TopicRun:
		if id, err := uuid.Parse(n.Payload); err == nil {
			e.wakeWaiters(id)
		}
	case store.TopicCancel:
		if id, err := uuid.Parse(n.Payload); err == nil {
			rt.steps.RunCancelled(id)
		}
	case store.TopicDeaf:
		// No notification comes until the next TopicResync: the loops
		// waiting for one (or backing off on the strength of them) go back
		// to polling now rather than at the end of their wait.
		rt.claimer.Wake()
		rt.wakeTimers()
		rt.wakeSchedules()
	case store.TopicResync:
		// Notifications may have been missed (the listener (re)connected):
		// a run cancelled meanwhile is found by a heartbeat now rather than
		// at the next one.
		rt.heartbeat.Beat()
		rt.claimer.Wake()
		rt.wakeTimers()
		rt.wakeSchedules()
		rt.inbox.Wake()
		e.wakeAllWaiters()
	}
}
