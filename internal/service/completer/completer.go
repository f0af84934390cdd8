// Package completer records the outcomes of the steps an engine ran: the
// executors queue them (Send), and the completer writes them to the store
// in batches (store.Store.FinishTasks), as many as have piled up while the
// last batch was being written.
//
// A transient store error is retried with backoff until the completer is
// told to give up (GiveUp, or Drain's deadline). Any other error means the
// store refuses the batch as given: it is split until the outcome the store
// refuses stands alone, the others are recorded, and the refused one is
// recorded instead as a terminal failure of its step naming the store's
// error; only if even that is refused is it given up (its step is rescued
// later). One outcome the store cannot take never holds back the rest. See
// docs/design.md, "Outcomes the store refuses".
package completer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// Store is what the completer asks of the store.
type Store interface {
	FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error)
}

// Steps are the running steps whose outcomes the completer records
// (inflight.Steps).
type Steps interface {
	// Forget forgets the steps of outcomes recorded or given up.
	Forget(outcomes []store.Outcome)
	// WasCancelled reports whether the step under ref was stopped because
	// its run was cancelled.
	WasCancelled(ref store.TaskRef) bool
	// WasTimedOut reports whether the step under ref was stopped because
	// its attempt timed out.
	WasTimedOut(ref store.TaskRef) bool
}

// Message is an outcome queued for recording, with what the metrics need
// of it (Meta, kept only when Config.Metrics is set).
type Message[M any] struct {
	Outcome store.Outcome
	Meta    M
	// Recorded, when set, is the result of Outcome, which the store
	// recorded already (in the step's own transaction): the completer
	// follows it up as if it had recorded it.
	Recorded *store.FinishResult
	// Done, when set, is told what became of Outcome: its result once
	// recorded, or the error it was given up (or refused) with. A
	// function's body waits for its checkpoints so (store.OutcomeCheckpoint).
	Done func(store.FinishResult, error)
}

// Config is what a completer is given.
type Config[M any] struct {
	// Store records the outcomes.
	Store Store
	// Steps are told which steps' outcomes are recorded.
	Steps Steps
	// Batch is the most outcomes recorded in one store call; required.
	Batch int
	// Queue is how many outcomes may wait to be recorded before Send
	// blocks. Defaults to Batch.
	Queue int
	// Now is the time the store is told (the zero time: its own clock).
	// Defaults to the zero time.
	Now func() time.Time
	// Logger logs retries, refusals and outcomes given up. Defaults to
	// discarding.
	Logger *slog.Logger
	// Wake, when set, is called after each batch the store took: the
	// outcomes may have made other tasks ready.
	Wake func()
	// Metrics, when set, is given each batch the store took, the Meta of
	// its messages and the store's results.
	Metrics func(batch []store.Outcome, meta []M, res []store.FinishResult)
	// CallTook, when set, is told how long each store call took.
	CallTook func(time.Duration)
}

// Completer is the completer service. Its context is the one outcomes are
// recorded with: cancelled (GiveUp, Drain's deadline), recording gives up,
// and the outcomes not recorded are counted lost (Lost).
type Completer[M any] struct {
	startstop.Base
	cfg       Config[M]
	queue     chan Message[M]
	closeOnce sync.Once

	lostMu  sync.Mutex
	lost    int
	lostErr error
}

// New returns a completer, not started.
func New[M any](cfg Config[M]) *Completer[M] {
	if cfg.Queue <= 0 {
		cfg.Queue = cfg.Batch
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Time{} }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Completer[M]{cfg: cfg, queue: make(chan Message[M], cfg.Queue)}
}

// Send queues an outcome for recording; it blocks while the queue is full.
// It must not be called once Drain (or Stop) began.
func (c *Completer[M]) Send(m Message[M]) { c.queue <- m }

// Start starts recording outcomes.
func (c *Completer[M]) Start(ctx context.Context) error {
	c.Go(ctx, c.run)
	return nil
}

// Drain closes the queue, once every executor has sent its outcome, and
// waits for the completer to record what it holds until ctx is done; then
// recording gives up, and Drain waits for the completer to count the rest
// lost. Draining again does nothing.
func (c *Completer[M]) Drain(ctx context.Context) {
	c.closeOnce.Do(func() { close(c.queue) })
	c.Wait(ctx)
}

// Stop is Drain without a deadline.
func (c *Completer[M]) Stop() { c.Drain(context.Background()) }

// GiveUp makes recording give up now, without waiting.
func (c *Completer[M]) GiveUp() { c.Cancel() }

// Lost counts the outcomes given up (their steps are rescued and run
// again) and returns the last reason.
func (c *Completer[M]) Lost() (int, error) {
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	return c.lost, c.lostErr
}

// run records outcomes with ctx until the queue is closed and empty.
func (c *Completer[M]) run(ctx context.Context) {
	metrics := c.cfg.Metrics != nil
	var metaBuf []M // reused: record keeps none
	for {
		m, ok := <-c.queue
		if !ok {
			return
		}
		if m.Recorded != nil {
			c.recordedInTx(ctx, m)
			continue
		}
		batch := []store.Outcome{m.Outcome}
		var meta []M // with metrics only
		if metrics {
			meta = append(metaBuf[:0], m.Meta)
		}
		var dones []func(store.FinishResult, error) // with a Done only
		if m.Done != nil {
			dones = []func(store.FinishResult, error){m.Done}
		}
		open := true
	drain:
		for len(batch) < c.cfg.Batch {
			select {
			case m, ok := <-c.queue:
				if !ok {
					open = false
					break drain
				}
				if m.Recorded != nil {
					c.recordedInTx(ctx, m)
					continue
				}
				if m.Done != nil && dones == nil {
					dones = make([]func(store.FinishResult, error), len(batch))
				}
				batch = append(batch, m.Outcome)
				if meta != nil {
					meta = append(meta, m.Meta)
				}
				if dones != nil {
					dones = append(dones, m.Done)
				}
			default:
				break drain
			}
		}
		c.record(ctx, batch, meta, dones, true)
		metaBuf = meta[:0]
		c.forget(batch)
		if !open {
			return
		}
	}
}

// recordedInTx does for an outcome the store recorded in its step's
// transaction what recording it does for any other.
func (c *Completer[M]) recordedInTx(ctx context.Context, m Message[M]) {
	batch := []store.Outcome{m.Outcome}
	var meta []M
	if c.cfg.Metrics != nil {
		meta = []M{m.Meta}
	}
	res := []store.FinishResult{*m.Recorded}
	c.recorded(ctx, batch, meta, res)
	if m.Done != nil {
		m.Done(res[0], nil)
	}
	c.forget(batch)
}

// forget forgets the steps whose outcomes ended their claims: a
// checkpoint does not (store.OutcomeCheckpoint).
func (c *Completer[M]) forget(batch []store.Outcome) {
	ended := batch
	for k := range batch {
		if batch[k].Kind == store.OutcomeCheckpoint {
			ended = make([]store.Outcome, 0, len(batch))
			for _, o := range batch {
				if o.Kind != store.OutcomeCheckpoint {
					ended = append(ended, o)
				}
			}
			break
		}
	}
	c.cfg.Steps.Forget(ended)
}

// record records a batch of outcomes, splitting it while the store refuses
// it and, when replace is set, recording an outcome refused alone as a
// terminal failure of its step instead (see the package's doc). meta, set
// with metrics, describes the outcomes of batch.
func (c *Completer[M]) record(ctx context.Context, batch []store.Outcome, meta []M, dones []func(store.FinishResult, error), replace bool) {
	res, err := c.finish(ctx, batch)
	done := func(k int, r store.FinishResult, err error) {
		if dones != nil && dones[k] != nil {
			dones[k](r, err)
		}
	}
	switch {
	case err == nil:
		c.recorded(ctx, batch, meta, res)
		for k := range batch {
			done(k, res[k], nil)
		}
	case ctx.Err() != nil || errors.Is(err, durabletype.ErrTransient):
		c.notRecorded(batch, err)
		for k := range batch {
			done(k, store.FinishResult{}, err)
		}
	case len(batch) > 1:
		h := len(batch) / 2
		var lo, hi []M
		if meta != nil {
			lo, hi = meta[:h], meta[h:]
		}
		var dlo, dhi []func(store.FinishResult, error)
		if dones != nil {
			dlo, dhi = dones[:h], dones[h:]
		}
		c.record(ctx, batch[:h], lo, dlo, replace)
		c.record(ctx, batch[h:], hi, dhi, replace)
	case !replace || batch[0].Kind == store.OutcomeRelease:
		c.notRecorded(batch, err)
		done(0, store.FinishResult{}, err)
	default:
		done(0, store.FinishResult{}, err)
		o := batch[0]
		c.cfg.Logger.Error("durable: the store refused a step's outcome; recording the step as failed",
			slog.String("run_id", o.Task.RunID.String()), slog.String("step", o.Task.Step), slog.Any("error", err))
		c.record(ctx, []store.Outcome{{
			Task: o.Task, Kind: store.OutcomeFail, Terminal: true,
			Error: fmt.Sprintf("durable: the store refused this step's outcome: %v", err),
		}}, meta, nil, false)
	}
}

// recorded follows up the results of a batch of outcomes the store took.
func (c *Completer[M]) recorded(ctx context.Context, batch []store.Outcome, meta []M, res []store.FinishResult) {
	if c.cfg.Metrics != nil {
		c.cfg.Metrics(batch, meta, res)
	}
	// The outcomes may have made children ready: look at once rather
	// than wait for the store's notification to come back.
	if c.cfg.Wake != nil {
		c.cfg.Wake()
	}
	for i, r := range res {
		if r.Status == store.FinishStale {
			c.stale(ctx, batch[i])
		}
	}
}

// stale logs an outcome the store rejected because its claim was no
// longer current: expected when the step's run was cancelled or its
// attempt timed out (the store recorded the timeout first), a debug line;
// a warning otherwise (the step was rescued from this engine: it ran
// twice).
func (c *Completer[M]) stale(ctx context.Context, o store.Outcome) {
	level, msg := slog.LevelWarn, "durable: outcome rejected, the claim is no longer current"
	switch {
	case c.cfg.Steps.WasCancelled(o.Task):
		level, msg = slog.LevelDebug, "durable: outcome not recorded, the run was cancelled"
	case c.cfg.Steps.WasTimedOut(o.Task):
		level, msg = slog.LevelDebug, "durable: outcome not recorded, the attempt timed out and was recorded as failed"
	}
	c.cfg.Logger.Log(ctx, level, msg, slog.String("run_id", o.Task.RunID.String()), slog.String("step", o.Task.Step))
}

// finish records batch, trying again with backoff while the store's
// errors are transient and recording has not given up (ctx).
func (c *Completer[M]) finish(ctx context.Context, batch []store.Outcome) ([]store.FinishResult, error) {
	delay := 50 * time.Millisecond
	for {
		var began time.Time
		if c.cfg.CallTook != nil {
			began = time.Now()
		}
		res, err := c.cfg.Store.FinishTasks(ctx, &store.FinishTasksParams{Now: c.cfg.Now(), Outcomes: batch})
		if c.cfg.CallTook != nil {
			c.cfg.CallTook(time.Since(began))
		}
		if err == nil || !errors.Is(err, durabletype.ErrTransient) || ctx.Err() != nil {
			return res, err
		}
		c.cfg.Logger.Warn("durable: recording outcomes failed; trying again", slog.Int("outcomes", len(batch)),
			slog.Duration("in", delay), slog.Any("error", err))
		if !sleep.For(ctx, delay) {
			return nil, err
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// notRecorded gives up on outcomes: their steps stay RUNNING until a
// leader rescues them, and Lost counts them.
func (c *Completer[M]) notRecorded(batch []store.Outcome, err error) {
	c.cfg.Logger.Error("durable: giving up recording outcomes; their steps will be rescued and run again",
		slog.Int("outcomes", len(batch)), slog.Any("error", err))
	c.lostMu.Lock()
	c.lost += len(batch)
	c.lostErr = err
	c.lostMu.Unlock()
}
