package duty

import (
	"context"
	"log/slog"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/internal/service/leader"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// ScheduleStore is what Schedules asks of the store (store.Scheduler).
type ScheduleStore interface {
	FireSchedules(ctx context.Context, p *store.FireSchedulesParams) (*store.FireSchedulesResult, error)
}

// MaxScheduleWait bounds how long the leader trusts its knowledge of the
// next due slot before asking the store again: a schedule created or
// resumed elsewhere is announced by a notification, but a store without
// them (and a process whose timers were frozen by a suspended VM) relies
// on this bound.
const MaxScheduleWait = time.Minute

// MaxNotifiedWait is MaxScheduleWait while notifications are heard.
const MaxNotifiedWait = 5 * time.Minute

// fireTimeout bounds one FireSchedules call.
const fireTimeout = 30 * time.Second

// leftScheduleWait is the least wait between calls while due schedules
// are left to a newer engine (store.FireSchedulesResult.Left).
const leftScheduleWait = 5 * time.Second

// scheduleBatch is the most schedules fired in one store call.
const scheduleBatch = 500

// SchedulesConfig is what Schedules is given.
type SchedulesConfig struct {
	Common
	Store ScheduleStore
	// Shapes returns the shapes of the workflows the engine registered
	// (of each, its newest version), which the runs of their schedules
	// start with. Defaults to none.
	Shapes func() map[string]*durabletype.Shape
	// Notifying reports whether the store's notifications are heard now.
	// Defaults to never.
	Notifying func() bool
	// Fired, when set, is called after a call that started runs.
	Fired func()
}

// Schedules fires the schedules' due slots, sleeping until the next is due
// (at most MaxScheduleWait, or MaxNotifiedWait while notifications are
// heard) or a notification says a schedule was created or resumed (Wake).
// With no active schedule while notifications are heard, it waits for a
// notification only: schedules cost nothing when unused.
type Schedules struct {
	startstop.Base
	cfg  SchedulesConfig
	wake wake
}

// NewSchedules returns the duty, not started.
func NewSchedules(cfg SchedulesConfig) *Schedules {
	cfg.defaults()
	if cfg.Shapes == nil {
		cfg.Shapes = func() map[string]*durabletype.Shape { return nil }
	}
	if cfg.Notifying == nil {
		cfg.Notifying = func() bool { return false }
	}
	if cfg.Fired == nil {
		cfg.Fired = func() {}
	}
	return &Schedules{cfg: cfg, wake: newWake()}
}

// Wake says a slot may be due sooner than the duty thought. It does not
// block.
func (d *Schedules) Wake() { d.wake.signal() }

// Start starts firing slots.
func (d *Schedules) Start(ctx context.Context) error {
	d.Go(ctx, d.run)
	return nil
}

func (d *Schedules) run(ctx context.Context) {
	log := d.cfg.Logger
	errDelay := 100 * time.Millisecond
	for {
		// Notifications may stop (the listener lost its connection) and
		// never start (behind a transaction pooler): it is read each time.
		notifies := d.cfg.Notifying()
		// A call in flight when leadership is lost finishes (bounded), so
		// that its outcome is known rather than ambiguous: had it been
		// cancelled during its commit, the slots it fired would go unlogged
		// (though never fired twice: a new leader finds them fired).
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fireTimeout)
		res, err := d.cfg.Store.FireSchedules(fctx, &store.FireSchedulesParams{
			Now: d.cfg.Now(), Limit: scheduleBatch, Shapes: d.cfg.Shapes(),
		})
		cancel()
		if err != nil {
			if ctx.Err() != nil || leader.Deposed(log, err) {
				return
			}
			log.Error("durable: firing schedules", slog.Any("error", err))
			if !sleep.For(ctx, errDelay) {
				return
			}
			errDelay = min(2*errDelay, 5*time.Second)
			continue
		}
		errDelay = 100 * time.Millisecond
		for _, b := range res.Broken {
			log.Error("durable: schedule cannot fire; it is stopped until resumed",
				slog.String("tenant", b.Key.Tenant), slog.String("schedule", b.Key.Name), slog.String("error", b.Error))
		}
		for _, f := range res.Fired {
			if f.Missed > 0 {
				log.Warn("durable: schedule missed slots; fired the latest only",
					slog.String("tenant", f.Tenant), slog.String("schedule", f.Name),
					slog.Int("missed", f.Missed), slog.Time("slot", f.Slot))
			}
		}
		if len(res.Fired) > 0 {
			d.cfg.Fired()
		}
		if res.More {
			continue
		}
		wait := time.Duration(-1) // no timer: a notification only
		switch {
		case res.HasNext && notifies:
			wait = min(res.Next, MaxNotifiedWait)
		case res.HasNext:
			wait = min(res.Next, MaxScheduleWait)
		case !notifies:
			wait = MaxScheduleWait
		}
		if res.Left > 0 {
			// Schedules a newer engine must fire stay due: look again
			// after a pause, not at once and again.
			wait = max(wait, leftScheduleWait)
		}
		var t *time.Timer
		var tc <-chan time.Time
		if wait >= 0 {
			t = time.NewTimer(wait)
			tc = t.C
		}
		select {
		case <-tc:
		case <-d.wake:
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}
