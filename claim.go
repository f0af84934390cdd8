package durable

import (
	"context"
	"log/slog"
	"time"

	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/internal/service/completer"
	"github.com/effectivelabs/durable/store"
)

// claimLoop claims ready tasks while this engine has free slots, and waits
// for a notification (or its poll interval) when the queue is empty, until
// ctx is done.
func (e *Engine) claimLoop(ctx context.Context, rt *runtime) {
	interval := e.cfg.PollInterval
	errDelay := 100 * time.Millisecond
	for {
		free := cap(rt.slots) - len(rt.slots)
		if free == 0 {
			select {
			case <-rt.slotFreed:
				continue
			case <-ctx.Done():
				return
			}
		}
		want := min(free, e.cfg.ClaimBatch)
		// A claim in flight is not cancelled by Stop: once it commits, its
		// tasks are this engine's, and the drain must run (or release) them
		// rather than leave them RUNNING until a rescue.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
		var began time.Time
		if e.tel.m != nil {
			began = time.Now()
		}
		names, queues := e.servedQueues()
		claimed, err := e.store.ClaimTasks(cctx, &store.ClaimTasksParams{
			Now: e.now(), WorkerID: e.cfg.WorkerID, Limit: want,
			Workflows: names, Queues: queues, TenantLimit: e.cfg.TenantLimit,
		})
		cancel()
		if e.tel.m != nil { // a failed claim took its time too
			e.tel.m.recordClaims(rt.ctx, claimed, time.Since(began))
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.log.Error("durable: claiming tasks", slog.Any("error", err))
			if !sleep.For(ctx, errDelay) {
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
		if ctx.Err() != nil {
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
		case <-ctx.Done():
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// noBegin is the begin function of runStep when nothing counts attempts.
func noBegin() {}

// claimTimeout bounds one claim call, which Stop does not interrupt.
const claimTimeout = 30 * time.Second

// startStep runs a claimed task in a goroutine of its own, holding one slot
// until its outcome is queued for recording. Whatever the step does (return,
// panic, or end its goroutine with runtime.Goexit, as t.FailNow does), an
// outcome is queued and the slot freed.
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
			stopTimer()
			cancel(nil)
			rt.completer.Send(completer.Message[outcomeMeta]{Outcome: o, Meta: meta, Recorded: recorded})
			<-rt.slots
			signal(rt.slotFreed)
		}()
		o = e.runStep(ctx, cancel, lose, c, begin, &recorded)
		returned = true
	})
}
