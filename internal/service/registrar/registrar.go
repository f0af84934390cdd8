// Package registrar keeps an engine's worker record on a store that keeps
// a registry of workers (store.WorkerRegistry): it registers the engine as
// it starts (Register), refreshes the record until it is stopped, and
// removes it at a graceful stop (Remove). Its Pruner, a leader's duty,
// prunes the records of workers that died.
package registrar

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// Registry is what the registrar asks of the store.
type Registry interface {
	RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) error
	RemoveWorker(ctx context.Context, p *store.RemoveWorkerParams) error
}

// Config is what a registrar is given.
type Config struct {
	// Registry keeps the record; nil: the registrar does nothing.
	Registry Registry
	// WorkerID is the engine's.
	WorkerID string
	// Record returns the engine's record as of now.
	Record func() store.Worker
	// Interval is the time between two refreshes
	// (dag.WorkerRefresh(DeadAfter)); required with a Registry.
	Interval time.Duration
	// LeaderRefresh is how often the store refreshes the leader's record
	// itself (store.LeaderRefresher), 0 if it does not: a leader whose
	// record the store refreshes at least every Interval skips the
	// periodic refreshes of an unchanged record.
	LeaderRefresh time.Duration
	// Now is the time the store is told (the zero time: its own clock).
	// Defaults to the zero time.
	Now func() time.Time
	// Logger logs failures. Defaults to discarding.
	Logger *slog.Logger
}

// Registrar is the registrar service.
type Registrar struct {
	startstop.Base
	cfg     Config
	refresh chan struct{}
	// registered is set when Register succeeded; read by the goroutine
	// Start starts, after it.
	registered bool
}

// New returns a registrar, not started.
func New(cfg Config) *Registrar {
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Time{} }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Registrar{cfg: cfg, refresh: make(chan struct{}, 1)}
}

// Register registers the engine with record w, bounded by ctx; a failure
// is logged, and the refreshes try again. It is called before Start, so
// that the engine is listed once it has started.
func (r *Registrar) Register(ctx context.Context, w store.Worker) {
	if r.cfg.Registry == nil {
		return
	}
	if err := r.cfg.Registry.RegisterWorker(ctx, &store.RegisterWorkerParams{Now: r.cfg.Now(), Worker: w, Started: true}); err != nil {
		r.cfg.Logger.Warn("durable: registering the worker failed; trying again", slog.Any("error", err))
		return
	}
	r.registered = true
}

// Refresh asks for the record to be refreshed now (leadership or the
// registered workflows changed, or a step began). It does not block.
func (r *Registrar) Refresh() {
	select {
	case r.refresh <- struct{}{}:
	default:
	}
}

// Start starts refreshing the record every Interval, and at once when
// asked (Refresh), until Stop or until ctx is done.
func (r *Registrar) Start(ctx context.Context) error {
	if r.cfg.Registry != nil {
		registered := r.registered
		r.Go(ctx, func(ctx context.Context) { r.run(ctx, registered) })
	}
	return nil
}

func (r *Registrar) run(ctx context.Context, registered bool) {
	storeRefreshes := r.cfg.LeaderRefresh > 0 && r.cfg.LeaderRefresh <= r.cfg.Interval
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	var last store.Worker
	for {
		periodic := false
		select {
		case <-t.C:
			periodic = true
		case <-r.refresh:
		case <-ctx.Done():
			return
		}
		w := r.cfg.Record()
		if periodic && registered && storeRefreshes && w.Leader && last.Leader && sameRecord(&w, &last) {
			continue
		}
		// A refresh is never abandoned when the engine stops: a statement
		// cancelled on its way could still be applied after Remove, and
		// list the stopped worker again. Remove follows Stop, which waits
		// for this (bounded by removeTimeout).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		err := r.cfg.Registry.RegisterWorker(rctx, &store.RegisterWorkerParams{Now: r.cfg.Now(), Worker: w, Started: !registered})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Warn("durable: refreshing the worker's record failed", slog.Any("error", err))
			}
			continue
		}
		registered, last = true, w
	}
}

// sameRecord reports whether two records of this engine say the same.
func sameRecord(a, b *store.Worker) bool {
	return a.InFlight == b.InFlight && a.Leader == b.Leader && a.Concurrency == b.Concurrency &&
		slices.Equal(a.Workflows, b.Workflows) && slices.Equal(a.Accepts, b.Accepts)
}

// removeTimeout bounds a refresh, and the removal of the record.
const removeTimeout = 5 * time.Second

// Remove deletes the record at a graceful stop, after Stop (a refresh in
// flight could otherwise list the stopped worker again); a record left
// behind shows the worker as dead after its DeadAfter.
func (r *Registrar) Remove(ctx context.Context) {
	if r.cfg.Registry == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	if err := r.cfg.Registry.RemoveWorker(ctx, &store.RemoveWorkerParams{ID: r.cfg.WorkerID}); err != nil {
		r.cfg.Logger.Warn("durable: removing the worker's record failed; it shows as dead until pruned", slog.Any("error", err))
	}
}
