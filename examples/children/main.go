// Child runs: a Child step starts a run of another workflow and waits for
// it, holding no worker; its output is the output of the child's result
// step. The child is a run of its own (listed, retried, cancelled with its
// parent), linked to its parent both ways.
//
//	go run ./examples/children
//
// With DURABLE_DATABASE_URL set (a PostgreSQL URL) it runs on PostgreSQL,
// in the schema durable_examples (or DURABLE_SCHEMA).
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/examples/internal/example"
)

// Order is the input of a checkout run.
type Order struct {
	ID      string
	Address string
}

// Parcel is the input of a shipping run.
type Parcel struct {
	Order   string
	Address string
}

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "children:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	// The child workflow: shipping a parcel.
	shipping := durable.NewWorkflow[Parcel]("shipping")
	weigh := durable.Step(shipping, "weigh", func(ctx durable.Context, p Parcel) (int, error) {
		return 1200, nil // grams
	})
	label := durable.Step(shipping, "print-label", func(ctx durable.Context, p Parcel) (string, error) {
		grams, _ := weigh.Output(ctx)
		return fmt.Sprintf("label %s: %d g to %s", p.Order, grams, p.Address), nil
	}, durable.After(weigh))

	// The parent: charge, then ship in a child run, then mail the label.
	checkout := durable.NewWorkflow[Order]("checkout")
	charge := durable.Step(checkout, "charge", func(ctx durable.Context, o Order) (string, error) {
		return "ch_" + o.ID, nil
	})
	ship := durable.Child(checkout, "ship", shipping, label,
		func(ctx durable.Context, o Order) (Parcel, error) {
			return Parcel{Order: o.ID, Address: o.Address}, nil
		},
		durable.After(charge))
	mail := durable.Step(checkout, "mail-label", func(ctx durable.Context, o Order) (string, error) {
		l, _ := ship.Output(ctx)
		return "mailed " + l, nil
	}, durable.After(ship))

	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	engine, err := durable.New(st.Store, durable.Config{Logger: example.Logger()})
	if err != nil {
		return err
	}
	// Registering checkout registers shipping, its child, too.
	if err := engine.Register(checkout); err != nil {
		return err
	}
	if err := engine.Start(ctx); err != nil {
		return err
	}
	defer engine.Stop(context.Background())
	fmt.Fprintln(out, "running", st.Where())

	res, err := checkout.Run(ctx, engine, "tenant-1", Order{ID: "o-1", Address: "1 Main St"})
	if err != nil {
		return err
	}
	text, _ := mail.Result(res)
	fmt.Fprintln(out, "checkout", res.Status+":", text)

	// The child, from the parent's step, and back.
	s, _ := res.Step("ship")
	child, err := engine.Get(ctx, s.ChildRunID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "child run: workflow %s, %s, tenant %s, started by step %q of the checkout: %t\n",
		child.Workflow, child.Status, child.Tenant, child.Parent.Step, child.Parent.RunID == res.ID)

	// A run's children, listed.
	page, err := engine.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Parent: res.ID}})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "children of the checkout:", len(page.Runs))
	return nil
}
