// Package heartbeat is the engine's heartbeat: it vouches for the claims
// of the steps the engine runs, so that no leader rescues them, and stops
// the steps whose claims the store says are no longer current (their run
// was cancelled, their attempt timed out, or the claim was lost).
package heartbeat

import (
	"context"
	"log/slog"
	"time"

	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// Store is what the heartbeat asks of the store.
type Store interface {
	Heartbeat(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error)
}

// Claims are the claims the heartbeat vouches for (inflight.Steps).
type Claims interface {
	// Refs returns the claims of the running steps.
	Refs() []store.TaskRef
	// Heartbeat stops the steps whose claims res says are not current.
	Heartbeat(res *store.HeartbeatResult)
}

// Config is what a heartbeat is given.
type Config struct {
	// Store is stamped with the claims.
	Store Store
	// Claims are the claims vouched for.
	Claims Claims
	// WorkerID is the worker the claims belong to.
	WorkerID string
	// Interval is the time between two heartbeats; required.
	Interval time.Duration
	// Now is the time the store is told (the zero time: its own clock).
	// Defaults to the zero time.
	Now func() time.Time
	// Logger logs failed heartbeats. Defaults to discarding.
	Logger *slog.Logger
}

// Heartbeat is the heartbeat service.
type Heartbeat struct {
	startstop.Base
	cfg     Config
	now     chan struct{}
	claimed chan struct{}
}

// New returns a heartbeat, not started.
func New(cfg Config) *Heartbeat {
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Time{} }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Heartbeat{cfg: cfg, now: make(chan struct{}, 1), claimed: make(chan struct{}, 1)}
}

// Beat asks the heartbeat to vouch for the claims at once (notifications
// may have been missed: a run cancelled meanwhile is found now rather than
// at the next beat). It does not block.
func (h *Heartbeat) Beat() {
	select {
	case h.now <- struct{}{}:
	default:
	}
}

// Claimed says a claim was added to the claims: an idle heartbeat (one
// that found no claim to vouch for) starts beating again, the first beat
// an Interval later. It does not block.
func (h *Heartbeat) Claimed() {
	select {
	case h.claimed <- struct{}{}:
	default:
	}
}

// Start starts vouching every Interval, and at once when asked (Beat),
// until Stop or until ctx is done. A beat that finds no claim makes the
// heartbeat idle: it sleeps, with no timer, until a claim begins
// (Claimed), so that an idle engine costs nothing, and virtual time
// (testing/synctest) passes without a wake-up every Interval.
func (h *Heartbeat) Start(ctx context.Context) error {
	h.Go(ctx, h.run)
	return nil
}

func (h *Heartbeat) run(ctx context.Context) {
	// A heartbeat in flight at Stop is not cancelled: Stop waits for it,
	// so that the claims stay vouched for while the engine drains.
	callCtx := context.WithoutCancel(ctx)
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	tick := t.C // nil while idle
	for {
		select {
		case <-tick:
		case <-h.now:
		case <-h.claimed:
			if tick == nil {
				t.Reset(h.cfg.Interval)
				tick = t.C
			}
			continue
		case <-ctx.Done():
			return
		}
		refs := h.cfg.Claims.Refs()
		if len(refs) == 0 {
			t.Stop()
			tick = nil
			continue
		}
		res, err := h.cfg.Store.Heartbeat(callCtx, &store.HeartbeatParams{Now: h.cfg.Now(), WorkerID: h.cfg.WorkerID, Tasks: refs})
		if err != nil {
			h.cfg.Logger.Warn("durable: heartbeat failed", slog.Any("error", err))
			continue
		}
		h.cfg.Claims.Heartbeat(res)
	}
}
