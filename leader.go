package durable

import (
	"github.com/effectivelabs/durable/internal/service/duty"
	"github.com/effectivelabs/durable/internal/service/leader"
	"github.com/effectivelabs/durable/internal/service/registrar"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// newLeader returns the leader of rt, with its duties: firing timers,
// rescuing dead workers' steps, applying pending messages, firing
// schedules, pruning dead workers' records, runs and events past their
// retention, and sampling the queue depth, as the store and the
// configuration call for. It campaigns on a store that elects a leader
// (store.Elector), and leads from the start on another. The duties that
// are woken (timers, inbox, schedules) are rt's.
func (e *Engine) newLeader(rt *runtime) *leader.Leader {
	common := duty.Common{Now: e.now, Logger: e.log, Settled: e.countSettled}
	rt.timers = duty.NewTimers(duty.TimersConfig{
		Common: common, Store: e.store, PollInterval: e.cfg.PollInterval, Notifying: e.notifying.Load,
	})
	rescue := duty.RescuerConfig{
		Common: common, Store: e.store, DeadAfter: e.cfg.DeadAfter, HeartbeatInterval: e.cfg.HeartbeatInterval,
	}
	if m := e.tel.m; m != nil {
		rescue.Rescued = m.recordRescued
	}
	rt.inbox = duty.NewInbox(duty.InboxConfig{Common: common, Store: e.store})
	duties := []startstop.Service{rt.timers, duty.NewRescuer(rescue), rt.inbox}
	if s, ok := e.store.(store.Scheduler); ok {
		rt.schedules = duty.NewSchedules(duty.SchedulesConfig{
			Common: common, Store: s, Shapes: e.registeredShapes, Notifying: e.notifying.Load, Fired: e.wakeClaims,
		})
		duties = append(duties, rt.schedules)
	}
	if r, err := e.registry(); err == nil {
		duties = append(duties, registrar.NewPruner(registrar.PrunerConfig{Registry: r, Now: e.now, Logger: e.log}))
	}
	if e.cfg.Retention > 0 || e.cfg.EventRetention > 0 {
		duties = append(duties, duty.NewRetention(duty.RetentionConfig{
			Common: common, Runs: e.cfg.Retention, PruneRuns: e.retain,
			Events: e.cfg.EventRetention, Store: e.store, Batch: pruneBatch,
		}))
	}
	if e.tel.m != nil {
		duties = append(duties, startstop.NewFunc(e.depthLoop))
	}
	cfg := leader.Config{
		WorkerID: e.cfg.WorkerID, Duties: duties, Logger: e.log,
		// The worker's record says whether it leads.
		Changed: func(bool) { rt.registrar.Refresh() },
	}
	if el, ok := e.store.(store.Elector); ok {
		cfg.Elector = el
	}
	return leader.New(cfg)
}

// wakeTimers tells rt's timer duty that a timer was set.
func (rt *runtime) wakeTimers() { rt.timers.Wake() }

// wakeSchedules tells rt's schedule duty, if the store keeps schedules,
// that a slot may be due sooner than it thought.
func (rt *runtime) wakeSchedules() {
	if rt.schedules != nil {
		rt.schedules.Wake()
	}
}

// leading reports whether this engine leads now.
func (rt *runtime) leading() bool { return rt.leader.Leading() }
