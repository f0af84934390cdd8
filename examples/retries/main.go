// Retries: a step that fails is retried after a durable backoff (a row
// with a due time, not a timer in memory), growing by Factor each time; an
// error wrapped in durable.Terminal is never retried, and fails the run at
// once.
//
//	go run ./examples/retries
//
// With DURABLE_DATABASE_URL set (a PostgreSQL URL) it runs on PostgreSQL,
// in the schema durable_examples (or DURABLE_SCHEMA).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/examples/internal/example"
)

// Charge is the input of a run.
type Charge struct {
	Card  string
	Cents int
}

// ErrDeclined is what the provider says of an expired card: retrying it
// would not help.
var ErrDeclined = errors.New("card declined: expired")

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "retries:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	wf := durable.NewWorkflow[Charge]("charge")
	charge := durable.Step(wf, "charge-card", func(ctx durable.Context, c Charge) (string, error) {
		if c.Card == "expired" {
			return "", durable.Terminal(ErrDeclined) // no retry
		}
		if ctx.Attempt() <= 2 {
			return "", fmt.Errorf("attempt %d: payment provider timed out", ctx.Attempt()) // retried
		}
		return fmt.Sprintf("charged %d cents on attempt %d", c.Cents, ctx.Attempt()), nil
	}, durable.WithRetry(durable.RetryPolicy{
		MaxRetries:   5,                     // 6 attempts at most
		InitialDelay: 50 * time.Millisecond, // then 100ms, 200ms, ...
		Factor:       2,
	}))

	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
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
	fmt.Fprintln(out, "running", st.Where())

	// A flaky provider: two failures, two retries, then success.
	res, err := wf.Run(ctx, engine, "tenant-1", Charge{Card: "visa", Cents: 4200})
	if err != nil {
		return err
	}
	text, _ := charge.Result(res)
	fmt.Fprintln(out, res.Status+":", text)
	events, err := engine.Events(ctx, res.ID)
	if err != nil {
		return err
	}
	for _, ev := range events {
		if ev.Type == durabletype.EventRetrying {
			fmt.Fprintf(out, "  attempt %d failed (%s), retried after %s\n", ev.Attempt, ev.Detail, ev.DueAt.Sub(ev.At).Round(time.Millisecond))
		}
	}

	// An expired card: a Terminal error fails the step on its first
	// attempt, and the run with it.
	res, err = wf.Run(ctx, engine, "tenant-1", Charge{Card: "expired", Cents: 4200})
	if !errors.Is(err, durable.ErrRunFailed) {
		return fmt.Errorf("the expired card's run: got %v, want a failed run", err)
	}
	s, _ := res.Step("charge-card")
	fmt.Fprintf(out, "%s: step %s %s after %d attempt: %s\n", res.Status, s.Name, s.State, s.Attempts, s.Error)
	return nil
}
