package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The queue tables (ready, incoming, inbox, concurrency_waiting) hold work
// waiting to be taken: each row is inserted, then deleted once taken, and
// each delete leaves a dead row behind. Only VACUUM makes room of dead rows
// for new ones, so on a server whose autovacuum is off, or falls behind
// (the complaint peers' users report most), these tables grow without end
// and every claim walks past more dead rows. The leader recycles them
// whole instead: when its periodic check (leaderCheck) finds a queue table
// whose file has grown to recycleMinBytes, with at most recycleMaxLive
// live rows and at least as many dead ones, it takes the table's exclusive lock, reads the live rows, truncates
// the table (a new, empty file: the dead rows go with the old one, and
// nothing is left to vacuum) and writes the rows back, in one transaction.
//
// The lock stops every claim and enqueue for as long as the transaction
// holds it: the time to read and write back at most recycleReadLimit small
// rows (a few milliseconds for the usual few hundred, about 100 ms for
// recycleMaxLive: a backlog of a few seconds, such as a pause of the
// workers leaves, must not keep the table from being recycled, or claims
// slow down on its dead rows, the backlog stays, and the table grows for
// good: the soak of 2026-11-29 (2) saw that with a limit of 5,000), and at most
// recycleLockTimeout waiting for the transactions that use the table to
// end (a longer wait gives up, to try again at the next pass, since every
// transaction that asks for the table meanwhile queues behind the lock).
const (
	recycleMinBytes    = 1 << 20
	recycleMaxLive     = 50_000
	recycleReadLimit   = 4 * recycleMaxLive
	recycleLockTimeout = 100 * time.Millisecond
)

// queueTables are the tables the leader recycles, as leaderCheck names
// them.
var queueTables = []string{"ready", "incoming", "inbox", "concurrency_waiting"}

// recycleQueues recycles the queue tables named by the leader's check,
// and returns how many it recycled. A table it could not lock in time, or
// that holds too many live rows by then, is left for the next pass.
func (s *Store) recycleQueues(ctx context.Context, tables []string) (int, error) {
	n := 0
	for _, t := range tables {
		if !slices.Contains(queueTables, t) {
			return n, fmt.Errorf("pgstore: recycle: %q is not a queue table", t)
		}
		done, err := s.recycle(ctx, t)
		if err != nil {
			return n, err
		}
		if done {
			n++
		}
	}
	return n, nil
}

// recycle recycles one queue table: it reports false, and no error, when
// the table's lock was not granted within recycleLockTimeout or the table
// holds more than recycleReadLimit rows.
func (s *Store) recycle(ctx context.Context, table string) (bool, error) {
	sql := func(fragment string) string {
		return render(s.schema, strings.ReplaceAll(fragment, "{{table}}", pgx.Identifier{table}.Sanitize()))
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("pgstore: recycle %s: %w", table, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after a commit, a no-op
	plans, args := s.plans(ctx)
	if _, err := tx.Exec(ctx, plans, args...); err != nil {
		return false, fmt.Errorf("pgstore: recycle %s: %w", table, err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", recycleLockTimeout.Milliseconds())); err != nil {
		return false, fmt.Errorf("pgstore: recycle %s: %w", table, err)
	}
	if _, err := tx.Exec(ctx, sql(sqlFragment("recycleLock"))); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
			s.log.Debug("pgstore: a queue table stays for the next pass: its lock was not granted in time", "table", table)
			return false, nil
		}
		return false, fmt.Errorf("pgstore: recycle %s: %w", table, err)
	}
	rows, err := tx.Query(ctx, sql(sqlFragment("recycleRead")))
	if err != nil {
		return false, fmt.Errorf("pgstore: recycle %s: %w", table, err)
	}
	var cols []string
	for _, f := range rows.FieldDescriptions() {
		cols = append(cols, f.Name)
	}
	var live [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			rows.Close()
			return false, fmt.Errorf("pgstore: recycle %s: %w", table, err)
		}
		live = append(live, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("pgstore: recycle %s: %w", table, err)
	}
	if len(live) >= recycleReadLimit {
		return false, nil
	}
	if _, err := tx.Exec(ctx, sql(sqlFragment("recycleTruncate"))); err != nil {
		return false, fmt.Errorf("pgstore: recycle %s: %w", table, err)
	}
	if len(live) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{s.schema, table}, cols, pgx.CopyFromRows(live)); err != nil {
			return false, fmt.Errorf("pgstore: recycle %s: write back %d rows: %w", table, len(live), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("pgstore: recycle %s: %w", table, err)
	}
	s.log.Debug("pgstore: recycled a queue table", "table", table, "rows", len(live))
	return true, nil
}
