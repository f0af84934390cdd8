// Package leader campaigns for an engine's leadership and, while the engine
// leads, runs the leader's duties (internal/service/duty: timers, rescues,
// the inbox, retention, schedules, ...). On a store that elects a leader
// (store.Elector) the engine leads while elected; on another, it leads as
// long as it runs.
//
// Leadership is an optimization, not a correctness mechanism: every
// leader-only write carries the leadership's term, and a write refused
// because another engine leads (Deposed) stops the duty that made it.
package leader

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/effectivelabs/durable/internal/service/startstop"
)

// Elector is what the leader asks of a store that elects one
// (store.Elector).
type Elector interface {
	Lead(ctx context.Context, id string, lead func(ctx context.Context)) error
}

// Config is what a leader is given.
type Config struct {
	// Elector elects the leader; nil: this engine leads from its start.
	Elector Elector
	// WorkerID is the engine's, its name in the election.
	WorkerID string
	// Duties are started when leadership begins and stopped when it ends.
	Duties []startstop.Service
	// Changed, when set, is called when leadership begins (true) and when
	// it ends (false), after Leading says so.
	Changed func(leading bool)
	// Logger logs leadership's changes and a failed election. Defaults to
	// discarding.
	Logger *slog.Logger
}

// Leader is the service that campaigns and leads.
type Leader struct {
	startstop.Base
	cfg     Config
	leading atomic.Bool
}

// New returns a leader, not started.
func New(cfg Config) *Leader {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Changed == nil {
		cfg.Changed = func(bool) {}
	}
	return &Leader{cfg: cfg}
}

// Leading reports whether the engine leads now.
func (l *Leader) Leading() bool { return l.leading.Load() }

// Start starts campaigning (or, without an Elector, leading) until Stop
// or until ctx is done; Stop returns once the duties have stopped.
func (l *Leader) Start(ctx context.Context) error {
	l.Go(ctx, l.campaign)
	return nil
}

func (l *Leader) campaign(ctx context.Context) {
	if l.cfg.Elector == nil {
		l.lead(ctx)
		return
	}
	if err := l.cfg.Elector.Lead(ctx, l.cfg.WorkerID, l.lead); err != nil && ctx.Err() == nil {
		l.cfg.Logger.Error("durable: leader election stopped", slog.Any("error", err))
	}
}

// lead runs the duties until ctx is cancelled (leadership lost or the
// engine stopping), and returns once they have stopped.
func (l *Leader) lead(ctx context.Context) {
	l.cfg.Logger.Info("durable: leading")
	l.leading.Store(true)
	l.cfg.Changed(true)
	defer func() {
		l.leading.Store(false)
		l.cfg.Changed(false)
	}()
	_ = startstop.StartAll(ctx, l.cfg.Duties...) // a duty that fails to start leaves the others stopped
	<-ctx.Done()
	startstop.StopAll(l.cfg.Duties...)
	l.cfg.Logger.Info("durable: no longer leading")
}
