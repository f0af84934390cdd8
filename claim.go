package durable

import (
	"context"
	"errors"
	"time"

	"github.com/effectivelabs/durable/internal/service/claimer"
	"github.com/effectivelabs/durable/internal/service/completer"
	"github.com/effectivelabs/durable/store"
)

// newClaimer returns the claimer of rt: it claims up to ClaimBatch tasks
// at a time for this engine's Concurrency slots, from the queues of the
// workflows it registered, and hands them to rt's executor (startStep);
// with metrics, it times the claims.
func (e *Engine) newClaimer(rt *runtime) *claimer.Claimer {
	cfg := claimer.Config{
		Store: e.store, Executor: executor{e, rt}, WorkerID: e.cfg.WorkerID,
		Slots: e.cfg.Concurrency, Batch: e.cfg.ClaimBatch, TenantLimit: e.cfg.TenantLimit,
		PollInterval: e.cfg.PollInterval, MaxPollInterval: e.cfg.MaxPollInterval,
		Served: e.servedQueues, Notifying: e.notifying.Load, Now: e.now, Logger: e.log,
	}
	if m := e.tel.m; m != nil {
		cfg.Claimed = func(claimed []*store.ClaimedTask, took time.Duration) { m.recordClaims(rt.ctx, claimed, took) }
	}
	return claimer.New(cfg)
}

// executor runs the steps rt's claimer claims (claimer.Executor).
type executor struct {
	e  *Engine
	rt *runtime
}

// Execute runs c's step (startStep).
func (x executor) Execute(c *store.ClaimedTask) { x.e.startStep(x.rt, c) }

// checkpoint records o, an outcome of a claim that does not end it (a
// function's calls), through rt's completer, and waits for its result.
// The wait ends with ctx (the claim lost, the engine stopping): the
// outcome's fate is then unknown, and the caller gives its claim up.
func (e *Engine) checkpoint(ctx context.Context, rt *runtime, o store.Outcome) (store.FinishResult, error) {
	type answer struct {
		res store.FinishResult
		err error
	}
	ch := make(chan answer, 1)
	rt.completer.Send(completer.Message[outcomeMeta]{Outcome: o, Done: func(res store.FinishResult, err error) { ch <- answer{res, err} }})
	select {
	case a := <-ch:
		return a.res, a.err
	case <-ctx.Done():
		return store.FinishResult{}, context.Cause(ctx)
	}
}

// noBegin is the begin function of runStep when nothing counts attempts.
func noBegin() {}

// startStep runs a claimed task in a goroutine of its own, holding one of
// the claimer's slots until its outcome is queued for recording. Whatever
// the step does (return, panic, or end its goroutine with runtime.Goexit,
// as t.FailNow does), an outcome is queued and the slot freed.
func (e *Engine) startStep(rt *runtime, c *store.ClaimedTask) {
	ctx, cancel := context.WithCancelCause(rt.work)
	var stopTimer context.CancelFunc = func() {}
	if c.Timeout > 0 {
		// The store fails the attempt when its timeout passes, whatever
		// the step does; the context tells the step.
		ctx, stopTimer = context.WithTimeoutCause(ctx, c.Timeout, ErrStepTimeout)
	}
	ref := c.Ref()
	f := rt.steps.Add(ref, cancel)
	rt.heartbeat.Claimed() // an idle heartbeat vouches for it from now on
	lose := func(cause error) { rt.steps.Lose(f, cause) }
	rt.execs.Go(func() {
		var o store.Outcome
		var recorded *store.FinishResult
		returned := false
		var meta outcomeMeta
		var began time.Time
		begin := noBegin
		if m := e.tel.m; m != nil {
			meta = outcomeMeta{attrs: m.claimed(c), workflow: c.Workflow, tenant: c.Tenant}
			began = time.Now()
			// An attempt is counted started when it begins for good: a
			// step skipped on its worker (its skip condition fired) is
			// counted skipped only.
			counted := false
			begin = func() {
				if !counted {
					counted = true
					m.started.Add(ctx, 1, meta.attrs.add...)
				}
			}
		}
		ctx, span := e.tel.startStep(ctx, c)
		defer func() {
			if !returned {
				o = e.failed(ctx, store.Outcome{Task: ref}, errGoexit)
			}
			if meta.attrs != nil && o.Kind != store.OutcomeSkip {
				begin() // an attempt that failed before its code ran began too
				e.tel.m.stepDuration.Record(ctx, time.Since(began).Seconds(), meta.attrs.rec...)
			}
			if span != nil {
				endStep(span, &o)
			}
			if errors.Is(context.Cause(ctx), ErrStepTimeout) {
				// The step's own timer ended the attempt: the store
				// records the timeout, and may have before this outcome
				// arrives, which is then stale as expected (the completer
				// logs it at debug level, not as a claim lost).
				lose(ErrStepTimeout)
			}
			stopTimer()
			cancel(nil)
			rt.completer.Send(completer.Message[outcomeMeta]{Outcome: o, Meta: meta, Recorded: recorded})
			rt.claimer.Done()
		}()
		o = e.runStep(ctx, cancel, lose, c, begin, &recorded, func(ctx context.Context, o store.Outcome) (store.FinishResult, error) {
			return e.checkpoint(ctx, rt, o)
		})
		returned = true
	})
}
