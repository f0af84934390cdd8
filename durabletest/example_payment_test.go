package durabletest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletest"
)

// Payment is the input of the payment workflow.
type Payment struct {
	Order string
	Cents int64
}

// newPaymentFlow declares a workflow whose transactional step records a
// payment in the application's own table, declared once with the
// production type, pgx.Tx. charge is the card network, a fake in tests.
func newPaymentFlow(charge func(p Payment) error) (*durable.Workflow[Payment], *durable.StepRef[int64]) {
	wf := durable.NewWorkflow[Payment]("payment")
	record := durable.TxStep(wf, "record-payment", func(ctx durable.Context, tx pgx.Tx, p Payment) (int64, error) {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO payments (order_id, cents) VALUES ($1, $2) RETURNING id`,
			p.Order, p.Cents).Scan(&id)
		if err != nil {
			return 0, err
		}
		// A failure after the INSERT rolls it back with the attempt.
		return id, charge(p)
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 10 * time.Millisecond}))
	return wf, record
}

// testPayment is a test of the payment workflow, as a func
// TestPayment(t *testing.T) in your package would be. It runs on
// PostgreSQL, at DURABLE_TEST_DATABASE_URL (skipped without it), so that
// the step's SQL runs for real, in the transaction that records its
// outcome.
func testPayment(t *testing.T) {
	durabletest.RunPostgres(t, func(t *testing.T, k *durabletest.Kit) {
		// The application's table, in the kit's schema (or run your
		// migrations on k.Pool()).
		_, err := k.Pool().Exec(k.Context(),
			`CREATE TABLE payments (id bigserial PRIMARY KEY, order_id text NOT NULL, cents bigint NOT NULL)`)
		if err != nil {
			t.Fatal(err)
		}
		timeouts := 1 // the card network times out once
		wf, record := newPaymentFlow(func(Payment) error {
			if timeouts > 0 {
				timeouts--
				return errors.New("card network timeout")
			}
			return nil
		})

		res := durabletest.Execute(k, wf, Payment{Order: "o-1", Cents: 1250})
		durabletest.RequireCompleted(t, res)
		durabletest.RequireAttempts(t, res, record, 2)

		// Two attempts inserted a row; one is kept, the recorded one's.
		var rows int
		var id int64
		err = k.Pool().QueryRow(k.Context(),
			`SELECT count(*), max(id) FROM payments WHERE order_id = 'o-1'`).Scan(&rows, &id)
		if err != nil {
			t.Fatal(err)
		}
		if rows != 1 {
			t.Fatalf("%d payment rows, want exactly 1", rows)
		}
		durabletest.RequireOutput(t, res, record, id)
	})
}

// ExampleRunPostgres shows a test of a transactional step (durable.TxStep,
// declared with pgx.Tx) that runs the step's real SQL: testPayment above
// is what would be a func TestPayment(t *testing.T) in your package. The
// step's first attempt inserts its row, then fails; the retry inserts
// again; the table holds one row.
//
// This example has no output to check: the kit needs a test's
// *testing.T. The package's own tests run testPayment as
// TestExamplePayment.
func ExampleRunPostgres() {
	_ = testPayment
}
