package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// minLeaderLease is the shortest Config.LeaderLease.
const minLeaderLease = 100 * time.Millisecond

// payloadLeader is the notification a leader giving up its lease sends
// (releaseLease): candidates campaign at once rather than at their next
// poll.
const payloadLeader = "leader"

// fenceCode is the SQLSTATE of a fenced write refused (the fence function
// of migration 014).
const fenceCode = "DU001"

// electorState maps the terms this store leads to the functions that end
// them, so that a fenced write refused (notLeader) ends its leadership at
// once.
type electorState struct {
	mu   sync.Mutex
	lost map[int64]context.CancelFunc
}

func (e *electorState) add(term int64, cancel context.CancelFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lost == nil {
		e.lost = make(map[int64]context.CancelFunc)
	}
	e.lost[term] = cancel
}

func (e *electorState) remove(term int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.lost, term)
}

// end ends the leadership of term, if this store leads it.
func (e *electorState) end(term int64) {
	e.mu.Lock()
	cancel := e.lost[term]
	e.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Lead implements store.Elector with a lease: the one row of the leader
// table (migration 014) names the worker that leads, its term and when
// its lease expires, on the database's clock. Nothing depends on a session,
// so the election works through a pooler in transaction mode; each
// statement is one round trip on a pooled connection.
//
// A candidate takes the lease when it has expired, or when it names the
// candidate's own ID (a process restarted under the ID of a leader that
// died: it need not wait for the dead one's lease), with the next term
// (acquireLease), and otherwise waits until the lease it read expires (at
// most a lease) before it tries again: while the leader renews, a
// candidate costs a statement every two thirds of a lease or so, and once
// the leader stops renewing, the candidates try as its lease expires. A
// notification that the leader gave its lease up (see below) wakes them at
// once, when the engine listens (Store.Listen); the poll does without.
// Candidate and leader make their statements on a connection of their own
// (the elector's), outside the pool, so that a poll costs no health check
// of a pooled connection; it is opened again after an error.
//
// The leader calls lead with a context carrying its term
// (store.WithTerm): every leader-only write it makes with that context is
// fenced (fence). It renews its lease every third of the lease
// (renewLease, which also refreshes its worker record), and ends lead's
// context when a renewal finds the lease no longer its own, when it could
// not confirm a renewal before the lease would expire counting from when
// it sent its last confirmed renewal on its own monotonic clock (so that
// it stops before the database lets another take over, whatever their
// clocks say), or when one of its fenced writes is refused. Lead then
// waits for lead to return and campaigns again. A leader that froze (a
// SIGSTOP, a GC or swap stall, a paused VM) thus leads at most a lease
// after its last renewal: another takes over once the lease expires, and
// whatever the frozen one writes when it wakes is refused.
//
// When ctx is done (a graceful stop), Lead waits for lead to return, then
// gives the lease up at once (releaseLease, with a notification), and
// returns ctx.Err(). If lead returns by itself, the lease is given up the
// same way and Lead campaigns again.
func (s *Store) Lead(ctx context.Context, id string, lead func(ctx context.Context)) error {
	var b backoff
	ec := &electorConn{s: s, role: "elector:" + id}
	defer ec.close()
	for {
		sent := time.Now()
		actx, cancel := context.WithTimeout(ctx, s.lease)
		term, left, err := s.acquire(actx, ec, id)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			s.log.Warn("pgstore: campaigning for leadership", slog.Any("error", err))
			if !b.wait(ctx) {
				return ctx.Err()
			}
			continue
		}
		b.reset()
		if term > 0 {
			s.leadTerm(ctx, ec, id, term, sent, lead)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		// The lease is held: try again once it expires (a moment after, so
		// that the database finds it expired; at most a lease from now, for
		// a leader whose lease is longer than this store's), or when its
		// leader gives it up.
		wait := min(left+time.Millisecond, s.lease)
		t := time.NewTimer(max(wait, 10*time.Millisecond))
		select {
		case <-t.C:
		case <-s.campaign:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

// rowQuerier is what the elector's statements run on: its connection
// (electorConn), or the pool in tests.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// electorConn is the elector's connection: its own, outside the pool (as
// the listener's), named "elector:<id>" in pg_stat_activity. It holds no
// session state; it is opened when a statement needs it and dropped after
// an error other than an answer of the server.
type electorConn struct {
	s    *Store
	role string
	conn *pgx.Conn
}

var _ rowQuerier = (*electorConn)(nil)

func (c *electorConn) open(ctx context.Context) (*pgx.Conn, error) {
	if c.conn != nil && !c.conn.IsClosed() {
		return c.conn, nil
	}
	c.close()
	conn, err := c.s.connect(ctx, c.role)
	if err != nil {
		return nil, fmt.Errorf("pgstore: elector connect: %w", err)
	}
	c.conn = conn
	return conn, nil
}

// after drops the connection after a statement that failed other than by
// the server's answer.
func (c *electorConn) after(err error) {
	var pgErr *pgconn.PgError
	if err != nil && !errors.As(err, &pgErr) {
		c.close()
	}
}

func (c *electorConn) close() {
	if c.conn != nil {
		closeConn(c.conn)
		c.conn = nil
	}
}

// QueryRow runs a statement returning one row, scanned by the row's Scan.
func (c *electorConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	conn, err := c.open(ctx)
	if err != nil {
		return errRow{err}
	}
	return afterRow{conn.QueryRow(ctx, sql, args...), c}
}

// Exec runs a statement.
func (c *electorConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	conn, err := c.open(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := conn.Exec(ctx, sql, args...)
	c.after(err)
	return tag, err
}

// errRow is a row that failed before its statement was sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// afterRow drops the elector's connection when its row's statement failed.
type afterRow struct {
	pgx.Row
	c *electorConn
}

func (r afterRow) Scan(dest ...any) error {
	err := r.Row.Scan(dest...)
	r.c.after(err)
	return err
}

// acquire takes the lease for id if it has expired, returning its term
// (0 when the lease is held) and how long the lease read had left.
func (s *Store) acquire(ctx context.Context, q rowQuerier, id string) (int64, time.Duration, error) {
	var term pgtype.Int8
	var left int64
	if err := q.QueryRow(ctx, s.q.acquireLease, id, s.lease.Microseconds()).Scan(&term, &left); err != nil {
		return 0, 0, fmt.Errorf("pgstore: acquire the leader's lease: %w", err)
	}
	return term.Int64, time.Duration(left) * time.Microsecond, nil
}

// leadTerm leads with term, acquired with a statement sent at sent, until
// ctx is done, lead returns, or the lease is lost; lead has returned when
// leadTerm does.
func (s *Store) leadTerm(ctx context.Context, ec *electorConn, id string, term int64, sent time.Time, lead func(ctx context.Context)) {
	lctx, cancel := context.WithCancel(store.WithTerm(ctx, term))
	defer cancel()
	s.elected.add(term, cancel)
	defer s.elected.remove(term)
	s.log.Debug("pgstore: leading", slog.String("worker", id), slog.Int64("term", term))
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(lctx)
	}()
	renewEvery := s.lease / 3
	// The lease is ours until deadline, on this process's monotonic
	// clock: the database counts the lease from when it ran the statement,
	// which is after it was sent.
	deadline := sent.Add(s.lease)
	next := sent.Add(renewEvery)
	lost := func(why string, attrs ...any) {
		s.log.Warn("pgstore: leadership lost: "+why, append([]any{slog.String("worker", id), slog.Int64("term", term)}, attrs...)...)
		cancel()
		<-done
		// A renewal whose answer was lost may have extended the lease: give
		// it up, so that nobody waits for it (a no-op when it is gone).
		s.resign(ctx, ec, term)
	}
	for {
		wake := next
		if deadline.Before(wake) {
			wake = deadline
		}
		t := time.NewTimer(max(time.Until(wake), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			cancel()
			<-done
			s.resign(ctx, ec, term)
			return
		case <-done:
			t.Stop()
			s.resign(ctx, ec, term)
			return
		case <-lctx.Done(): // a fenced write was refused
			t.Stop()
			if ctx.Err() == nil {
				lost("a write under its term was refused")
				return
			}
			continue
		case <-t.C:
		}
		if !time.Now().Before(deadline) {
			lost("no renewal confirmed within the lease", slog.Duration("lease", s.lease))
			return
		}
		sentAt := time.Now()
		rctx, rcancel := context.WithDeadline(lctx, deadline)
		renewed, err := s.renew(rctx, ec, term)
		rcancel()
		switch {
		case err == nil && renewed:
			deadline, next = sentAt.Add(s.lease), sentAt.Add(renewEvery)
		case err == nil:
			lost("the lease is no longer its own")
			return
		case lctx.Err() != nil:
			// ctx done or a write refused: the next pass says which
		case time.Now().Before(deadline):
			s.log.Warn("pgstore: renewing the leader's lease; trying again", slog.Int64("term", term), slog.Any("error", err))
			next = time.Now().Add(min(time.Second, renewEvery))
		default:
			lost("no renewal confirmed within the lease", slog.Duration("lease", s.lease), slog.Any("error", err))
			return
		}
	}
}

// renew renews the lease of term, reporting whether it was still term's.
func (s *Store) renew(ctx context.Context, q rowQuerier, term int64) (bool, error) {
	var n int64
	if err := q.QueryRow(ctx, s.q.renewLease, term, s.lease.Microseconds()).Scan(&n); err != nil {
		return false, fmt.Errorf("pgstore: renew the leader's lease: %w", err)
	}
	return n == 1, nil
}

// resign gives the lease of term up, if it is still term's, and tells the
// candidates listening.
func (s *Store) resign(ctx context.Context, q rowQuerier, term int64) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := q.Exec(rctx, s.q.releaseLease, term, s.channel); err != nil {
		s.log.Warn("pgstore: giving the leader's lease up; it expires by itself", slog.Int64("term", term), slog.Any("error", err))
	}
}

// campaignNow wakes this store's candidates (a leader gave its lease up).
func (s *Store) campaignNow() {
	select {
	case s.campaign <- struct{}{}:
	default:
	}
}

// fenced returns ctx's leader term (store.WithTerm), if it carries one:
// the writes of a call made with it must be fenced.
func fenced(ctx context.Context) (int64, bool) { return store.TermOf(ctx) }

// notLeader turns the refusal of a fenced write (SQLSTATE DU001) into
// durabletype.ErrNotLeader, and ends the leadership of ctx's term in this
// store at once; it returns other errors as they are.
func (s *Store) notLeader(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if err == nil || !errors.As(err, &pgErr) || pgErr.Code != fenceCode {
		return err
	}
	if term, ok := fenced(ctx); ok {
		s.elected.end(term)
	}
	return fmt.Errorf("%w: %w", durabletype.ErrNotLeader, err)
}

// fenceBatch puts the fence of ctx's term, if it carries one, at the head
// of b, a batch sent on its own (one implicit transaction): when the fence
// refuses, nothing of b is applied.
func (s *Store) fenceBatch(ctx context.Context, b *pgx.Batch) {
	if term, ok := fenced(ctx); ok {
		b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: s.q.fence, Arguments: []any{term}}}, b.QueuedQueries...)
	}
}

// plans returns the statement that starts a transaction of the store's,
// with its arguments: genericPlans, or fencedPlans (which fences the
// transaction too, in the same statement) when ctx carries a leader's
// term.
func (s *Store) plans(ctx context.Context) (string, []any) {
	if term, ok := fenced(ctx); ok {
		return s.q.fencedPlans, []any{term}
	}
	return s.q.genericPlans, nil
}

// execFenced executes one statement, fenced when ctx carries a term (in
// one round trip with the fence).
func (s *Store) execFenced(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if _, ok := fenced(ctx); !ok {
		return s.pool.Exec(ctx, sql, args...)
	}
	var tag pgconn.CommandTag
	b := &pgx.Batch{}
	b.Queue(sql, args...).Exec(func(ct pgconn.CommandTag) error {
		tag = ct
		return nil
	})
	s.fenceBatch(ctx, b)
	err := s.pool.SendBatch(ctx, b).Close()
	return tag, err
}
