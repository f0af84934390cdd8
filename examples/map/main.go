// Map steps: durable.MapInput runs a function on each item of a list the
// run's input holds (durable.Map does the same over a parent step's
// list), one task per item, spread over the workers and retried item by
// item; the step's output is the items' outputs, in the list's order.
//
//	go run ./examples/map
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
	"strings"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/examples/internal/example"
)

// Order is the input of a run.
type Order struct {
	ID    string
	Lines []Line
}

// Line is one line of an order.
type Line struct {
	SKU   string
	Qty   int
	Cents int // per unit
}

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "map:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	wf := durable.NewWorkflow[Order]("pick-order")
	// One task per line of the order, selected from the run's input when
	// the step starts. The warehouse API fails the first call for "lamp":
	// that item alone is retried.
	picked := durable.MapInput(wf, "pick", func(o Order) []Line { return o.Lines }, func(ctx durable.Context, l Line) (string, error) {
		if l.SKU == "lamp" && ctx.Attempt() == 1 {
			return "", errors.New("warehouse API: 503")
		}
		return fmt.Sprintf("%d x %s", l.Qty, l.SKU), nil
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 50 * time.Millisecond}))
	// The join reads the outputs in the order of the lines.
	slip := durable.Step(wf, "packing-slip", func(ctx durable.Context, o Order) (string, error) {
		items, _ := picked.Output(ctx)
		return o.ID + ": " + strings.Join(items, ", "), nil
	}, durable.After(picked))

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

	res, err := wf.Run(ctx, engine, "tenant-1", Order{ID: "o-1", Lines: []Line{
		{SKU: "tea", Qty: 2, Cents: 450}, {SKU: "lamp", Qty: 1, Cents: 3900}, {SKU: "mug", Qty: 4, Cents: 800},
	}})
	if err != nil {
		return err
	}
	text, _ := slip.Result(res)
	fmt.Fprintln(out, res.Status+":", text)
	s, _ := res.Step("pick")
	for _, item := range s.Items {
		fmt.Fprintf(out, "  item %d %s after %d attempt(s)\n", item.Item, item.State, item.Attempts)
	}
	return nil
}
