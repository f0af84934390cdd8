// Package startstop gives the engine's background services their start and
// stop mechanics once, after the package of the same name in River: a
// service embeds Base, starts its goroutine with Go (or StartInit and Run),
// and has Stop, Started and Stopped from it.
//
// A service's goroutine runs with a context of its own, derived from the
// one given to Start: it ends when Stop is called or when Start's context is
// done, and the goroutine must return then. Starting a service that runs
// does nothing; stopping one that does not (never started, stopped already,
// or returned of its own accord) does nothing either. Stop waits for the
// goroutine to return. A service that stopped can be started again.
package startstop

import (
	"context"
	"slices"
	"sync"
)

// Service is something that runs in the background between Start and Stop.
type Service interface {
	// Start starts the service and returns at once; it runs until Stop
	// or until ctx is done. Starting a service that runs does nothing.
	Start(ctx context.Context) error
	// Stop stops the service and waits for it to return. Stopping a
	// service that does not run does nothing.
	Stop()
}

// Base is the start and stop mechanics of a service. The zero value is a
// service that does not run. A Base must not be copied after first use.
type Base struct {
	mu sync.Mutex
	// running is set from StartInit until the goroutine returns.
	running bool
	cancel  context.CancelFunc
	// started and stopped are the channels of the current run, or of the
	// last one, or, when used is not set, of the next.
	started, stopped chan struct{}
	used             bool
}

// chans makes the channels of the next run if they are not made yet; b.mu
// must be held.
func (b *Base) chans() {
	if b.started == nil || b.used {
		b.started, b.stopped, b.used = make(chan struct{}), make(chan struct{}), false
	}
}

// StartInit begins a start. It returns false if the service runs already:
// the start does nothing. Otherwise it returns the context the service is
// to run with (ctx's values and deadline, cancelled by Stop and when ctx is
// done), and the caller must call Run exactly once, after any work of its
// own the start needs.
func (b *Base) StartInit(ctx context.Context) (context.Context, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running {
		return ctx, false
	}
	b.chans()
	b.used = true
	b.running = true
	ctx, b.cancel = context.WithCancel(ctx)
	return ctx, true
}

// Run runs fn in the service's goroutine, which closes Started as it
// begins and Stopped once fn has returned. It follows a StartInit that
// returned true.
func (b *Base) Run(fn func()) {
	b.mu.Lock()
	started, stopped := b.started, b.stopped
	b.mu.Unlock()
	go func() {
		defer func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.running = false
			b.cancel()
			close(stopped)
		}()
		close(started)
		fn()
	}()
}

// Go starts the service's goroutine running run with the service's
// context (StartInit), unless the service runs already. It reports
// whether it started it.
func (b *Base) Go(ctx context.Context, run func(ctx context.Context)) bool {
	ctx, ok := b.StartInit(ctx)
	if ok {
		b.Run(func() { run(ctx) })
	}
	return ok
}

// Stop cancels the service's context and waits for its goroutine to
// return. It does nothing if the service does not run.
func (b *Base) Stop() {
	if stopped := b.Cancel(); stopped != nil {
		<-stopped
	}
}

// Cancel cancels the service's context without waiting, and returns the
// channel closed when its goroutine has returned (nil if the service does
// not run).
func (b *Base) Cancel() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running {
		return nil
	}
	b.cancel()
	return b.stopped
}

// Wait waits for the service's goroutine to return of its own accord (a
// service that finishes when told to by other means than its context,
// such as its input closing), until ctx is done; then it cancels the
// service's context and waits for the goroutine as Stop does. It returns
// at once if the service does not run.
func (b *Base) Wait(ctx context.Context) {
	b.mu.Lock()
	if !b.running {
		b.mu.Unlock()
		return
	}
	stopped, cancel := b.stopped, b.cancel
	b.mu.Unlock()
	select {
	case <-stopped:
	case <-ctx.Done():
		cancel() // this run's: a no-op once it has returned
		<-stopped
	}
}

// Started returns a channel closed when the service's goroutine has begun:
// that of the current or last run, or, before the first start, of the
// first.
func (b *Base) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started == nil {
		b.chans()
	}
	return b.started
}

// Stopped returns a channel closed when the service's goroutine has
// returned: that of the current or last run, or, before the first start,
// of the first.
func (b *Base) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started == nil {
		b.chans()
	}
	return b.stopped
}

// Func is a service whose goroutine runs a function, which must return once
// its context is done.
type Func struct {
	Base
	run func(ctx context.Context)
}

// NewFunc returns a service that runs run.
func NewFunc(run func(ctx context.Context)) *Func {
	return &Func{run: run}
}

// Start starts run in the service's goroutine (Base.Go). It never fails.
func (f *Func) Start(ctx context.Context) error {
	f.Go(ctx, f.run)
	return nil
}

// StartAll starts services in order. If one fails to start, StartAll
// stops those it started, in reverse order, and returns its error.
func StartAll(ctx context.Context, services ...Service) error {
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			for _, started := range slices.Backward(services[:i]) {
				started.Stop()
			}
			return err
		}
	}
	return nil
}

// StopAll stops services at once, each Stop in a goroutine of its own, and
// returns when all have stopped.
func StopAll(services ...Service) {
	var wg sync.WaitGroup
	for _, s := range services {
		wg.Go(s.Stop)
	}
	wg.Wait()
}
