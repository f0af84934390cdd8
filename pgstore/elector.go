package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// healthInterval is how often a leader checks its connection with a
// statement (the refresh of its worker record) while it waits for the
// connection to fail. A terminated backend or a closed socket is noticed at
// once; the check catches a silent network loss.
const healthInterval = 5 * time.Second

// keepAlive makes the server probe the election session's client after 10
// s of silence, every 5 s, and end the session after 3 probes unanswered:
// about 25 s after the leader's host vanishes (powered off, cut off from the
// network), the server ends its session, and with it the leadership, so
// another worker leads. On the server's defaults (the kernel's: two hours
// of silence, on Linux) timers, rescues and schedules would stop for that
// long. The leader itself notices the loss sooner (healthInterval and
// pingTimeout, about 8 s) and stops leading first, so two leaders do not
// overlap. The settings apply to TCP connections (a Unix socket needs none).
const keepAlive = `SELECT set_config('tcp_keepalives_idle', '10', false),
       set_config('tcp_keepalives_interval', '5', false),
       set_config('tcp_keepalives_count', '3', false)`

// pingTimeout bounds a leader's health check.
const pingTimeout = 3 * time.Second

// Lead implements store.Elector with a session advisory lock (keyed by the
// schema) held on a dedicated connection outside the pool.
//
// A candidate blocks in pg_advisory_lock, costing no statements while it
// waits, and is granted the lock by PostgreSQL as soon as the leader's
// session ends. Once it holds the lock it records id and its backend's PID
// in the leader table, on the same connection, so that ListWorkers lists
// it as the leader while (and only while) that session holds the lock. The leader blocks reading its connection (and checks it
// every 5s with a statement that refreshes the last_seen of the worker
// record of id: see LeaderRefresh), so when its backend dies or its
// connection drops, lead's context is cancelled at once; Lead waits for
// lead to return, then campaigns again on a new connection. When ctx is
// done the lock is released and Lead returns ctx.Err(). If lead returns by
// itself, leadership is released and Lead campaigns again.
//
// Failover after the leader's backend or process dies takes a few
// milliseconds: 1.4 to 4.8ms from pg_terminate_backend to the next leader's
// lead call on a local server (TestElector logs it). The killed leader and
// the next one may overlap by a moment, since each learns of the change on
// its own connection; a resignation (ctx done) cannot overlap. A
// leader cut off by a silent network failure notices within about 8s, but
// PostgreSQL only releases its lock when it notices the dead client itself
// (tcp_keepalives_*).
func (s *Store) Lead(ctx context.Context, id string, lead func(ctx context.Context)) error {
	var b backoff
	for {
		err := s.leadOnce(ctx, id, lead, &b)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errLeadReturned) {
			continue
		}
		s.log.Warn("pgstore: leader election connection lost; campaigning again", slog.Any("error", err))
		if !b.wait(ctx) {
			return ctx.Err()
		}
	}
}

var errLeadReturned = errors.New("lead returned")

func (s *Store) leadOnce(ctx context.Context, id string, lead func(ctx context.Context), b *backoff) error {
	conn, err := s.connect(ctx, "elector:"+id)
	if err != nil {
		return fmt.Errorf("pgstore: elector connect: %w", err)
	}
	defer closeConn(conn)
	b.reset()
	if _, err := conn.Exec(ctx, keepAlive); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			return fmt.Errorf("pgstore: elector keepalives: %w", err)
		}
		s.log.Warn("pgstore: the leader's session keeps the server's keepalive settings; a leader whose host vanishes keeps the leadership until the server notices", slog.Any("error", err))
	}
	key := lockKey("leader", s.schema)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		if ctx.Err() != nil {
			// Take the server out of its lock wait before hanging up, so no
			// abandoned backend is granted the lock.
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.PgConn().CancelRequest(cctx) //nolint:errcheck // closing the connection follows
			cancel()
		}
		return fmt.Errorf("pgstore: campaign: %w", err)
	}

	// Say who holds the lock, on the connection that holds it: ListWorkers
	// shows this worker as the leader while this session holds the lock,
	// and nobody else.
	if _, err := conn.Exec(ctx, s.q.recordLeader, id); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || conn.IsClosed() {
			return fmt.Errorf("pgstore: recording the leader: %w", err) // the session is gone
		}
		s.log.Warn("pgstore: recording the leader", slog.Any("error", err))
	}

	leadCtx, cancelLead := context.WithCancel(ctx)
	defer cancelLead()
	watchCtx, stopWatch := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer stopWatch()
		lead(leadCtx)
	}()
	touch := s.q.touchWorker
	lost := watch(watchCtx, conn, s.health, func(ctx context.Context) error {
		_, err := conn.Exec(ctx, touch, id)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && !conn.IsClosed() {
			// The server answered, and the session lives on: the
			// connection is fine, whatever the update met.
			s.log.Warn("pgstore: refreshing the leader's worker record", slog.Any("error", err))
			return nil
		}
		return err
	})
	cancelLead()
	<-done
	if lost != nil {
		return lost // the session, and with it the lock, is gone
	}
	uctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
		return fmt.Errorf("pgstore: resign: %w", err) // closing the connection releases it
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errLeadReturned
}

// watch blocks until ctx is done (returning nil) or the connection is lost
// (returning why). It reads the connection, so a terminated backend or a
// closed socket ends the wait at once, and checks it every health interval
// with check: the refresh of the leader's worker record (last_seen), a
// statement that doubles as the ping, so that the registry costs an idle
// leader nothing more.
func watch(ctx context.Context, conn *pgx.Conn, health time.Duration, check func(ctx context.Context) error) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, health)
		_, err := conn.WaitForNotification(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			continue // a notification; nothing listens on this connection
		case timedOut && !conn.IsClosed():
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err = check(pctx)
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return fmt.Errorf("pgstore: leader connection: %w", err)
			}
		default:
			return fmt.Errorf("pgstore: leader connection lost: %w", err)
		}
	}
}
