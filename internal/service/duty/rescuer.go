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

// RescueStore is what the Rescuer asks of the store.
type RescueStore interface {
	RescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error)
}

// noneDead is the DeadAfter of a pass that rescues nothing: no heartbeat
// is that old.
const noneDead = 100 * 365 * 24 * time.Hour

// rescueBatch is the most tasks rescued in one store call.
const rescueBatch = 1000

// RescuerConfig is what the Rescuer is given.
type RescuerConfig struct {
	Common
	Store RescueStore
	// DeadAfter is how long a worker that has not heartbeated is
	// presumed alive; a pass runs every DeadAfter/4. Required.
	DeadAfter time.Duration
	// HeartbeatInterval is the workers' (Config.HeartbeatInterval): a new
	// leader waits for two of them before it rescues. Required.
	HeartbeatInterval time.Duration
	// Rescued, when set, is given the result of each pass that succeeded.
	Rescued func(ctx context.Context, res *store.RescueTasksResult)
}

// Rescuer rescues the steps of dead workers every DeadAfter/4.
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
type Rescuer struct {
	startstop.Base
	cfg RescuerConfig
}

// NewRescuer returns the duty, not started.
func NewRescuer(cfg RescuerConfig) *Rescuer {
	cfg.defaults()
	if cfg.Rescued == nil {
		cfg.Rescued = func(context.Context, *store.RescueTasksResult) {}
	}
	return &Rescuer{cfg: cfg}
}

// Start starts rescuing; leadership begins with it.
func (d *Rescuer) Start(ctx context.Context) error {
	d.Go(ctx, d.run)
	return nil
}

func (d *Rescuer) run(ctx context.Context) {
	interval := d.cfg.DeadAfter / 4
	grace := 2 * d.cfg.HeartbeatInterval
	// Contact is measured on this process's clock, as the waits are.
	contact := time.Now() // the store was reached: this engine was just elected
	for {
		now := time.Now()
		trusted := !contact.IsZero() && now.Sub(contact) >= grace
		deadAfter := d.cfg.DeadAfter
		if !trusted {
			deadAfter = noneDead
		}
		res, err := d.cfg.Store.RescueTasks(ctx, &store.RescueTasksParams{
			Now: d.cfg.Now(), DeadAfter: deadAfter, Limit: rescueBatch, Rand: rand.Float64(),
		})
		switch {
		case leader.Deposed(d.cfg.Logger, err):
			return
		case err != nil && ctx.Err() == nil:
			d.cfg.Logger.Error("durable: rescuing dead tasks", slog.Any("error", err))
			contact = time.Time{}
		case err == nil:
			if contact.IsZero() {
				contact = time.Now() // its answer is the proof
			}
			d.cfg.Rescued(ctx, res)
			d.cfg.Settled(ctx, res.Settled)
			for _, r := range res.Rescued {
				d.cfg.Logger.Warn("durable: rescued the step of a dead worker",
					slog.String("run_id", r.RunID.String()), slog.String("step", r.Step))
			}
			if len(res.Rescued) == rescueBatch {
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
