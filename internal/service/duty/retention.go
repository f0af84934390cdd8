package duty

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/internal/service/leader"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// EventStore is what Retention asks of the store for events.
type EventStore interface {
	PruneEvents(ctx context.Context, p *store.PruneEventsParams) (*store.PruneEventsResult, error)
}

// RetentionConfig is what Retention is given.
type RetentionConfig struct {
	Common
	// Runs is how long settled runs are kept (0: forever); PruneRuns
	// deletes those settled longer ago than its argument, in batches, and
	// returns how many. PruneRuns is required with Runs.
	Runs      time.Duration
	PruneRuns func(ctx context.Context, olderThan time.Duration) (int, error)
	// Events is how long sent events are kept (0: forever); Store deletes
	// them, Batch at a time. Store is required with Events.
	Events time.Duration
	Store  EventStore
	// Batch is the most events deleted in one store call; required with
	// Events.
	Batch int
}

// Retention deletes the runs that settled more than Runs ago and the
// events sent more than Events ago, every Interval.
type Retention struct {
	startstop.Base
	cfg RetentionConfig
}

// NewRetention returns the duty, not started.
func NewRetention(cfg RetentionConfig) *Retention {
	cfg.defaults()
	return &Retention{cfg: cfg}
}

// Interval is how often the duty prunes: a quarter of the shorter
// retention, between a second and a minute.
func (d *Retention) Interval() time.Duration {
	r := d.cfg.Runs
	if r <= 0 || (d.cfg.Events > 0 && d.cfg.Events < r) {
		r = d.cfg.Events
	}
	return min(max(r/4, time.Second), time.Minute)
}

// Start starts pruning.
func (d *Retention) Start(ctx context.Context) error {
	d.Go(ctx, d.run)
	return nil
}

func (d *Retention) run(ctx context.Context) {
	log := d.cfg.Logger
	for {
		if d.cfg.Runs > 0 {
			n, err := d.cfg.PruneRuns(ctx, d.cfg.Runs)
			switch {
			case leader.Deposed(log, err):
				return
			case err != nil && ctx.Err() == nil:
				log.Error("durable: pruning settled runs", slog.Any("error", err))
			case n > 0:
				log.Debug("durable: pruned settled runs", slog.Int("runs", n), slog.Duration("retention", d.cfg.Runs))
			}
		}
		if d.cfg.Events > 0 {
			n, err := d.pruneEvents(ctx)
			switch {
			case leader.Deposed(log, err):
				return
			case err != nil && ctx.Err() == nil:
				log.Error("durable: pruning events", slog.Any("error", err))
			case n > 0:
				log.Debug("durable: pruned events", slog.Int("events", n), slog.Duration("retention", d.cfg.Events))
			}
		}
		// The process's clock paces the passes (virtual under
		// testing/synctest), not Now: a clock an engine is given may
		// stand still, and every wait would then be the same, as short as a
		// nanosecond: passes back to back.
		if !sleep.For(ctx, nextPass(time.Now(), d.Interval())) {
			return
		}
	}
}

// nextPass is how long to wait at now before the next pass: passes fall
// at a fixed offset (a tenth of interval) after each multiple of interval
// on the clock, rather than interval after the last pass ended, which
// would drift by the passes' own time. The history's periods begin at
// multiples of their length (pgstore's historyPeriodFor), so passes at a
// fixed phase find their expired periods at a fixed rhythm (one each time
// with a minute's retention), not, as the phase drifts past a period's
// expiry, none and then two: the storage held stays level, where a
// period kept one pass longer showed as 6% more (bench --scenario soak).
func nextPass(now time.Time, interval time.Duration) time.Duration {
	next := now.Truncate(interval).Add(interval / 10)
	if !next.After(now) {
		next = next.Add(interval)
	}
	return next.Sub(now)
}

// pruneEvents deletes the events sent more than Events ago, Batch at a
// time.
func (d *Retention) pruneEvents(ctx context.Context) (int, error) {
	total := 0
	for {
		res, err := d.cfg.Store.PruneEvents(ctx, &store.PruneEventsParams{Now: d.cfg.Now(), OlderThan: d.cfg.Events, Limit: d.cfg.Batch})
		if err != nil {
			return total, fmt.Errorf("durable: prune events: %w", err)
		}
		total += res.Deleted
		if res.Deleted < d.cfg.Batch {
			return total, nil
		}
	}
}
