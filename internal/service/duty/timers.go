package duty

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/internal/service/leader"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// TimerStore is what Timers asks of the store.
type TimerStore interface {
	FireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error)
}

// MaxTimerWait bounds how long the leader trusts its knowledge of the next
// due timer before asking the store again.
const MaxTimerWait = time.Minute

// timerBatch is the most timers fired in one store call.
const timerBatch = 1000

// TimersConfig is what Timers is given.
type TimersConfig struct {
	Common
	Store TimerStore
	// PollInterval bounds a timer's delay while no notification announces
	// the timers other engines set; required.
	PollInterval time.Duration
	// Notifying reports whether the store's notifications are heard now.
	// Defaults to never.
	Notifying func() bool
}

// Timers fires due timers (sleeps, retry backoffs, timeouts, delayed
// starts), sleeping until the next one is due or a notification says an
// earlier one was set (Wake); while notifications are not heard, it looks
// again at least every PollInterval.
type Timers struct {
	startstop.Base
	cfg  TimersConfig
	wake wake
}

// NewTimers returns the duty, not started.
func NewTimers(cfg TimersConfig) *Timers {
	cfg.defaults()
	if cfg.Notifying == nil {
		cfg.Notifying = func() bool { return false }
	}
	return &Timers{cfg: cfg, wake: newWake()}
}

// Wake says a timer was set: the next due time is read again now. It does
// not block.
func (d *Timers) Wake() { d.wake.signal() }

// Start starts firing timers.
func (d *Timers) Start(ctx context.Context) error {
	d.Go(ctx, d.run)
	return nil
}

func (d *Timers) run(ctx context.Context) {
	errDelay := 100 * time.Millisecond
	for {
		res, err := d.cfg.Store.FireTimers(ctx, &store.FireTimersParams{Now: d.cfg.Now(), Limit: timerBatch, Rand: rand.Float64()})
		if err != nil {
			if ctx.Err() != nil || leader.Deposed(d.cfg.Logger, err) {
				return
			}
			d.cfg.Logger.Error("durable: firing timers", slog.Any("error", err))
			if !sleep.For(ctx, errDelay) {
				return
			}
			errDelay = min(2*errDelay, 5*time.Second)
			continue
		}
		errDelay = 100 * time.Millisecond
		d.cfg.Settled(ctx, res.Settled)
		if res.Fired >= timerBatch { // more than one batch when it looked past runs left alone
			continue
		}
		wait := MaxTimerWait
		if !d.cfg.Notifying() {
			// No notification says when another engine sets an earlier
			// timer: look again every PollInterval, the bound of a timer's
			// delay then.
			wait = d.cfg.PollInterval
		}
		if res.HasNext && res.Next < wait {
			wait = res.Next
		}
		if res.Left > 0 {
			// Timers of runs a newer engine must fire stay due: look again
			// at the pace of polling, not at once and again.
			wait = max(wait, d.cfg.PollInterval)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-d.wake:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}
