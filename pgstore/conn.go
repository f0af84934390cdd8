package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/sleep"
)

// Reconnection backoff of the listener and the elector.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// connect opens a dedicated connection, outside the pool, with the
// settings of Config.Direct, or else the pool's. role names it in
// pg_stat_activity.application_name.
func (s *Store) connect(ctx context.Context, role string) (*pgx.Conn, error) {
	cfg := s.direct.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = make(map[string]string)
	}
	cfg.RuntimeParams["application_name"] = ApplicationName(s.schema, role)
	return pgx.ConnectConfig(ctx, cfg)
}

// ApplicationName is the application_name of the store's dedicated
// connections for a role ("listener" or "elector"), so that operators (and
// tests) can find them in pg_stat_activity.
func ApplicationName(schema, role string) string {
	name := "durable-" + role + ":" + schema
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// closeConn closes a dedicated connection, giving it a moment even when ctx
// is already done.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn.Close(ctx) //nolint:errcheck // the connection is discarded either way
}

// backoff waits before reconnecting; it reports false when ctx is done.
type backoff struct{ d time.Duration }

func (b *backoff) reset() { b.d = 0 }

func (b *backoff) wait(ctx context.Context) bool {
	if b.d == 0 {
		b.d = minBackoff
	} else {
		b.d = min(2*b.d, maxBackoff)
	}
	return sleep.For(ctx, b.d)
}

// transient reports whether err is worth trying again: the connection
// failed or was closed, the server is starting or shutting down, or the
// transaction lost a serialization or deadlock race.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, crash, starting
			pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock
			return true
		case pgErr.Code == "42P01" && partitionName.MatchString(pgErr.Message):
			// A period's partition, dropped since the store read the
			// periods (history.go): it uses the parent tables next.
			return true
		case pgErr.Code == "23514" && freeConstraintName.MatchString(pgErr.ConstraintName):
			// A run id in the range of a period being made, far ahead
			// of the clock: the default partition takes it once the
			// period is made or given up (history.go, freeDefaults).
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// classify marks transient errors with durabletype.ErrTransient, so that the
// engine retries them and treats any other error as final.
func classify(err error) error {
	if err != nil && transient(err) {
		return durabletype.Transient(err)
	}
	return err
}
