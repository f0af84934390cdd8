package durable

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/internal/service/leader"
	"github.com/effectivelabs/durable/internal/service/registrar"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// maxTimerWait bounds how long the leader trusts its knowledge of the next
// due timer before asking the store again.
const maxTimerWait = time.Minute

// campaign campaigns for leadership on a store that elects a leader
// (store.Elector), and leads while elected; on another store, it leads.
// It returns when ctx is done.
func (e *Engine) campaign(ctx context.Context, rt *runtime) {
	if el, ok := e.store.(store.Elector); ok {
		if err := el.Lead(ctx, e.cfg.WorkerID, func(ctx context.Context) { e.lead(ctx, rt) }); err != nil && ctx.Err() == nil {
			e.log.Error("durable: leader election stopped", slog.Any("error", err))
		}
		return
	}
	e.lead(ctx, rt)
}

// leaderDuties returns the services a leader runs: firing timers, rescuing
// dead workers' steps, applying pending messages, firing schedules,
// pruning dead workers' records, runs and events past their retention, and
// sampling the queue depth, as the store and the configuration call for.
func (e *Engine) leaderDuties(rt *runtime) []startstop.Service {
	duties := []startstop.Service{
		startstop.NewFunc(func(ctx context.Context) { e.timerLoop(ctx, rt) }),
		startstop.NewFunc(e.rescueLoop),
		startstop.NewFunc(func(ctx context.Context) { e.inboxLoop(ctx, rt) }),
	}
	if s, ok := e.store.(store.Scheduler); ok {
		duties = append(duties, startstop.NewFunc(func(ctx context.Context) { e.scheduleLoop(ctx, rt, s) }))
	}
	if r, err := e.registry(); err == nil {
		duties = append(duties, registrar.NewPruner(registrar.PrunerConfig{Registry: r, Now: e.now, Logger: e.log}))
	}
	if e.cfg.Retention > 0 || e.cfg.EventRetention > 0 {
		duties = append(duties, startstop.NewFunc(e.retentionLoop))
	}
	if e.tel.m != nil {
		duties = append(duties, startstop.NewFunc(e.depthLoop))
	}
	return duties
}

// deposed reports whether err says that this engine's leadership ended
// (leader.Deposed), and logs it then.
func (e *Engine) deposed(err error) bool { return leader.Deposed(e.log, err) }

// lead runs the leader's duties (rt.duties) until ctx is cancelled
// (leadership lost or the engine stopping), and returns once they have
// stopped.
func (e *Engine) lead(ctx context.Context, rt *runtime) {
	e.log.Info("durable: leading")
	rt.leading.Store(true)
	rt.registrar.Refresh()
	defer func() {
		rt.leading.Store(false)
		rt.registrar.Refresh()
	}()
	_ = startstop.StartAll(ctx, rt.duties...) // startstop.Funcs: never fails
	<-ctx.Done()
	startstop.StopAll(rt.duties...)
	e.log.Info("durable: no longer leading")
}

// timerLoop fires due timers, sleeping until the next one is due (or a
// notification says a new one was set); without notifications, it looks
// again at least every PollInterval.
func (e *Engine) timerLoop(ctx context.Context, rt *runtime) {
	const limit = 1000
	errDelay := 100 * time.Millisecond
	for {
		res, err := e.store.FireTimers(ctx, &store.FireTimersParams{Now: e.now(), Limit: limit, Rand: randFloat()})
		if err != nil {
			if ctx.Err() != nil || e.deposed(err) {
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
		e.countSettled(ctx, res.Settled)
		if res.Fired == limit {
			continue
		}
		wait := maxTimerWait
		if !e.notifying.Load() {
			// No notification says when another engine sets an earlier
			// timer: look again every PollInterval, the bound of a timer's
			// delay then.
			wait = e.cfg.PollInterval
		}
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

// noneDead is the DeadAfter of a leader pass that rescues nothing: no
// heartbeat is that old.
const noneDead = 100 * 365 * 24 * time.Hour

// rescueLoop rescues the steps of dead workers every DeadAfter/4.
//
// A worker is dead when it has not heartbeated for DeadAfter while the
// leader could reach the store. A leader just elected, or one whose last
// pass failed, cannot tell a dead worker from one that an outage silenced
// as it silenced the leader (a database restart, a partition): its passes
// then do the chores only, and it rescues once it has been in contact with
// the store for 2×HeartbeatInterval, time enough for every live worker to
// vouch for its steps again. (Contact begins with the election, or with the
// answer to the first pass that succeeds after a failure.) An outage longer
// than DeadAfter therefore does not run every step in flight a second time.
func (e *Engine) rescueLoop(ctx context.Context) {
	interval := e.cfg.DeadAfter / 4
	grace := 2 * e.cfg.HeartbeatInterval
	// Contact is measured on this process's clock, as the waits are.
	contact := time.Now() // the store was reached: this engine was just elected
	for {
		now := time.Now()
		trusted := !contact.IsZero() && now.Sub(contact) >= grace
		deadAfter := e.cfg.DeadAfter
		if !trusted {
			deadAfter = noneDead
		}
		res, err := e.store.RescueTasks(ctx, &store.RescueTasksParams{
			Now: e.now(), DeadAfter: deadAfter, Limit: 1000, Rand: randFloat(),
		})
		switch {
		case e.deposed(err):
			return
		case err != nil && ctx.Err() == nil:
			e.log.Error("durable: rescuing dead tasks", slog.Any("error", err))
			contact = time.Time{}
		case err == nil:
			if contact.IsZero() {
				contact = time.Now() // its answer is the proof
			}
			if e.tel.m != nil {
				e.tel.m.recordRescued(ctx, res)
			}
			e.countSettled(ctx, res.Settled)
			for _, r := range res.Rescued {
				e.log.Warn("durable: rescued the step of a dead worker",
					slog.String("run_id", r.RunID.String()), slog.String("step", r.Step))
			}
			if len(res.Rescued) == 1000 {
				continue
			}
		}
		wait := interval
		if !contact.IsZero() && !trusted {
			wait = min(wait, time.Until(contact.Add(grace))) // rescue as soon as the grace ends
		}
		if !sleep.For(ctx, wait) {
			return
		}
	}
}

// retentionInterval is how often the leader prunes runs and events past
// their retention: a quarter of the shorter retention, between a second and
// a minute.
func (e *Engine) retentionInterval() time.Duration {
	r := e.cfg.Retention
	if r <= 0 || (e.cfg.EventRetention > 0 && e.cfg.EventRetention < r) {
		r = e.cfg.EventRetention
	}
	return min(max(r/4, time.Second), time.Minute)
}

// retentionLoop deletes the runs that settled more than Config.Retention
// ago, in batches (see Engine.Prune), and the events sent more than
// Config.EventRetention ago, every retentionInterval.
func (e *Engine) retentionLoop(ctx context.Context) {
	for {
		if e.cfg.Retention > 0 {
			n, err := e.Prune(ctx, e.cfg.Retention)
			switch {
			case e.deposed(err):
				return
			case err != nil && ctx.Err() == nil:
				e.log.Error("durable: pruning settled runs", slog.Any("error", err))
			case n > 0:
				e.log.Debug("durable: pruned settled runs", slog.Int("runs", n), slog.Duration("retention", e.cfg.Retention))
			}
		}
		if e.cfg.EventRetention > 0 {
			n, err := e.pruneEvents(ctx, e.cfg.EventRetention)
			switch {
			case e.deposed(err):
				return
			case err != nil && ctx.Err() == nil:
				e.log.Error("durable: pruning events", slog.Any("error", err))
			case n > 0:
				e.log.Debug("durable: pruned events", slog.Int("events", n), slog.Duration("retention", e.cfg.EventRetention))
			}
		}
		if !sleep.For(ctx, e.retentionInterval()) {
			return
		}
	}
}

// pruneEvents deletes the events sent more than olderThan ago, in batches
// of pruneBatch.
func (e *Engine) pruneEvents(ctx context.Context, olderThan time.Duration) (int, error) {
	total := 0
	for {
		res, err := e.store.PruneEvents(ctx, &store.PruneEventsParams{Now: e.now(), OlderThan: olderThan, Limit: pruneBatch})
		if err != nil {
			return total, fmt.Errorf("durable: prune events: %w", err)
		}
		total += res.Deleted
		if res.Deleted < pruneBatch {
			return total, nil
		}
	}
}

// inboxLoop applies the messages for runs left pending (Store.ApplyInbox)
// when notified: events sent in callers' transactions, once they commit.
// What a process that died left behind the store's periodic leader pass
// finds (pgstore: RescueTasks).
func (e *Engine) inboxLoop(ctx context.Context, rt *runtime) {
	const limit = 1000
	for {
		select {
		case <-rt.inboxSig:
		case <-ctx.Done():
			return
		}
		for {
			res, err := e.store.ApplyInbox(ctx, &store.ApplyInboxParams{Now: e.now(), Limit: limit})
			if err != nil {
				if e.deposed(err) {
					return
				}
				if ctx.Err() == nil {
					e.log.Error("durable: applying pending messages", slog.Any("error", err))
				}
				break
			}
			e.countSettled(ctx, res.Settled)
			if res.Applied < limit {
				break
			}
		}
	}
}
