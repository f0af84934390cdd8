package registrar

import (
	"context"
	"log/slog"
	"time"

	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/internal/service/leader"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// Pruning is what the pruner asks of the store.
type Pruning interface {
	PruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (*store.PruneWorkersResult, error)
}

// PruneInterval is how often the leader prunes the records of workers that
// died (dag.WorkerPrunable).
const PruneInterval = time.Hour

// PrunerConfig is what a pruner is given.
type PrunerConfig struct {
	// Registry prunes the records.
	Registry Pruning
	// Interval is the time between two prunes. Defaults to PruneInterval.
	Interval time.Duration
	// Now is the time the store is told (the zero time: its own clock).
	// Defaults to the zero time.
	Now func() time.Time
	// Logger logs failures and prunes. Defaults to discarding.
	Logger *slog.Logger
}

// Pruner is a leader's duty: it prunes dead workers' records when
// leadership begins and every Interval, until it is stopped or deposed.
type Pruner struct {
	startstop.Base
	cfg PrunerConfig
}

// NewPruner returns a pruner, not started.
func NewPruner(cfg PrunerConfig) *Pruner {
	if cfg.Interval <= 0 {
		cfg.Interval = PruneInterval
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Time{} }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pruner{cfg: cfg}
}

// Start starts pruning.
func (p *Pruner) Start(ctx context.Context) error {
	p.Go(ctx, p.run)
	return nil
}

func (p *Pruner) run(ctx context.Context) {
	for {
		res, err := p.cfg.Registry.PruneWorkers(ctx, &store.PruneWorkersParams{Now: p.cfg.Now()})
		switch {
		case leader.Deposed(p.cfg.Logger, err):
			return
		case err != nil && ctx.Err() == nil:
			p.cfg.Logger.Error("durable: pruning dead workers' records", slog.Any("error", err))
		case err == nil && res.Deleted > 0:
			p.cfg.Logger.Debug("durable: pruned dead workers' records", slog.Int("workers", res.Deleted))
		}
		if !sleep.For(ctx, p.cfg.Interval) {
			return
		}
	}
}
