// Package duty holds the leader's duties, each a service the leader starts
// when leadership begins and stops when it ends (internal/service/leader):
// firing due timers (Timers), rescuing the steps of dead workers (Rescuer),
// applying the messages left pending (Inbox), deleting what is past its
// retention (Retention) and firing the schedules' due slots (Schedules).
// (The prune of dead workers' records is the registrar's.)
//
// A duty whose leader-only write is refused because another engine leads
// stops (leader.Deposed); the others stop with the leadership's context.
// Every duty is given what it calls on the store, a logger, the store's
// clock (Now: the zero time lets the store use its own), and hooks for the
// metrics (Settled: the runs a call settled).
package duty

import (
	"context"
	"log/slog"
	"time"

	"github.com/effectivelabs/durable/store"
)

// Common is what every duty is given.
type Common struct {
	// Now is the time the store is told (the zero time: its own clock).
	// Defaults to the zero time.
	Now func() time.Time
	// Logger logs failures. Defaults to discarding.
	Logger *slog.Logger
	// Settled, when set, is given the runs a call of the duty settled
	// (each settlement is reported by the one call that recorded it).
	Settled func(ctx context.Context, runs []store.SettledRun)
}

// defaults fills the defaults of c.
func (c *Common) defaults() {
	if c.Now == nil {
		c.Now = func() time.Time { return time.Time{} }
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Settled == nil {
		c.Settled = func(context.Context, []store.SettledRun) {}
	}
}

// wake is a signal channel a duty owns: a wake-up pending at most.
type wake chan struct{}

func newWake() wake { return make(wake, 1) }

// signal wakes the duty; it does not block.
func (w wake) signal() {
	select {
	case w <- struct{}{}:
	default:
	}
}
