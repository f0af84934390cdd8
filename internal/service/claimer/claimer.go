// Package claimer is an engine's claim loop: it claims ready tasks while
// the engine has free slots (one per step it may run at once) and hands
// each to the executor, which runs its step and frees its slot (Done).
// When the queue is empty it waits for a wake-up (Wake: a notification, or
// outcomes that may have made tasks ready) or its poll interval, which
// doubles up to MaxPollInterval while notifications are heard.
package claimer

import (
	"context"
	"log/slog"
	"time"

	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// Store is what the claimer asks of the store.
type Store interface {
	ClaimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error)
}

// Executor runs the steps of claimed tasks.
type Executor interface {
	// Execute starts running the step of c and returns at once. c holds
	// one of the claimer's slots until the executor calls Done, once,
	// whatever the step does.
	Execute(c *store.ClaimedTask)
}

// Timeout bounds one claim call, which Stop does not interrupt: once a
// claim commits its tasks are the engine's, to run or give back, rather
// than RUNNING until a rescue.
const Timeout = 30 * time.Second

// Config is what a claimer is given.
type Config struct {
	// Store claims the tasks.
	Store Store
	// Executor runs them.
	Executor Executor
	// WorkerID is the engine's, which the claims record.
	WorkerID string
	// Slots is the most steps running at once; required.
	Slots int
	// Batch is the most tasks claimed in one store call; required.
	Batch int
	// TenantLimit is the most steps of one tenant running at once (0: no
	// limit).
	TenantLimit int
	// PollInterval is the time between two claims that found nothing;
	// while notifications are heard it doubles up to MaxPollInterval.
	// Required.
	PollInterval, MaxPollInterval time.Duration
	// Served returns the workflows the engine serves and the queues it
	// claims from (their versions).
	Served func() (workflows, queues []string)
	// Notifying reports whether the store's notifications are heard now.
	// Defaults to never.
	Notifying func() bool
	// Claimed, when set, is given every claim's tasks and how long the
	// call took (a failed one too, with none).
	Claimed func(claimed []*store.ClaimedTask, took time.Duration)
	// Now is the time the store is told (the zero time: its own clock).
	// Defaults to the zero time.
	Now func() time.Time
	// Logger logs failed claims. Defaults to discarding.
	Logger *slog.Logger
}

// Claimer is the claim loop's service.
type Claimer struct {
	startstop.Base
	cfg   Config
	slots chan struct{}
	freed chan struct{}
	ready chan struct{}
}

// New returns a claimer, not started.
func New(cfg Config) *Claimer {
	if cfg.Notifying == nil {
		cfg.Notifying = func() bool { return false }
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Time{} }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Claimer{
		cfg: cfg, slots: make(chan struct{}, cfg.Slots),
		freed: make(chan struct{}, 1), ready: make(chan struct{}, 1),
	}
}

// Wake says tasks may have become ready: the claimer looks at once. It
// does not block.
func (c *Claimer) Wake() { signal(c.ready) }

// Done frees the slot of a task whose step ended (its outcome queued).
func (c *Claimer) Done() {
	<-c.slots
	signal(c.freed)
}

// Start starts claiming, until Stop or until ctx is done. A claim in
// flight then completes, and its tasks are executed.
func (c *Claimer) Start(ctx context.Context) error {
	c.Go(ctx, c.run)
	return nil
}

func (c *Claimer) run(ctx context.Context) {
	cfg := &c.cfg
	interval := cfg.PollInterval
	errDelay := 100 * time.Millisecond
	for {
		free := cap(c.slots) - len(c.slots)
		if free == 0 {
			select {
			case <-c.freed:
				continue
			case <-ctx.Done():
				return
			}
		}
		want := min(free, cfg.Batch)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), Timeout)
		var began time.Time
		if cfg.Claimed != nil {
			began = time.Now()
		}
		names, queues := cfg.Served()
		claimed, err := cfg.Store.ClaimTasks(cctx, &store.ClaimTasksParams{
			Now: cfg.Now(), WorkerID: cfg.WorkerID, Limit: want,
			Workflows: names, Queues: queues, TenantLimit: cfg.TenantLimit,
		})
		cancel()
		if cfg.Claimed != nil { // a failed claim took its time too
			cfg.Claimed(claimed, time.Since(began))
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			cfg.Logger.Error("durable: claiming tasks", slog.Any("error", err))
			if !sleep.For(ctx, errDelay) {
				return
			}
			errDelay = min(2*errDelay, 5*time.Second)
			continue
		}
		errDelay = 100 * time.Millisecond
		for _, t := range claimed {
			c.slots <- struct{}{}
			cfg.Executor.Execute(t)
		}
		if ctx.Err() != nil {
			return
		}
		if len(claimed) == want {
			interval = cfg.PollInterval
			continue
		}
		timer := time.NewTimer(interval)
		select {
		case <-c.ready:
			interval = cfg.PollInterval
		case <-timer.C:
			if cfg.Notifying() {
				interval = min(2*interval, cfg.MaxPollInterval)
			}
		case <-ctx.Done():
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
