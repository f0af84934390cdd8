package durabletest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletest"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// The kit on PostgreSQL: transactional steps declared with the production
// type, pgx.Tx, run their real SQL in the transaction that records them.

// order is the input of the payment workflows.
type order struct {
	ID    string
	Cents int64
}

// createPayments creates the application's table, as the test (or the
// application's migrations, run on k.Pool()) would: unqualified, it lands
// in the kit's schema for the application.
func createPayments(t *testing.T, k *durabletest.Kit) {
	t.Helper()
	if _, err := k.Pool().Exec(k.Context(), `CREATE TABLE payments (
		id bigserial PRIMARY KEY, order_id text NOT NULL, cents bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
}

// payments counts the rows of order id in the payments table.
func payments(t *testing.T, k *durabletest.Kit, id string) int {
	t.Helper()
	var n int
	if err := k.Pool().QueryRow(k.Context(), `SELECT count(*) FROM payments WHERE order_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// insertPayment is the step's SQL, as production runs it.
func insertPayment(ctx context.Context, tx pgx.Tx, o order) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO payments (order_id, cents) VALUES ($1, $2) RETURNING id`, o.ID, o.Cents).Scan(&id)
	return id, err
}

// fastRetry retries at once, nearly: the kit on PostgreSQL waits in real
// time.
var fastRetry = durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 20 * time.Millisecond})

// TestPostgresTxStepExactlyOnce: a TxStep declared with pgx.Tx inserts a
// payment, then fails on its first attempt: that attempt's row is rolled
// back with it, the retry's commits with the step's output, and the table
// holds exactly one row, the one whose ID the step returned.
func TestPostgresTxStepExactlyOnce(t *testing.T) {
	onPostgres(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		createPayments(t, k)
		var attempts atomic.Int32
		wf := durable.NewWorkflow[order]("checkout")
		pay := durable.TxStep(wf, "record-payment", func(ctx durable.Context, tx pgx.Tx, o order) (int64, error) {
			id, err := insertPayment(ctx, tx, o)
			if err != nil {
				return 0, err
			}
			if attempts.Add(1) == 1 {
				return 0, errors.New("the card network timed out") // after the INSERT
			}
			return id, nil
		}, fastRetry)
		res := durabletest.Execute(k, wf, order{ID: "o-1", Cents: 1250})
		durabletest.RequireCompleted(t, res)
		durabletest.RequireAttempts(t, res, pay, 2)
		if n := payments(t, k, "o-1"); n != 1 {
			t.Fatalf("%d payment rows after two attempts, want exactly 1", n)
		}
		var id int64
		if err := k.Pool().QueryRow(k.Context(), `SELECT id FROM payments WHERE order_id = 'o-1'`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		durabletest.RequireOutput(t, res, pay, id)
		// The table the unqualified name finds is the application's, in
		// the kit's schema for it.
		var in string
		if err := k.Pool().QueryRow(k.Context(), `SELECT n.nspname FROM pg_class c
			JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'payments'::regclass`).Scan(&in); err != nil {
			t.Fatal(err)
		}
		if in != k.Schema() {
			t.Fatalf("payments is in schema %q, want the kit's %q", in, k.Schema())
		}
	})
}

// TestPostgresTxStepFailureWritesNothing: a TxStep that fails for good
// leaves no row, whatever it inserted.
func TestPostgresTxStepFailureWritesNothing(t *testing.T) {
	onPostgres(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		createPayments(t, k)
		wf := durable.NewWorkflow[order]("declined")
		pay := durable.TxStep(wf, "record-payment", func(ctx durable.Context, tx pgx.Tx, o order) (int64, error) {
			if _, err := insertPayment(ctx, tx, o); err != nil {
				return 0, err
			}
			return 0, errors.New("declined")
		}, fastRetry)
		res := durabletest.Execute(k, wf, order{ID: "o-2", Cents: 99})
		if msg := durabletest.RequireFailed(t, res, pay); msg != "declined" {
			t.Fatalf("failed with %q", msg)
		}
		durabletest.RequireAttempts(t, res, pay, 4)
		if n := payments(t, k, "o-2"); n != 0 {
			t.Fatalf("%d payment rows after four failed attempts, want none", n)
		}
	})
}

// TestPostgresDoTx: a durable function's DoTx, declared with pgx.Tx,
// inserts a row and fails once; the retried call commits one row with its
// recorded result, which the function returns.
func TestPostgresDoTx(t *testing.T) {
	onPostgres(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		createPayments(t, k)
		var attempts atomic.Int32
		refund := durable.NewFunction("refund", func(ctx durable.FuncContext, o order) (int64, error) {
			return durable.DoTx(ctx, "record-refund", func(ctx durable.Context, tx pgx.Tx) (int64, error) {
				id, err := insertPayment(ctx, tx, order{ID: o.ID, Cents: -o.Cents})
				if err == nil && attempts.Add(1) == 1 {
					return 0, errors.New("the ledger is busy")
				}
				return id, err
			}, fastRetry)
		})
		res := durabletest.Execute(k, refund, order{ID: "o-3", Cents: 500})
		durabletest.RequireCompleted(t, res)
		durabletest.RequireAttempts(t, res, durabletest.StepName("record-refund#0"), 2)
		if n := payments(t, k, "o-3"); n != 1 {
			t.Fatalf("%d refund rows after two attempts, want exactly 1", n)
		}
		var id int64
		if err := k.Pool().QueryRow(k.Context(), `SELECT id FROM payments WHERE order_id = 'o-3' AND cents = -500`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		durabletest.RequireFuncOutput(t, res, refund, id)
	})
}

// TestTxStepInMemoryNeedsPostgres: the same step, declared with pgx.Tx,
// fails on the in-memory kit without retries, with a *TxTypeError that
// names both types; the kit's assertions say to run it on PostgreSQL.
func TestTxStepInMemoryNeedsPostgres(t *testing.T) {
	durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
		wf := durable.NewWorkflow[order]("checkout")
		pay := durable.TxStep(wf, "record-payment", func(ctx durable.Context, tx pgx.Tx, o order) (int64, error) {
			return insertPayment(ctx, tx, o)
		}, fastRetry)
		res := durabletest.Execute(k, wf, order{ID: "o-4", Cents: 1})
		msg := durabletest.RequireFailed(t, res, pay)
		durabletest.RequireAttempts(t, res, pay, 1)
		for _, want := range []string{"pgx.Tx", "*memstore.Tx"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the failure %q does not name %s", msg, want)
			}
		}
		fails(t, "RequireCompleted", func(tb testing.TB) { durabletest.RequireCompleted(tb, res) },
			"takes a transaction of type pgx.Tx", "run the test on PostgreSQL, with durabletest.RunPostgres")
	})
}

// TestPostgresSchemasDropped: the kit's two schemas (the store's and the
// application's) exist while the test runs and are dropped, with what
// they hold, when it ends.
func TestPostgresSchemasDropped(t *testing.T) {
	url := pgtest.URL(t)
	var schemas []string
	t.Run("kit", func(t *testing.T) {
		durabletest.RunOptions(t, durabletest.Options{DatabaseURL: url}, func(t *testing.T, k *durabletest.Kit) {
			createPayments(t, k)
			st, ok := k.Store().(interface{ Schema() string })
			if !ok {
				t.Fatalf("the kit's store %T has no schema", k.Store())
			}
			schemas = []string{k.Schema(), st.Schema()}
			if schemas[0] == schemas[1] {
				t.Fatalf("the application and the store share schema %s", schemas[0])
			}
			if n := countSchemas(t, url, schemas); n != 2 {
				t.Fatalf("%d of the kit's schemas exist while it runs, want 2", n)
			}
			durabletest.RequireCompleted(t, durabletest.Execute(k, newPing(), 1))
		})
	})
	if len(schemas) != 2 {
		t.Fatal("the kit did not run")
	}
	if n := countSchemas(t, url, schemas); n != 0 {
		t.Fatalf("%d of the kit's schemas %v are left after the test, want none", n, schemas)
	}
}

// countSchemas counts which of schemas exist, on a connection of its own.
func countSchemas(t *testing.T, url string, schemas []string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = ANY($1)`, schemas).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// newPing is a one-step workflow.
func newPing() *durable.Workflow[int] {
	wf := durable.NewWorkflow[int]("ping")
	durable.Step(wf, "pong", func(ctx durable.Context, n int) (int, error) { return n, nil })
	return wf
}

// TestPostgresIdle: Start returns once the engine is idle, as in memory:
// a chain of steps and a child run have run, and the run has settled.
// A step blocked in its own code keeps the engine busy: Idle then fails
// after Options.Timeout, saying which step runs.
func TestPostgresIdle(t *testing.T) {
	// Long enough for the chain and its child run on a loaded machine;
	// only the blocked step's Idle waits it out.
	onPostgres(t, durabletest.Options{Timeout: 20 * time.Second}, func(t *testing.T, k *durabletest.Kit) {
		child := durable.NewWorkflow[int]("child")
		pong := durable.Step(child, "pong", func(ctx durable.Context, n int) (int, error) { return n, nil })
		wf := durable.NewWorkflow[int]("chain")
		a := durable.Step(wf, "a", func(ctx durable.Context, n int) (int, error) { return n + 1, nil })
		b := durable.Step(wf, "b", func(ctx durable.Context, n int) (int, error) { return n + 2, nil }, durable.After(a))
		durable.Child(wf, "c", child, pong, func(ctx durable.Context, n int) (int, error) { return n, nil },
			durable.After(b))
		k.Register(child)
		id := durabletest.Start(k, wf, 1)
		durabletest.RequireCompleted(t, k.Get(id)) // no wait: Start waited

		release := make(chan struct{})
		blocked := durable.NewWorkflow[int]("blocked")
		durable.Step(blocked, "stuck", func(ctx durable.Context, n int) (int, error) {
			select {
			case <-release:
				return n, nil
			case <-ctx.Done():
				return 0, context.Cause(ctx)
			}
		})
		k.Register(blocked)
		bid, err := blocked.RunNoWait(k.Context(), k.Engine(), k.Tenant(), 2)
		if err != nil {
			t.Fatal(err)
		}
		fails(t, "Idle with a step blocked", func(tb testing.TB) { durabletest.WithTB(k, tb).Idle() },
			"not idle within", "(Options.Timeout)", `step "stuck" RUNNING`)
		close(release)
		durabletest.RequireCompleted(t, k.Settle(bid))
		k.Idle()
	})
}

// TestPostgresAdvance: Advance fails on PostgreSQL, saying why and what
// to do instead; the kit goes on.
func TestPostgresAdvance(t *testing.T) {
	onPostgres(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		fails(t, "Advance", func(tb testing.TB) { durabletest.WithTB(k, tb).Advance(time.Hour) },
			"runs in real time", "wait with Settle or WaitStep", "in-memory kit")
		durabletest.RequireCompleted(t, durabletest.Execute(k, newPing(), 1))
	})
}

// TestMemoryHasNoDatabase: Pool and Schema fail on the in-memory kit,
// saying how to get one.
func TestMemoryHasNoDatabase(t *testing.T) {
	durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
		fails(t, "Pool", func(tb testing.TB) { durabletest.WithTB(k, tb).Pool() }, "has no database", "RunPostgres")
		fails(t, "Schema", func(tb testing.TB) { durabletest.WithTB(k, tb).Schema() }, "has no database")
	})
}

// TestPostgresWaits: WaitStep, SendEvent, Signal, Child and Events on
// PostgreSQL, in real time.
func TestPostgresWaits(t *testing.T) {
	onPostgres(t, durabletest.Options{}, func(t *testing.T, k *durabletest.Kit) {
		wf := durable.NewWorkflow[string]("approve")
		paid := durable.WaitForEvent[int](wf, "paid", func(ctx durable.Context, o string) (string, error) { return "paid:" + o, nil })
		ok := durable.WaitForSignal[bool](wf, "ok", "approve", durable.After(paid))
		nap := durable.Sleep(wf, "nap", 50*time.Millisecond, durable.After(ok))
		id := durabletest.Start(k, wf, "o-5")
		k.WaitStep(id, paid, durabletype.TaskWaiting)
		if n := k.SendEvent("paid:o-5", 7); n != 1 {
			t.Fatalf("the event reached %d waits", n)
		}
		k.WaitStep(id, ok, durabletype.TaskWaiting)
		k.Signal(id, "approve", true)
		res := k.Settle(id)
		durabletest.RequireOutput(t, res, paid, 7)
		durabletest.RequireOutput(t, res, ok, true)
		durabletest.RequireState(t, res, nap, durabletype.TaskCompleted)
		seen := map[string]bool{}
		for _, ev := range k.Events(id) {
			seen[ev.Step+" "+string(ev.Type)] = true
		}
		for _, want := range []string{"paid WAITING", "ok WAITING", "nap WOKEN"} {
			if !seen[want] {
				t.Errorf("no event %q in %v", want, seen)
			}
		}
	})
}

// The example's test, run.
func TestExamplePayment(t *testing.T) {
	pgtest.URL(t) // fails under CI=true without a database, instead of skipping
	testPayment(t)
}

// TestDatabaseURL: DatabaseURL reads DURABLE_TEST_DATABASE_URL, and skips
// the test, saying what to set, when it is unset.
func TestDatabaseURL(t *testing.T) {
	t.Setenv(durabletest.EnvDatabaseURL, "")
	f := durabletest.Capture(func(tb testing.TB) { durabletest.DatabaseURL(tb) })
	if !f.Skipped() || f.Failed() || !strings.Contains(f.Messages(), "DURABLE_TEST_DATABASE_URL") {
		t.Fatalf("unset: skipped %t, failed %t: %s", f.Skipped(), f.Failed(), f.Messages())
	}
	t.Setenv(durabletest.EnvDatabaseURL, "postgres://db.example/test")
	if got := durabletest.DatabaseURL(t); got != "postgres://db.example/test" {
		t.Fatalf("DatabaseURL = %q", got)
	}
}
