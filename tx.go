package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/store"
)

// TxStep declares a step like Step whose fn also receives tx, the store's
// transaction that records the step's outcome: what fn writes through tx and
// the step's output commit together, or neither does. A step that runs
// twice (its worker died, or was cut off and rescued) keeps the writes of
// the one attempt whose outcome was recorded; the others roll back. An
// error from fn, a panic, or a claim that is no longer current when fn
// returns rolls fn's writes back as well.
//
// T is the store's transaction type. Declare it as pgx.Tx, the type of
// pgstore, which production runs on: fn may Begin savepoints on it, and
// start runs or send events in it with RunNoWaitTx and SendEventTx, but
// Commit and Rollback are the store's and return pgstore.ErrTxOwned; a
// step that ends the transaction in SQL, with COMMIT or ROLLBACK, fails
// without retries with ErrTxEnded. Test the step with the same SQL on
// PostgreSQL: durabletest.RunPostgres runs it, in the transaction that
// records the step, in a schema of the test's own. In memory the
// transaction is a *memstore.Tx, which runs no SQL (its OnCommit effects
// run when the outcome is recorded): a step whose T is not the store's
// type fails without retries with a *TxTypeError, and a store that cannot
// do this fails it with ErrTxUnsupported. (T any, switching on tx's type,
// still runs one definition on both stores, at the cost of a second code
// path.)
//
// The transaction is open while fn runs, holding a connection of the
// store's pool (pgstore.Config.TxSteps bounds how many), and it records
// the outcome once fn returns, with the step's own transition: keep fn to
// the writes that must be exactly once, and do slow work in other steps.
func TxStep[I, O, T any](w *Workflow[I], name string, fn func(ctx Context, tx T, in I) (O, error), opts ...StepOption) *StepRef[O] {
	s := w.defn().add(name, opts, false)
	if fn == nil {
		s.fail(ErrNilFunc, "step function")
	} else {
		s.txRun = func(ctx Context, tx, in any) (any, error) {
			t, ok := tx.(T)
			if !ok {
				return nil, Terminal(&TxTypeError{Step: name, Want: reflect.TypeFor[T](), Got: reflect.TypeOf(tx)})
			}
			return fn(ctx, t, in.(I))
		}
	}
	setDecode[O](s)
	return &StepRef[O]{def: s}
}

// TxTypeError is the error of a TxStep whose transaction type is not the
// store's: the step fails without retries.
type TxTypeError struct {
	// Step is the step's name.
	Step string
	// Want is the step's transaction type, Got the store's.
	Want, Got reflect.Type
}

// Error names both types.
func (e *TxTypeError) Error() string {
	return fmt.Sprintf("durable: TxStep %q takes a transaction of type %v, but the store gives %v", e.Step, e.Want, e.Got)
}

// runTx runs a TxStep in the store's transaction, which records its outcome
// when the step completes. Any other outcome (a failure, a panic) is
// returned for the completer to record, its writes rolled back; so is a
// failure when the transaction's fate is unknown (its commit got no
// answer): recording it tells, the store finding the claim's outcome
// recorded already if the commit went through.
func (e *Engine) runTx(sc *stepContext, s *stepDef, in any, o store.Outcome) store.Outcome {
	ts, ok := e.store.(store.TxFinisher)
	if !ok {
		return failTerminal(o, fmt.Errorf("%w: step %q is a TxStep, and the store (%T) cannot record an outcome in the step's transaction", ErrTxUnsupported, s.name, e.store))
	}
	var out store.Outcome
	fn := func(_ context.Context, tx any) (store.Outcome, bool) {
		out = e.stepOutcome(sc, s, o, func() (any, error) { return s.txRun(sc, tx, in) })
		return out, out.Kind == store.OutcomeComplete
	}
	res, recorded, err := ts.FinishTx(sc, &store.FinishTxParams{Now: e.now()}, fn)
	// A transaction that could not begin (the database is away) is tried
	// again while the step's context lasts: the step has not run.
	for delay := 50 * time.Millisecond; err != nil && out.Kind == 0 && errors.Is(err, durabletype.ErrTransient); delay = min(2*delay, 5*time.Second) {
		e.log.Warn("durable: beginning a TxStep's transaction failed; trying again", "run_id", o.Task.RunID.String(),
			"step", o.Task.Step, "in", delay, "error", err)
		if !sleep.For(sc, delay) {
			break
		}
		res, recorded, err = ts.FinishTx(sc, &store.FinishTxParams{Now: e.now()}, fn)
	}
	switch {
	case errors.Is(err, ErrTxEnded):
		// Its writes may have committed apart from its outcome: a retry
		// could make them twice.
		return e.failed(sc, o, Terminal(fmt.Errorf("durable: TxStep %q: %w", s.name, err)))
	case err != nil:
		if out.Kind != store.OutcomeComplete && out.Kind != 0 {
			return out // rolled back; its failure is recorded as any other
		}
		level := slog.LevelWarn
		if sc.Err() != nil {
			level = slog.LevelDebug // cancelled, timed out, stopping: expected
		}
		e.log.Log(sc, level, "durable: a TxStep's transaction failed; recording the attempt as failed (the store finds it recorded if it committed after all)",
			"run_id", o.Task.RunID.String(), "step", o.Task.Step, "error", err)
		return e.failed(sc, o, fmt.Errorf("durable: the step's transaction did not commit: %w", err))
	case !recorded:
		return out
	}
	*sc.recorded = &res
	return out
}
