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
// from the pool; Config.Direct when set) that LISTENs on the schema's
// channel. When the connection is lost it delivers TopicDeaf and reconnects
// with backoff (100ms doubling to 5s); after every (re)connection, the
// first included, it delivers TopicResync, since notifications sent
// meanwhile are lost. It returns ctx.Err() once ctx is done.
//
// Behind a transaction pooler without Config.Direct it does not listen: a
// LISTEN there holds for one transaction of a pooled server session, and
// the notifications would be lost without a word. It waits for ctx
// delivering nothing, so that engines poll.
func (s *Store) Listen(ctx context.Context, deliver func(store.Notification)) error {
	if s.deaf {
		s.log.Info("pgstore: not listening behind a transaction pooler without Config.Direct; engines poll")
		<-ctx.Done()
		return ctx.Err()
	}
	var b backoff
	for {
		heard := false
		err := s.listenOnce(ctx, deliver, &b, &heard)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if heard { // once per loss, not per attempt to reconnect
			deliver(store.Notification{Topic: store.TopicDeaf})
		}
		s.log.Warn("pgstore: listener connection lost; reconnecting (polling meanwhile)", slog.Any("error", err))
		if !b.wait(ctx) {
			return ctx.Err()
		}
	}
}

// listenOnce listens on one connection until it fails; heard is set once
// it delivered TopicResync.
func (s *Store) listenOnce(ctx context.Context, deliver func(store.Notification), b *backoff, heard *bool) error {
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
	*heard = true
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
