package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// completer records the outcomes the steps queue (rt.outcomes) until the
// queue is closed (drain). Its context is the one outcomes are recorded
// with: cancelled, recording gives up (giveUp), and the outcomes not
// recorded are counted lost (notRecorded).
type completer struct {
	startstop.Base
	e         *Engine
	rt        *runtime
	closeOnce sync.Once
}

// Start starts recording outcomes.
func (c *completer) Start(ctx context.Context) error {
	c.Go(ctx, func(ctx context.Context) { c.e.completeLoop(ctx, c.rt) })
	return nil
}

// drain closes the outcome queue, once every step has returned, and waits
// for the completer to record what it holds until ctx is done; then
// recording gives up, and drain waits for the completer to count the rest
// lost.
func (c *completer) drain(ctx context.Context) {
	c.closeOnce.Do(func() { close(c.rt.outcomes) })
	c.Wait(ctx)
}

// Stop is drain without a deadline.
func (c *completer) Stop() { c.drain(context.Background()) }

// giveUp makes recording give up now, without waiting.
func (c *completer) giveUp() { c.Cancel() }

// completeLoop records outcomes with ctx. Under load outcomes pile up while
// a batch is being written, and the next batch takes them all at once.
func (e *Engine) completeLoop(ctx context.Context, rt *runtime) {
	var metaBuf []outcomeMeta // reused: record keeps none
	for {
		m, ok := <-rt.outcomes
		if !ok {
			return
		}
		if m.recorded != nil {
			e.recordedInTx(ctx, rt, m)
			continue
		}
		batch := []store.Outcome{m.o}
		var meta []outcomeMeta // with metrics only
		if e.tel.m != nil {
			meta = append(metaBuf[:0], m.meta)
		}
		open := true
	drain:
		for len(batch) < e.cfg.FinishBatch {
			select {
			case m, ok := <-rt.outcomes:
				if !ok {
					open = false
					break drain
				}
				if m.recorded != nil {
					e.recordedInTx(ctx, rt, m)
					continue
				}
				batch = append(batch, m.o)
				if meta != nil {
					meta = append(meta, m.meta)
				}
			default:
				break drain
			}
		}
		e.record(ctx, rt, batch, meta)
		metaBuf = meta[:0]
		landed(rt, batch)
		if !open {
			return
		}
	}
}

// landed forgets the flights of outcomes that were recorded or given up.
func landed(rt *runtime, batch []store.Outcome) {
	rt.steps.Forget(batch)
}

// recordedInTx does for an outcome the store recorded in its step's
// transaction (a TxStep) what recording it does for any other.
func (e *Engine) recordedInTx(ctx context.Context, rt *runtime, m outcomeMsg) {
	batch := []store.Outcome{m.o}
	var meta []outcomeMeta
	if e.tel.m != nil {
		meta = []outcomeMeta{m.meta}
	}
	e.recorded(ctx, rt, batch, meta, []store.FinishResult{*m.recorded})
	landed(rt, batch)
}

// record records a batch of outcomes. Transient store errors are retried
// (until Stop gives up); any other error means the store refuses the batch
// as given, so it is split until the outcome the store refuses stands alone.
// The others are recorded; the refused one is recorded instead as a
// terminal failure of its step naming the store's error, and given up (its
// step is rescued later) only if even that is refused. One outcome the store
// cannot take never holds back the rest.
//
// meta, set when the engine has metrics, describes the outcomes of batch
// for them. ctx is the completer's: done when Stop gives up.
func (e *Engine) record(ctx context.Context, rt *runtime, batch []store.Outcome, meta []outcomeMeta) {
	e.recordOrReplace(ctx, rt, batch, meta, true)
}

func (e *Engine) recordOrReplace(ctx context.Context, rt *runtime, batch []store.Outcome, meta []outcomeMeta, replace bool) {
	res, err := e.finish(ctx, rt, batch)
	switch {
	case err == nil:
		e.recorded(ctx, rt, batch, meta, res)
	case ctx.Err() != nil || errors.Is(err, durabletype.ErrTransient):
		e.notRecorded(rt, batch, err)
	case len(batch) > 1:
		h := len(batch) / 2
		var lo, hi []outcomeMeta
		if meta != nil {
			lo, hi = meta[:h], meta[h:]
		}
		e.recordOrReplace(ctx, rt, batch[:h], lo, replace)
		e.recordOrReplace(ctx, rt, batch[h:], hi, replace)
	case !replace || batch[0].Kind == store.OutcomeRelease:
		e.notRecorded(rt, batch, err)
	default:
		o := batch[0]
		e.log.Error("durable: the store refused a step's outcome; recording the step as failed",
			slog.String("run_id", o.Task.RunID.String()), slog.String("step", o.Task.Step), slog.Any("error", err))
		e.recordOrReplace(ctx, rt, []store.Outcome{{
			Task: o.Task, Kind: store.OutcomeFail, Terminal: true,
			Error: fmt.Sprintf("durable: the store refused this step's outcome: %v", err),
		}}, meta, false)
	}
}

// recorded follows up the results of a batch of outcomes the store took.
func (e *Engine) recorded(ctx context.Context, rt *runtime, batch []store.Outcome, meta []outcomeMeta, res []store.FinishResult) {
	if e.tel.m != nil {
		e.tel.m.recordFinish(rt.ctx, batch, meta, res)
	}
	// The outcomes may have made children ready: look at once rather
	// than wait for the store's notification to come back.
	signal(rt.readySig)
	for i, r := range res {
		if r.Status == store.FinishStale {
			e.staleOutcome(ctx, rt, batch[i])
		}
	}
}

// staleOutcome logs an outcome the store rejected because its claim was
// no longer current: expected when the step's run was cancelled, a warning
// otherwise (the step was rescued from this engine: it ran twice).
func (e *Engine) staleOutcome(ctx context.Context, rt *runtime, o store.Outcome) {
	level, msg := slog.LevelWarn, "durable: outcome rejected, the claim is no longer current"
	if rt.steps.WasCancelled(o.Task) {
		level, msg = slog.LevelDebug, "durable: outcome not recorded, the run was cancelled"
	}
	e.log.Log(ctx, level, msg, slog.String("run_id", o.Task.RunID.String()), slog.String("step", o.Task.Step))
}

// finish calls FinishTasks, trying again with backoff while its errors are
// transient and Stop has not given up on recording (ctx).
func (e *Engine) finish(ctx context.Context, rt *runtime, batch []store.Outcome) ([]store.FinishResult, error) {
	delay := 50 * time.Millisecond
	for {
		var began time.Time
		if e.tel.m != nil {
			began = time.Now()
		}
		res, err := e.store.FinishTasks(ctx, &store.FinishTasksParams{Now: e.now(), Outcomes: batch})
		if e.tel.m != nil {
			e.tel.m.storeDuration.Record(rt.ctx, time.Since(began).Seconds(), e.tel.m.finishOp.rec...)
		}
		if err == nil || !errors.Is(err, durabletype.ErrTransient) || ctx.Err() != nil {
			return res, err
		}
		e.log.Warn("durable: recording outcomes failed; trying again", slog.Int("outcomes", len(batch)),
			slog.Duration("in", delay), slog.Any("error", err))
		if !sleep.For(ctx, delay) {
			return nil, err
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// notRecorded gives up on outcomes: their steps stay RUNNING until a leader
// rescues them after DeadAfter, and Stop reports them.
func (e *Engine) notRecorded(rt *runtime, batch []store.Outcome, err error) {
	e.log.Error("durable: giving up recording outcomes; their steps will be rescued and run again",
		slog.Int("outcomes", len(batch)), slog.Any("error", err))
	rt.lostMu.Lock()
	rt.lost += len(batch)
	rt.lostErr = err
	rt.lostMu.Unlock()
}
