package durable_test

import (
	"context"
	"fmt"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

// A TxStep writes in the transaction that records its outcome: with
// pgstore, fn takes a pgx.Tx and its INSERTs commit with the step's output,
// so a step that runs twice (its worker died after writing) still writes
// once. In memory the transaction is a *memstore.Tx, whose effects run when
// the outcome is recorded; declare tx as any to run one definition on both.
func ExampleTxStep() {
	var ledger []string
	wf := durable.NewWorkflow[int]("pay")
	paid := durable.TxStep(wf, "record-payment", func(ctx durable.Context, tx any, cents int) (string, error) {
		entry := fmt.Sprintf("paid %d cents", cents)
		switch tx := tx.(type) {
		case *memstore.Tx:
			tx.OnCommit(func() { ledger = append(ledger, entry) })
		default: // pgx.Tx on pgstore:
			// _, err := tx.(pgx.Tx).Exec(ctx, "INSERT INTO ledger (entry) VALUES ($1)", entry)
			return "", durable.Terminal(fmt.Errorf("unexpected transaction %T", tx))
		}
		return entry, nil
	})

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())

	res, err := wf.Run(context.Background(), e, "tenant-1", 1250)
	if err != nil {
		fmt.Println("run failed:", err)
		return
	}
	out, _ := paid.Result(res)
	fmt.Println(out)
	fmt.Println(ledger)
	// Output:
	// paid 1250 cents
	// [paid 1250 cents]
}
