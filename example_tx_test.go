package durable_test

import (
	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable"
)

// A TxStep writes in the transaction that records its outcome. Declare tx
// as pgx.Tx, the type of pgstore, which production runs on: the INSERT
// commits with the step's output, so a step that runs twice (it failed
// after writing, or its worker died) still leaves one row. Test it with
// the same SQL on PostgreSQL: durabletest.RunPostgres runs the step in the
// transaction that records it, in a schema of the test's own (see
// durabletest's ExampleRunPostgres).
//
// This example has no output: it needs a database.
func ExampleTxStep() {
	type payment struct {
		Order string
		Cents int64
	}
	wf := durable.NewWorkflow[payment]("pay")
	durable.TxStep(wf, "record-payment", func(ctx durable.Context, tx pgx.Tx, p payment) (int64, error) {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO payments (order_id, cents) VALUES ($1, $2) RETURNING id`,
			p.Order, p.Cents).Scan(&id)
		return id, err
	})
}
