package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable/store"
)

// Listen implements store.Listener. It holds one dedicated connection (not
// from the pool) that LISTENs on the schema's channel. When the connection is
// lost it reconnects with backoff (100ms doubling to 5s); after every
// (re)connection, the first included, it delivers TopicResync, since
// notifications sent meanwhile are lost. It returns ctx.Err() once ctx is
// done.
func (s *Store) Listen(ctx context.Context, deliver func(store.Notification)) error {
	var b backoff
	for {
		err := s.listenOnce(ctx, deliver, &b)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("pgstore: listener connection lost; reconnecting (polling meanwhile)", slog.Any("error", err))
		if !b.wait(ctx) {
			return ctx.Err()
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, deliver func(store.Notification), b *backoff) error {
	conn, err := s.connect(ctx, "listener")
	if err != nil {
		return fmt.Errorf("pgstore: listener connect: %w", err)
	}
	defer closeConn(conn)
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return fmt.Errorf("pgstore: listen: %w", err)
	}
	b.reset()
	s.incoming.Store(true) // runs may have been created while not listening
	deliver(store.Notification{Topic: store.TopicResync})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("pgstore: wait for notification: %w", err)
		}
		if n.Payload == payloadIncoming {
			s.incoming.Store(true)
		}
		if n.Payload == payloadLeader {
			s.campaignNow() // a leader gave its lease up (elector.go)
		}
		deliver(parseNotification(n.Payload))
	}
}

// parseNotification maps a payload sent by the store ("ready", "timer",
// "run:<id>", "cancel:<id>") to a Notification.
func parseNotification(payload string) store.Notification {
	for _, topic := range []store.Topic{store.TopicRun, store.TopicCancel} {
		if id, ok := strings.CutPrefix(payload, string(topic)+":"); ok {
			return store.Notification{Topic: topic, Payload: id}
		}
	}
	if payload == payloadIncoming {
		return store.Notification{Topic: store.TopicReady}
	}
	return store.Notification{Topic: store.Topic(payload)}
}
