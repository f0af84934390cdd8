// Command orderfunc is a program that serves an order flow written as a
// durable function, checkout, with durable's command line: "orderfunc
// worker" executes its runs, "orderfunc trigger --workflow checkout
// --input '{...}'" starts them, "orderfunc events send --key paid:ID"
// tells a run its order was paid, and "orderfunc runs", "orderfunc serve",
// ... operate them. Run "orderfunc help" for every command.
//
//	export DURABLE_DATABASE_URL=postgres://user:password@127.0.0.1:5432/app
//	go build -o orderfunc ./examples/orderfunc
//	./orderfunc migrate up
//	./orderfunc worker &
//	./orderfunc events send --key paid:o-1 --payload '{"by":"bank-transfer"}'
//	./orderfunc trigger --workflow checkout --wait \
//	    --input '{"id":"o-1","email":"ada@example.com","lines":[{"sku":"tea","qty":2,"cents":450}]}'
//
// checkout is plain Go code whose calls are checkpointed: it reserves the
// order's lines in parallel (Go, AwaitAll), charges the card with retries
// (Do, WithRetry), waits for the payment to be confirmed with a timeout
// (AwaitEvent, WithWaitTimeout; refunding when none comes), records the
// order in its own table in the transaction that records the step
// (DoTx), and sends the receipt from a child run (StartChild).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablecli"
)

// Order is the input of a checkout run.
type Order struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	Lines []Line `json:"lines"`
}

// Line is one line of an order.
type Line struct {
	SKU   string `json:"sku"`
	Qty   int    `json:"qty"`
	Cents int    `json:"cents"` // per unit
}

// Payment is the payload of the event "paid:ORDER_ID".
type Payment struct {
	By string `json:"by"`
}

// Receipt is the output of a checkout run.
type Receipt struct {
	Order  string `json:"order"`
	Status string `json:"status"` // "paid" or "refunded"
	Cents  int    `json:"cents"`
	Charge string `json:"charge"`
	PaidBy string `json:"paid_by,omitempty"`
	Mail   string `json:"mail,omitempty"`
}

// DefaultPaymentTimeout is how long a checkout waits for its payment
// without --payment-timeout.
const DefaultPaymentTimeout = 24 * time.Hour

func main() {
	durablecli.Main(durablecli.Config{
		// The workflows as the help texts list them; Load builds them
		// for each command from its flags.
		Workflows: definitions("durable", DefaultPaymentTimeout),
		Flags: func(command string, fs *flag.FlagSet) durablecli.Load {
			timeout := fs.Duration("payment-timeout", DefaultPaymentTimeout, "how long a checkout waits for its payment before it refunds")
			return func(ctx context.Context, db durablecli.DB) ([]durable.Definition, []durablecli.Input, error) {
				if *timeout <= 0 {
					return nil, nil, fmt.Errorf("%w: --payment-timeout %s: it must be positive", durablecli.ErrUsage, *timeout)
				}
				if command == "worker" {
					if err := createLedger(ctx, db); err != nil {
						return nil, nil, err
					}
				}
				return definitions(db.Schema, *timeout), nil, nil
			}
		},
	})
}

// definitions returns the checkout function, whose ledger is the table
// orders in schema, and its child function.
func definitions(schema string, paymentTimeout time.Duration) []durable.Definition {
	receipt := receiptFunction()
	return []durable.Definition{checkoutFunction(schema, paymentTimeout, receipt), receipt}
}

// checkoutFunction declares the order flow. Everything that reads the
// world (the clock, the provider, the database) happens inside a call,
// whose result is recorded: the function itself only decides on recorded
// results, so that it makes the same calls each time it runs again.
func checkoutFunction(schema string, paymentTimeout time.Duration, receipt *durable.Function[Receipt, string]) *durable.Function[Order, Receipt] {
	ledger := pgx.Identifier{schema, "orderfunc_orders"}.Sanitize()
	return durable.NewFunction("checkout", func(ctx durable.FuncContext, o Order) (Receipt, error) {
		if len(o.Lines) == 0 {
			return Receipt{}, errors.New("an order has at least one line")
		}
		// Reserve every line at once (at most 4 at a time, MaxParallel).
		var lines []*durable.Future[int]
		var all []durable.Awaitable
		for _, l := range o.Lines {
			f := durable.Go(ctx, "reserve", func(ctx durable.Context) (int, error) {
				if l.Qty <= 0 {
					return 0, durable.Terminal(fmt.Errorf("line %s: quantity %d", l.SKU, l.Qty))
				}
				return l.Qty * l.Cents, nil // the line's total, once reserved
			})
			lines = append(lines, f)
			all = append(all, f)
		}
		if err := durable.AwaitAll(ctx, all...); err != nil {
			return Receipt{}, err // a *durable.StepError: the run fails with it
		}
		total := 0
		for _, f := range lines {
			cents, err := f.Get(ctx)
			if err != nil {
				return Receipt{}, err
			}
			total += cents
		}

		// Charge the card; the provider times out on the first attempt,
		// as providers do, and the call is retried after a durable
		// backoff (the function holds nothing meanwhile).
		charge, err := durable.Do(ctx, "charge", func(ctx durable.Context) (string, error) {
			if ctx.Attempt() == 1 {
				return "", errors.New("payment provider timed out")
			}
			return fmt.Sprintf("ch_%s_%d", o.ID, total), nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 200 * time.Millisecond}))
		if err != nil {
			return Receipt{}, err
		}
		r := Receipt{Order: o.ID, Cents: total, Charge: charge}

		// Wait for the bank to confirm; an event sent up to an hour
		// before the wait began counts too.
		paid, err := durable.AwaitEvent[Payment](ctx, "await-payment", "paid:"+o.ID,
			durable.WithWaitTimeout(paymentTimeout), durable.WithLookback(time.Hour))
		if errors.Is(err, durable.ErrWaitTimeout) {
			if _, err := durable.Do(ctx, "refund", func(ctx durable.Context) (string, error) {
				return "refunded " + charge, nil
			}); err != nil {
				return Receipt{}, err
			}
			r.Status = "refunded"
			return r, nil
		}
		if err != nil {
			return Receipt{}, err
		}
		r.Status, r.PaidBy = "paid", paid.By

		// Record the order in the application's own table, in the
		// transaction that records the step: one row, however many times
		// the step runs.
		if _, err := durable.DoTx(ctx, "record-order", func(ctx durable.Context, tx pgx.Tx) (int64, error) {
			tag, err := tx.Exec(ctx, "INSERT INTO "+ledger+" (order_id, charge, cents, paid_by) VALUES ($1, $2, $3, $4)",
				o.ID, charge, total, paid.By)
			if err != nil {
				return 0, fmt.Errorf("recording order %s: %w", o.ID, err)
			}
			return tag.RowsAffected(), nil
		}); err != nil {
			return Receipt{}, err
		}

		// The receipt is a run of its own (a child run of this one).
		mail, err := durable.StartChild(ctx, "send-receipt", receipt, r).Get(ctx)
		if err != nil {
			return Receipt{}, err
		}
		r.Mail = mail
		return r, nil
	}, durable.MaxParallel(4))
}

// receiptFunction declares the child function that renders and mails a
// receipt.
func receiptFunction() *durable.Function[Receipt, string] {
	return durable.NewFunction("order-receipt", func(ctx durable.FuncContext, r Receipt) (string, error) {
		body, err := durable.Do(ctx, "render", func(ctx durable.Context) (string, error) {
			return fmt.Sprintf("order %s: %d cents, %s, paid by %s", r.Order, r.Cents, r.Charge, r.PaidBy), nil
		})
		if err != nil {
			return "", err
		}
		return durable.Do(ctx, "mail", func(ctx durable.Context) (string, error) {
			return "mailed: " + strings.ToUpper(body[:1]) + body[1:], nil // send it here
		})
	})
}

// createLedger creates the application's table beside durable's, in the
// schema of --schema, if it is not there yet. Workers starting together
// take turns (an advisory lock), since concurrent CREATE ... IF NOT EXISTS
// may collide.
func createLedger(ctx context.Context, db durablecli.DB) error {
	return pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('orderfunc ledger'))"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{db.Schema}.Sanitize()); err != nil {
			return fmt.Errorf("creating the schema: %w", err)
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+pgx.Identifier{db.Schema, "orderfunc_orders"}.Sanitize()+
			" (order_id text PRIMARY KEY, charge text NOT NULL, cents bigint NOT NULL, paid_by text NOT NULL)"); err != nil {
			return fmt.Errorf("creating the orders table: %w", err)
		}
		return nil
	})
}
