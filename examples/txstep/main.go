// Transactional steps: a TxStep's function gets the pgx.Tx that records its
// outcome, so that what it writes in your tables and its recorded output
// commit together or not at all. An attempt that fails after writing
// leaves nothing behind, and a step run again (its worker died) writes
// once. RunNoWaitTx does the same for a trigger: save an order and start
// its workflow in one transaction of yours.
//
// It needs PostgreSQL (run it with a database URL; the in-memory store
// gives a *memstore.Tx instead, see ExampleTxStep):
//
//	DURABLE_DATABASE_URL=postgres://user@127.0.0.1:5432/db go run ./examples/txstep
//
// It works in the schema durable_examples (or DURABLE_SCHEMA), where its
// migration of its own creates the tables orders and payments beside
// durable's.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/examples/internal/example"
	"github.com/effectivelabs/durable/pgstore"
)

// Order is the input of a run.
type Order struct {
	ID    string
	Cents int
}

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "txstep:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	if db.URL == "" {
		fmt.Fprintln(out, "txstep needs PostgreSQL: set DURABLE_DATABASE_URL to a PostgreSQL URL, e.g.")
		fmt.Fprintln(out, "  DURABLE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./examples/txstep")
		return nil
	}
	schema := db.Schema
	if schema == "" {
		schema = example.DefaultSchema
	}
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	payments := pgx.Identifier{schema, "payments"}.Sanitize()
	// The application's own tables, in the same database: a migration of
	// the application's, applied once with durable's, under its lock, so
	// that workers starting together never race to create them.
	st, err := example.Open(ctx, db, pgstore.AppMigration{
		Version: 1, Name: "orders_and_payments",
		Up: "CREATE TABLE " + orders + " (id text PRIMARY KEY, cents int NOT NULL);" +
			"CREATE TABLE " + payments + " (order_id text PRIMARY KEY REFERENCES " + orders + ", cents int NOT NULL)",
	})
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintln(out, "running", st.Where())

	wf, paid := payWorkflow(payments)

	engine, err := durable.New(st.Store, durable.Config{Logger: example.Logger()})
	if err != nil {
		return err
	}
	if err := engine.Register(wf); err != nil {
		return err
	}
	if err := engine.Start(ctx); err != nil {
		return err
	}
	defer engine.Stop(context.Background())

	// Save the order and start its run in one transaction.
	order := Order{ID: fmt.Sprintf("o-%d", time.Now().UnixNano()), Cents: 4200}
	tx, err := st.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) // after Commit, does nothing
	if _, err := tx.Exec(ctx, "INSERT INTO "+orders+" (id, cents) VALUES ($1, $2)", order.ID, order.Cents); err != nil {
		return err
	}
	id, err := wf.RunNoWaitTx(ctx, engine, tx, "tenant-1", order)
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	res, err := engine.Wait(ctx, id)
	if err != nil {
		return err
	}
	text, _ := paid.Result(res)
	fmt.Fprintln(out, res.Status+":", text)
	var rows int
	if err := st.Pool.QueryRow(ctx, "SELECT count(*) FROM "+payments+" WHERE order_id = $1", order.ID).Scan(&rows); err != nil {
		return err
	}
	fmt.Fprintln(out, "payment rows for the order:", rows)

	// A transaction rolled back starts no run: no order, no workflow.
	tx, err = st.Pool.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+orders+" (id, cents) VALUES ($1, $2)", order.ID+"-b", 100); err != nil {
		return err
	}
	if _, err := wf.RunNoWaitTx(ctx, engine, tx, "tenant-1", Order{ID: order.ID + "-b", Cents: 100}); err != nil {
		return err
	}
	if err := tx.Rollback(ctx); err != nil {
		return err
	}
	page, err := engine.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{
		Workflow: "pay", InputContains: []byte(fmt.Sprintf(`{"ID":%q}`, order.ID+"-b")),
	}})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "runs of the rolled-back order:", len(page.Runs))
	return nil
}

// payWorkflow is the workflow, writing its payments into the table
// payments (a quoted, qualified name). Its test runs it with
// durabletest.RunPostgres: the same pgx.Tx step, its real SQL.
func payWorkflow(payments string) (*durable.Workflow[Order], *durable.StepRef[string]) {
	wf := durable.NewWorkflow[Order]("pay")
	// The first attempt writes its row, then fails (the provider timed
	// out): its write is rolled back with it, and the retry writes again.
	paid := durable.TxStep(wf, "record-payment", func(ctx durable.Context, tx pgx.Tx, o Order) (string, error) {
		if _, err := tx.Exec(ctx, "INSERT INTO "+payments+" (order_id, cents) VALUES ($1, $2)", o.ID, o.Cents); err != nil {
			return "", fmt.Errorf("recording the payment of %s: %w", o.ID, err)
		}
		if ctx.Attempt() == 1 {
			return "", errors.New("payment provider timed out")
		}
		return fmt.Sprintf("payment of %s recorded on attempt %d", o.ID, ctx.Attempt()), nil
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 50 * time.Millisecond}))
	return wf, paid
}
