// Triggers: an idempotency key makes a retried trigger (a client retrying
// its HTTP request, a message delivered twice) start one run, not two; a
// delayed start creates the run at once and starts its steps later, from
// a durable timer rather than a goroutine.
//
//	go run ./examples/triggers
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
type Order struct {
	ID    string
	Cents int
}

// Delay is how long the reminder waits before it starts: a day in
// production, short here.
const Delay = time.Second

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "triggers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	ship := durable.NewWorkflow[Order]("ship")
	durable.Step(ship, "print-label", func(ctx durable.Context, o Order) (string, error) {
		return "label for " + o.ID, nil
	})
	remind := durable.NewWorkflow[Order]("remind")
	durable.Step(remind, "send-reminder", func(ctx durable.Context, o Order) (string, error) {
		return "reminded of " + o.ID, nil
	})

	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	engine, err := durable.New(st.Store, durable.Config{Logger: example.Logger()})
	if err != nil {
		return err
	}
	if err := engine.Register(ship, remind); err != nil {
		return err
	}
	if err := engine.Start(ctx); err != nil {
		return err
	}
	defer engine.Stop(context.Background())
	fmt.Fprintln(out, "running", st.Where())

	// The order's own ID makes the key: the same order, the same run.
	// (Unique per execution of the example, which may share a database
	// with earlier ones.)
	order := Order{ID: "o-" + uuid.NewString()[:8], Cents: 4200}
	first, err := ship.Start(ctx, engine, "tenant-1", order, durable.WithIdempotencyKey("ship:"+order.ID))
	if err != nil {
		return err
	}
	again, err := ship.Start(ctx, engine, "tenant-1", order, durable.WithIdempotencyKey("ship:"+order.ID))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "first trigger: duplicate=%t; second: duplicate=%t, same run: %t\n",
		first.Duplicate, again.Duplicate, first.RunID == again.RunID)
	page, err := engine.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{
		Workflow: "ship", IdempotencyKey: "ship:" + order.ID,
	}})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "runs with the key:", len(page.Runs))
	if _, err := engine.Wait(ctx, first.RunID); err != nil {
		return err
	}

	// A delayed start: the run exists at once, its first step waits for
	// its due time.
	id, err := remind.RunNoWait(ctx, engine, "tenant-1", order, durable.WithStartAfter(Delay))
	if err != nil {
		return err
	}
	res, err := engine.Get(ctx, id)
	if err != nil {
		return err
	}
	s, _ := res.Step("send-reminder")
	fmt.Fprintf(out, "delayed run: %s, its step %s with a due time: %t\n", res.Status, s.State, !s.DueAt.IsZero())
	res, err = engine.Wait(ctx, id)
	if err != nil {
		return err
	}
	s, _ = res.Step("send-reminder")
	fmt.Fprintf(out, "delayed run: %s; its step started no sooner than the delay: %t\n",
		res.Status, res.Status == durabletype.RunCompleted && !s.StartedAt.Before(res.CreatedAt.Add(Delay)))
	return nil
}
