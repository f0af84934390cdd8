package main

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletest"
	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// On PostgreSQL, the payment's first attempt rolls its row back, the
// second writes it: one row; a rolled-back trigger starts no run. In
// memory the example says it needs PostgreSQL.
func TestTxStep(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		if strings.HasSuffix(t.Name(), "/memory") {
			require.True(t, strings.HasPrefix(out, "txstep needs PostgreSQL: set DURABLE_DATABASE_URL"), out)
			return
		}
		require.Regexp(t, `COMPLETED: payment of o-\d+ recorded on attempt 2\n`+
			`payment rows for the order: 1\n`+
			`runs of the rolled-back order: 0\n`, out)
	})
}

// The same workflow under the test kit on PostgreSQL: its pgx.Tx step runs
// its real SQL against a table the test creates, and the retried payment
// is written once. (Skipped without DURABLE_TEST_DATABASE_URL.)
func TestPayWithTheKit(t *testing.T) {
	durabletest.RunPostgres(t, func(t *testing.T, k *durabletest.Kit) {
		orders := pgx.Identifier{k.Schema(), "orders"}.Sanitize()
		payments := pgx.Identifier{k.Schema(), "payments"}.Sanitize()
		_, err := k.Pool().Exec(k.Context(), "CREATE TABLE "+orders+" (id text PRIMARY KEY, cents int NOT NULL);"+
			"CREATE TABLE "+payments+" (order_id text PRIMARY KEY REFERENCES "+orders+", cents int NOT NULL);"+
			"INSERT INTO "+orders+" VALUES ('o-7', 1250)")
		require.NoError(t, err)
		wf, paid := payWorkflow(payments)
		k.Register(wf)
		res := durabletest.Execute(k, wf, Order{ID: "o-7", Cents: 1250})
		durabletest.RequireOutput(t, res, paid, "payment of o-7 recorded on attempt 2")
		durabletest.RequireAttempts(t, res, durabletest.StepName("record-payment"), 2)
		var n, cents int
		require.NoError(t, k.Pool().QueryRow(k.Context(), "SELECT count(*), sum(cents) FROM "+payments).Scan(&n, &cents))
		require.Equal(t, 1, n, "the first attempt's row was rolled back with it")
		require.Equal(t, 1250, cents)
	})
}
