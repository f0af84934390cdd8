package durable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// ledger is what TxSteps write in the tests: rows of a table on PostgreSQL
// (through the step's pgx.Tx), effects of the step's *memstore.Tx in
// memory. count tells how many writes of a key were kept.
type ledger struct {
	h     *harness
	table string
	mu    sync.Mutex
	kept  map[string]int
}

func newLedger(h *harness) *ledger {
	l := &ledger{h: h, kept: map[string]int{}}
	if h.pg != nil {
		l.table = pgx.Identifier{h.pg.schema, "ledger"}.Sanitize()
		_, err := h.pg.pool.Exec(context.Background(), "CREATE TABLE "+l.table+" (key text NOT NULL)")
		require.NoError(h.t, err)
	}
	return l
}

func (l *ledger) write(ctx context.Context, tx any, key string) error {
	switch tx := tx.(type) {
	case pgx.Tx:
		_, err := tx.Exec(ctx, "INSERT INTO "+l.table+" (key) VALUES ($1)", key)
		return err
	case *memstore.Tx:
		tx.OnCommit(func() {
			l.mu.Lock()
			l.kept[key]++
			l.mu.Unlock()
		})
		return nil
	}
	return errors.New("ledger: unknown transaction type")
}

func (l *ledger) count(key string) int {
	l.h.t.Helper()
	if l.h.pg == nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.kept[key]
	}
	var n int
	require.NoError(l.h.t, l.h.pg.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+l.table+" WHERE key = $1", key).Scan(&n))
	return n
}

// TestTxStep: a TxStep's writes commit with its output, which its children
// read as any step's.
func TestTxStep(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		l := newLedger(h)
		wf := durable.NewWorkflow[int]("tx-order")
		charge := durable.TxStep(wf, "charge", func(ctx durable.Context, tx any, in int) (int, error) {
			return in * 10, l.write(ctx, tx, ctx.RunID().String())
		})
		durable.Step(wf, "receipt", func(ctx durable.Context, in int) (string, error) {
			v, _ := charge.Output(ctx)
			return "charged " + strings.Repeat("$", v/10), nil
		}, durable.After(charge))
		e := h.start(durable.Config{}, wf)
		res, err := wf.Run(h.ctx(time.Minute), e, "t", 3)
		require.NoError(t, err)
		require.Equal(t, 1, l.count(res.ID.String()))
		v, err := charge.Result(res)
		require.NoError(t, err)
		require.Equal(t, 30, v)
	})
}

// TestTxStepFailuresRollBack: the writes of attempts that fail, by an error
// or a panic, roll back; the successful attempt's are kept, once.
func TestTxStepFailuresRollBack(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		l := newLedger(h)
		var attempts atomic.Int32
		wf := durable.NewWorkflow[int]("tx-flaky")
		durable.TxStep(wf, "write", func(ctx durable.Context, tx any, in int) (int, error) {
			if err := l.write(ctx, tx, ctx.RunID().String()); err != nil {
				return 0, err
			}
			switch attempts.Add(1) {
			case 1:
				return 0, errors.New("flaky")
			case 2:
				panic("flakier")
			}
			return in, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: time.Millisecond}))
		e := h.start(durable.Config{}, wf)
		res, err := wf.Run(h.ctx(time.Minute), e, "t", 1)
		require.NoError(t, err)
		require.EqualValues(t, 3, attempts.Load())
		require.Equal(t, 1, l.count(res.ID.String()), "only the attempt that completed keeps its write")
	})
}

// TestTxStepCancelledRollsBack: a run cancelled while its TxStep runs keeps
// none of the step's writes, even if the step goes on and returns.
func TestTxStepCancelledRollsBack(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		l := newLedger(h)
		started := make(chan uuid.UUID, 1)
		wf := durable.NewWorkflow[int]("tx-cancel")
		durable.TxStep(wf, "write", func(ctx durable.Context, tx any, in int) (int, error) {
			if err := l.write(ctx, tx, ctx.RunID().String()); err != nil {
				return 0, err
			}
			started <- ctx.RunID()
			<-ctx.Done()
			return in, nil // a late success: not recorded
		})
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		require.Equal(t, id, <-started)
		require.NoError(t, h.client().Cancel(ctx, id, "stop"))
		res, err := e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durable.RunCancelled, res.Status)
		require.NoError(t, e.Stop(ctx)) // the step has returned
		require.Zero(t, l.count(id.String()))
	})
}

// TestTxStepWrongType: a TxStep whose transaction type is not the store's
// fails at once, naming both types.
func TestTxStepWrongType(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		var ran atomic.Bool
		wf := durable.NewWorkflow[int]("tx-type")
		durable.TxStep(wf, "write", func(ctx durable.Context, tx *strings.Builder, in int) (int, error) {
			ran.Store(true)
			return in, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: time.Millisecond}))
		e := h.start(durable.Config{}, wf)
		res, err := wf.Run(h.ctx(time.Minute), e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.Contains(t, err.Error(), `TxStep "write" takes a transaction of type *strings.Builder, but the store gives`)
		require.False(t, ran.Load())
		st, ok := res.Step("write")
		require.True(t, ok)
		require.Equal(t, 1, st.Attempts, "not retried")
	})
}

// TestTxStepOwnsItsTransaction (PostgreSQL): the step cannot commit or roll
// back the store's transaction, and a run it starts in it (RunNoWaitTx)
// exists only if the step's outcome was recorded.
func TestTxStepOwnsItsTransaction(t *testing.T) {
	env := pgSetup(t)
	child := durable.NewWorkflow[int]("tx-child")
	durable.Step(child, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
	var attempts atomic.Int32
	var e *durable.Engine
	wf := durable.NewWorkflow[int]("tx-parent")
	start := durable.TxStep(wf, "start", func(ctx durable.Context, tx pgx.Tx, in int) (string, error) {
		if err := tx.Commit(ctx); !errors.Is(err, pgstore.ErrTxOwned) {
			return "", durable.Terminal(errors.New("Commit did not return ErrTxOwned"))
		}
		if err := tx.Rollback(ctx); !errors.Is(err, pgstore.ErrTxOwned) {
			return "", durable.Terminal(errors.New("Rollback did not return ErrTxOwned"))
		}
		id, err := child.RunNoWaitTx(ctx, e, tx, "t", in)
		if err != nil {
			return "", err
		}
		if attempts.Add(1) == 1 {
			return "", errors.New("fail after starting the child")
		}
		return id.String(), nil
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Millisecond}))
	e = pgStart(t, env.store, durable.Config{}, wf, child)
	ctx := pgCtx(t, time.Minute)
	res, err := wf.Run(ctx, e, "t", 7)
	require.NoError(t, err)
	var n int
	require.NoError(t, env.pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{env.schema, "runs"}.Sanitize()+" WHERE workflow = 'tx-child'").Scan(&n))
	require.Equal(t, 1, n, "the first attempt's child rolled back with it")
	id, err := start.Result(res)
	require.NoError(t, err)
	cres, err := e.Wait(ctx, uuid.MustParse(id))
	require.NoError(t, err)
	require.Equal(t, durable.RunCompleted, cres.Status)
}

// TestTxStepUnsupported: on a store that cannot record an outcome in a
// step's transaction, a TxStep fails at once with ErrTxUnsupported.
func TestTxStepUnsupported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &harness{t: t, store: struct{ store.Store }{memstore.New()}, virtual: true}
		wf := durable.NewWorkflow[int]("tx-unsupported")
		durable.TxStep(wf, "write", func(ctx durable.Context, tx any, in int) (int, error) { return in, nil },
			durable.WithRetry(durable.RetryPolicy{MaxRetries: 3}))
		e := h.start(durable.Config{}, wf)
		res, err := wf.Run(h.ctx(time.Minute), e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.Contains(t, err.Error(), durable.ErrTxUnsupported.Error())
		st, _ := res.Step("write")
		require.Equal(t, 1, st.Attempts, "not retried")
	})
}

// TestTxStepAbortedTransaction (PostgreSQL): a step that ignores a failed
// statement and returns success left its transaction aborted: nothing is
// kept, the attempt fails with the reason, and the next attempt's writes
// are kept.
func TestTxStepAbortedTransaction(t *testing.T) {
	env := pgSetup(t)
	l := newLedger(&harness{t: t, pg: env})
	var attempts atomic.Int32
	wf := durable.NewWorkflow[int]("tx-aborted")
	durable.TxStep(wf, "write", func(ctx durable.Context, tx pgx.Tx, in int) (int, error) {
		if err := l.write(ctx, tx, ctx.RunID().String()); err != nil {
			return 0, err
		}
		if attempts.Add(1) == 1 {
			_, _ = tx.Exec(ctx, "SELECT 1/0") // the error ignored
		}
		return in, nil
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Millisecond}))
	e := pgStart(t, env.store, durable.Config{}, wf)
	ctx := pgCtx(t, time.Minute)
	res, err := wf.Run(ctx, e, "t", 1)
	require.NoError(t, err)
	require.Equal(t, 1, l.count(res.ID.String()))
	failure := eventOf(t, e, res.ID, "write", durabletype.EventRetrying).Detail
	require.Contains(t, failure, "the step's transaction did not commit")
	require.Contains(t, failure, "current transaction is aborted")
}

// TestTxStepEndsItsTransaction (PostgreSQL): a step that ends the store's
// transaction itself in SQL, rather than returning, fails without retries
// with ErrTxEnded, whatever it returns: after COMMIT its write stands once
// (a retry would write it again), after ROLLBACK not at all, and after
// COMMIT AND CHAIN the outcome is not recorded in the new transaction as if
// nothing had happened.
func TestTxStepEndsItsTransaction(t *testing.T) {
	env := pgSetup(t)
	l := newLedger(&harness{t: t, pg: env})
	cases := []struct {
		sql     string
		fail    bool // the step returns an error after it
		written int
	}{
		{"COMMIT", false, 1},
		{"END", true, 1},
		{"ROLLBACK", false, 0},
		{"COMMIT AND CHAIN", false, 1},
		{"COMMIT AND CHAIN", true, 1},
		{"ROLLBACK AND CHAIN", false, 0},
	}
	var wfs []durable.Definition
	var runs []func(ctx context.Context, e *durable.Engine) (*durable.RunResult, error)
	for i, c := range cases {
		wf := durable.NewWorkflow[int](fmt.Sprintf("tx-ends-%d", i))
		durable.TxStep(wf, "write", func(ctx durable.Context, tx pgx.Tx, in int) (int, error) {
			if err := l.write(ctx, tx, ctx.RunID().String()); err != nil {
				return 0, err
			}
			if _, err := tx.Exec(ctx, c.sql); err != nil {
				return 0, err
			}
			if c.fail {
				return 0, errors.New("failed after " + c.sql)
			}
			return in, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: time.Millisecond}))
		wfs = append(wfs, wf)
		runs = append(runs, func(ctx context.Context, e *durable.Engine) (*durable.RunResult, error) {
			return wf.Run(ctx, e, "t", i)
		})
	}
	e := pgStart(t, env.store, durable.Config{}, wfs...)
	ctx := pgCtx(t, time.Minute)
	for i, c := range cases {
		name := fmt.Sprintf("%s (returning an error: %v)", c.sql, c.fail)
		res, err := runs[i](ctx, e)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), durable.ErrTxEnded.Error(), name) // the run's error is the recorded text
		require.Equal(t, durabletype.RunFailed, res.Status, name)
		st := stepState(t, e, res.ID, "write")
		require.Equal(t, durabletype.TaskFailed, st, name)
		require.Equal(t, c.written, l.count(res.ID.String()), name)
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "FAILED/1"}, stepEvents(t, e, res.ID, "write"), "%s: not retried", name)
	}
}
