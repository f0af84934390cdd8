package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

var _ store.TxFinisher = (*Store)(nil)

// ErrTxOwned is returned by Commit and Rollback of the transaction a
// transactional step (durable.TxStep) receives: the store commits it with
// the step's outcome, or rolls it back, once the step returns.
var ErrTxOwned = errors.New("pgstore: the step's transaction is committed or rolled back by the store, with the step's outcome")

// stepTx is the pgx.Tx a transactional step receives: the store's
// transaction, whose Commit and Rollback are the store's to call. Begin
// (a savepoint) and everything else work as on any pgx.Tx.
type stepTx struct{ pgx.Tx }

func (stepTx) Commit(context.Context) error   { return ErrTxOwned }
func (stepTx) Rollback(context.Context) error { return ErrTxOwned }

// FinishTx implements store.TxFinisher: fn gets a pgx.Tx, begun on a
// connection of the pool; the outcome is recorded in it as FinishTasks
// records it, under a savepoint (a transition that loses a race with a
// claim is rolled back to it and tried again, keeping fn's writes), and
// the transaction commits only if the outcome was applied.
//
// At most Config.TxSteps transactions of steps are open at once: each holds
// a connection while its step runs, and the engines' own calls need some.
func (s *Store) FinishTx(ctx context.Context, p *store.FinishTxParams, fn func(ctx context.Context, tx any) (store.Outcome, bool)) (store.FinishResult, bool, error) {
	res, recorded, err := s.finishTx(ctx, p, fn)
	return res, recorded, classify(err)
}

func (s *Store) finishTx(ctx context.Context, p *store.FinishTxParams, fn func(ctx context.Context, tx any) (store.Outcome, bool)) (store.FinishResult, bool, error) {
	select {
	case s.txSlots <- struct{}{}:
		defer func() { <-s.txSlots }()
	case <-ctx.Done():
		return store.FinishResult{}, false, ctx.Err()
	}
	at := time.Now()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: beginStepTx})
	if err != nil {
		return store.FinishResult{}, false, fmt.Errorf("pgstore: begin: %w", err)
	}
	defer func() {
		// A no-op once committed; bounded, as a step's context may be done.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = tx.Rollback(rctx)
		cancel()
	}()
	o, record := fn(ctx, stepTx{tx})
	if err := ended(tx); err != nil {
		return store.FinishResult{}, false, err
	}
	if !record {
		// The deferred rollback undoes the writes, unless the step
		// committed them itself and went on in a new transaction.
		if err := stepTxIntact(ctx, tx); err != nil {
			return store.FinishResult{}, false, err
		}
		return store.FinishResult{}, false, nil
	}
	f, err := newFinish(&store.FinishTasksParams{Now: p.Now, Outcomes: []store.Outcome{o}})
	if err != nil {
		return store.FinishResult{}, false, err
	}
	var pl *plan
	var c *change
	err = retryRaced(func(lockReady bool) error {
		pl = f.plan(lockReady)
		c, err = s.transactIn(ctx, tx, pl)
		return err
	})
	if err != nil {
		return store.FinishResult{}, false, err
	}
	if f.res[0].Status != store.FinishApplied {
		return f.results()[0], true, nil // rolled back: the claim is not current
	}
	if err := tx.Commit(ctx); err != nil {
		return store.FinishResult{}, false, fmt.Errorf("pgstore: commit a step's transaction: %w", err)
	}
	s.committed(ctx, pl, c, at)
	return f.results()[0], true, nil
}

// beginStepTx begins a step's transaction and marks it, in a setting local
// to it, in the same round trip: a step that commits in SQL and goes on in
// a new transaction (COMMIT AND CHAIN) leaves a transaction without the
// mark.
const beginStepTx = `BEGIN; SELECT set_config('durable.step_tx', 'on', true)`

// intactStepTx reads the mark of beginStepTx.
const intactStepTx = `SELECT coalesce(current_setting('durable.step_tx', true), '') = 'on'`

// ended returns durabletype.ErrTxEnded if the step ended its transaction
// (COMMIT, ROLLBACK or PREPARE TRANSACTION in SQL): the connection is no
// longer in one. A transaction a failed statement aborted is still the
// step's (its outcome then fails to record, with the statement's error).
func ended(tx pgx.Tx) error {
	if tx.Conn().PgConn().TxStatus() == 'I' {
		return durabletype.ErrTxEnded
	}
	return nil
}

// queueIntact queues the check that the transaction is still the one the
// store began (durabletype.ErrTxEnded otherwise), before the writes that
// record the outcome.
func queueIntact(b *pgx.Batch) {
	b.Queue(intactStepTx).QueryRow(func(row pgx.Row) error { return scanIntact(row) })
}

// stepTxIntact checks, for a step whose outcome is not recorded in its
// transaction, that the transaction is still the one the store began.
func stepTxIntact(ctx context.Context, tx pgx.Tx) error {
	err := scanIntact(tx.QueryRow(ctx, intactStepTx))
	if err != nil && !errors.Is(err, durabletype.ErrTxEnded) {
		if tx.Conn().PgConn().TxStatus() == 'E' {
			return nil // aborted by the step's failed statement: rolled back, as its failure is recorded
		}
		return fmt.Errorf("pgstore: a step's transaction: %w", err)
	}
	return err
}

// scanIntact reads intactStepTx's answer: durabletype.ErrTxEnded unless the
// mark is there.
func scanIntact(row pgx.Row) error {
	var ok bool
	if err := row.Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return durabletype.ErrTxEnded
	}
	return nil
}

// transactIn runs the transition p in tx, a transaction of the store's
// that it neither commits nor rolls back, under a savepoint: a transition
// that fails leaves tx as it was before.
func (s *Store) transactIn(ctx context.Context, tx pgx.Tx, p *plan) (*change, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: savepoint: %w", err)
	}
	b := &pgx.Batch{}
	// The store's plans for its own statements (session.sql), set only
	// now: the step's statements ran with the session's.
	b.Queue(s.q.genericPlans)
	queueIntact(b)
	var l loader
	l.queue(&s.q, b, p)
	c, err := s.transactOn(ctx, sp, nil, b, &l, p)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = sp.Rollback(rctx)
		cancel()
		return nil, err
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: release savepoint: %w", err)
	}
	return c, nil
}
