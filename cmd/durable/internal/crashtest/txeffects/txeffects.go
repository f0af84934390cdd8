// Package txeffects is the workflow of the transactional-step crash proof
// (cmd/durable/internal/crashtest, TestTxStepExactlyOnce): tx-effects, a
// root step, then K transactional steps (durable.TxStep) and K plain steps
// (durable.Step) side by side, each inserting one row for its run, then a
// join step.
//
// A transactional step inserts its row into tx_effects through the step's
// transaction, so the row commits with the step's recorded outcome or not
// at all; after the insert it notes, through the pool and outside the
// transaction, that this attempt wrote its row (tx_writes), so the proof
// can count the writes that were rolled back. A plain step inserts its row
// into plain_effects through the pool, as a step does without TxStep: the
// proof's control, whose duplicates show what the transaction prevents.
// Every step waits a few random milliseconds before its insert and after
// it, so that kills land between a write and its step's recorded outcome.
package txeffects

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/core/sleep"
)

// Name is the workflow's name; K is how many transactional steps (and
// plain steps) each run has.
const (
	Name = "tx-effects"
	K    = 4
)

// Input is the workflow's input.
type Input struct {
	N int `json:"n"`
}

// TxStep names the i-th transactional step, from 1.
func TxStep(i int) string { return fmt.Sprintf("tx-%d", i) }

// PlainStep names the i-th plain step, from 1.
func PlainStep(i int) string { return fmt.Sprintf("plain-%d", i) }

// Tables returns the statements that create the proof's tables in schema:
// tx_effects and plain_effects (one row per step execution that kept its
// write; deliberately without a unique key, so that duplicates show) and
// tx_writes (each attempt of a transactional step that made its write).
func Tables(schema string) []string {
	var stmts []string
	for _, name := range []string{"tx_effects", "plain_effects", "tx_writes"} {
		stmts = append(stmts, `CREATE TABLE IF NOT EXISTS `+pgx.Identifier{schema, name}.Sanitize()+
			` (run_id uuid NOT NULL, step text NOT NULL, attempt int NOT NULL, worker text NOT NULL,
  at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	}
	return stmts
}

// New returns the workflow. Its steps write to the tables of schema
// through pool; a client that only starts runs may pass a nil pool.
func New(pool *pgxpool.Pool, schema string) *durable.Workflow[Input] {
	table := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	insert := func(name string) string {
		return `INSERT INTO ` + table(name) + ` (run_id, step, attempt, worker) VALUES ($1, $2, $3, $4)`
	}
	insertTx, insertWrite, insertPlain := insert("tx_effects"), insert("tx_writes"), insert("plain_effects")
	// A rescue counts as a failed attempt: retries keep a step that is
	// killed again and again from failing its run.
	retry := durable.WithRetry(durable.RetryPolicy{MaxRetries: 30, InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second})

	wf := durable.NewWorkflow[Input](Name)
	root := durable.Step(wf, "root", func(ctx durable.Context, in Input) (int, error) { return in.N, nil }, retry)
	var all []durable.Parent
	for i := 1; i <= K; i++ {
		all = append(all, durable.TxStep(wf, TxStep(i), func(ctx durable.Context, tx pgx.Tx, in Input) (int, error) {
			if err := nap(ctx); err != nil {
				return 0, err
			}
			args := []any{ctx.RunID(), ctx.StepName(), ctx.Attempt(), ctx.WorkerID()}
			if _, err := tx.Exec(ctx, insertTx, args...); err != nil {
				return 0, err
			}
			if _, err := pool.Exec(ctx, insertWrite, args...); err != nil {
				return 0, err
			}
			return in.N, nap(ctx)
		}, durable.After(root), retry))
		all = append(all, durable.Step(wf, PlainStep(i), func(ctx durable.Context, in Input) (int, error) {
			if err := nap(ctx); err != nil {
				return 0, err
			}
			if _, err := pool.Exec(ctx, insertPlain, ctx.RunID(), ctx.StepName(), ctx.Attempt(), ctx.WorkerID()); err != nil {
				return 0, err
			}
			return in.N, nap(ctx)
		}, durable.After(root), retry))
	}
	durable.Step(wf, "join", func(ctx durable.Context, in Input) (int, error) { return in.N, nil }, durable.After(all...), retry)
	return wf
}

// nap waits 0 to 15ms.
func nap(ctx context.Context) error {
	if !sleep.For(ctx, time.Duration(rand.IntN(15_000))*time.Microsecond) {
		return ctx.Err()
	}
	return nil
}
