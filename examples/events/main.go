// Events: a WaitForEvent step waits, holding no worker, until an event with
// its key is sent for the run's tenant (engine.SendEvent, from an HTTP
// handler, say). WithLookback also takes an event sent shortly before the
// step began waiting; WithWaitTimeout and SkipOnTimeout give up on it,
// and the steps after it see it as absent.
//
//	go run ./examples/events
//
// With DURABLE_DATABASE_URL set (a PostgreSQL URL) it runs on PostgreSQL,
// in the schema durable_examples (or DURABLE_SCHEMA).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/examples/internal/example"
)

// Order is the input of a run.
type Order struct{ ID string }

// Confirmation is the payload of the event "confirm:ORDER_ID".
type Confirmation struct{ By string }

// ConfirmTimeout is how long an order waits for its confirmation: 48 hours
// in production, short here.
const ConfirmTimeout = 2 * time.Second

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "events:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	wf := durable.NewWorkflow[Order]("confirm-order")
	mail := durable.Step(wf, "send-confirmation-mail", func(ctx durable.Context, o Order) (string, error) {
		return "mailed a confirmation link for " + o.ID, nil
	})
	// The event's key is computed from the input (or a parent's output).
	confirmed := durable.WaitForEvent[Confirmation](wf, "confirmed",
		func(ctx durable.Context, o Order) (string, error) { return "confirm:" + o.ID, nil },
		durable.After(mail),
		durable.WithWaitTimeout(ConfirmTimeout), durable.SkipOnTimeout(), durable.WithLookback(time.Hour))
	// ship has two parents: when the wait is skipped, mail still completed,
	// so ship runs (a step whose parents were all skipped is skipped).
	ship := durable.Step(wf, "ship", func(ctx durable.Context, o Order) (string, error) {
		c, ok := confirmed.Output(ctx)
		if !ok { // the wait timed out and was skipped
			return "not shipped: no confirmation", nil
		}
		return "shipped, confirmed by " + c.By, nil
	}, durable.After(mail, confirmed))

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

	// o-1: the run waits, then the event comes and is delivered to it.
	id, err := wf.RunNoWait(ctx, engine, "tenant-1", Order{ID: "o-1"})
	if err != nil {
		return err
	}
	s, err := example.WaitStep(ctx, engine, id, confirmed.Name(), durabletype.TaskWaiting)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "o-1: step %s is %s for %q\n", s.Name, s.State, s.EventKey)
	n, err := engine.SendEvent(ctx, "tenant-1", "confirm:o-1", Confirmation{By: "ada"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "o-1: event delivered to %d waiting step\n", n)
	if err := report(ctx, out, engine, ship, "o-1", id); err != nil {
		return err
	}

	// o-2: the event comes first (the customer clicked before the run
	// waited); the step's lookback finds it when it begins to wait.
	n, err = engine.SendEvent(ctx, "tenant-1", "confirm:o-2", Confirmation{By: "bob"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "o-2: event delivered to %d waiting steps, and kept\n", n)
	id, err = wf.RunNoWait(ctx, engine, "tenant-1", Order{ID: "o-2"})
	if err != nil {
		return err
	}
	if err := report(ctx, out, engine, ship, "o-2", id); err != nil {
		return err
	}

	// o-3: no event; the wait times out and is skipped.
	id, err = wf.RunNoWait(ctx, engine, "tenant-1", Order{ID: "o-3"})
	if err != nil {
		return err
	}
	return report(ctx, out, engine, ship, "o-3", id)
}

// report waits for run id and prints what its ship step did.
func report(ctx context.Context, out io.Writer, engine *durable.Engine, ship *durable.StepRef[string], order string, id uuid.UUID) error {
	res, err := engine.Wait(ctx, id)
	if err != nil {
		return err
	}
	text, _ := ship.Result(res)
	c, _ := res.Step("confirmed")
	fmt.Fprintf(out, "%s: %s, confirmed %s: %s\n", order, res.Status, c.State, text)
	return nil
}
