package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ownTx is a transaction of the store's own on a pooled connection. Unlike a
// pgx.Tx it commits in the same round trip as its last batch of writes: each
// round trip costs a wake-up on both sides, which on a quiet machine is much
// of a transition's latency.
//
// It begins with the first batch sent through it (see begin). Whatever
// happens, close must be called: it rolls back a transaction that did not
// commit and returns the connection to the pool (which discards a connection
// still inside a transaction, should the rollback fail too).
type ownTx struct {
	s         *Store
	conn      *pgxpool.Conn
	committed bool
}

var _ querier = (*ownTx)(nil)

// errCommitRolledBack: PostgreSQL answered COMMIT with ROLLBACK, because the
// transaction had failed.
var errCommitRolledBack = errors.New("pgstore: commit rolled back")

// beginOwn acquires a connection and puts the transaction's beginning at the
// head of b: BEGIN, the planner settings, and the fence of a leader's term
// when ctx carries one (fenced), so that a leader-only write commits only
// while its term is the current lease's.
func (s *Store) beginOwn(ctx context.Context, b *pgx.Batch) (*ownTx, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	plans, args := s.plans(ctx)
	b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: "BEGIN"}, {SQL: plans, Arguments: args}}, b.QueuedQueries...)
	return &ownTx{s: s, conn: conn}, nil
}

// queueCommit appends the commit to b, the transaction's last batch.
func (t *ownTx) queueCommit(b *pgx.Batch) {
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		if ct.String() != "COMMIT" {
			return errCommitRolledBack
		}
		t.committed = true
		return nil
	})
}

func (t *ownTx) close(ctx context.Context) {
	if !t.committed && t.conn.Conn().PgConn().TxStatus() != 'I' {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = t.conn.Exec(rctx, "ROLLBACK")
		cancel()
	}
	t.conn.Release()
}

func (t *ownTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t *ownTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *ownTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t *ownTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.s.sendBatch(ctx, t.conn, b)
}

// send sends a batch and, when commit is set, commits in the same round trip.
func (t *ownTx) send(ctx context.Context, b *pgx.Batch, commit bool) error {
	if commit {
		t.queueCommit(b)
	}
	if err := t.s.sendBatch(ctx, t.conn, b).Close(); err != nil {
		return err
	}
	if commit && !t.committed {
		return fmt.Errorf("pgstore: commit: %w", errCommitRolledBack)
	}
	return nil
}
