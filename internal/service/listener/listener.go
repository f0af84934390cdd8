// Package listener delivers the store's notifications to an engine, on a
// store that sends them (store.Listener), and keeps whether they are heard
// now: from the listener's TopicResync (it connected, or reconnected)
// until its TopicDeaf (it lost its connection) or its end. The loops that
// sleep until a notification (the claim loop, the leader's timers and
// schedules) poll while none is heard. On a store that sends none, the
// listener does nothing and none is ever heard.
package listener

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// Source is what the listener asks of the store (store.Listener).
type Source interface {
	Listen(ctx context.Context, deliver func(store.Notification)) error
}

// Config is what a listener is given.
type Config struct {
	// Source sends the notifications; nil: the listener does nothing.
	Source Source
	// Deliver routes a notification to the engine's services, after the
	// listener noted whether notifications are heard; it must not block.
	Deliver func(store.Notification)
	// Heard is set while notifications are heard; the listener keeps it.
	// Required.
	Heard *atomic.Bool
	// Logger logs a listener that stopped on an error. Defaults to
	// discarding.
	Logger *slog.Logger
}

// Listener is the listener service.
type Listener struct {
	startstop.Base
	cfg Config
}

// New returns a listener, not started.
func New(cfg Config) *Listener {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Deliver == nil {
		cfg.Deliver = func(store.Notification) {}
	}
	return &Listener{cfg: cfg}
}

// Start starts listening, on a store that sends notifications.
func (l *Listener) Start(ctx context.Context) error {
	if l.cfg.Source == nil {
		return nil
	}
	l.Go(ctx, func(ctx context.Context) {
		if err := l.cfg.Source.Listen(ctx, l.Deliver); err != nil && ctx.Err() == nil {
			l.cfg.Logger.Error("durable: listener stopped", slog.Any("error", err))
		}
		l.cfg.Heard.Store(false)
	})
	return nil
}

// Deliver notes whether notifications are heard (TopicResync: they flow;
// TopicDeaf: none comes until the next TopicResync), then delivers n. It
// does not block.
func (l *Listener) Deliver(n store.Notification) {
	switch n.Topic {
	case store.TopicResync:
		l.cfg.Heard.Store(true)
	case store.TopicDeaf:
		l.cfg.Heard.Store(false)
	}
	l.cfg.Deliver(n)
}
