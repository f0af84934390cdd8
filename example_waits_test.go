package durable_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/effectivelabs/durable"
)

// A step that waits for an event holds no worker: the run goes on when an
// event with its key is sent for the run's tenant. With a lookback, an
// event sent shortly before the step began waiting counts too.
//
// Not confirmed within 48 hours, the wait is skipped (SkipOnTimeout), and
// so is "ship", whose only parent it is. "record" has a second parent that
// completes either way, so it runs in both cases and learns from Output
// whether the confirmation came.
func ExampleWaitForEvent() {
	type Order struct{ ID string }
	type Confirmation struct{ By string }

	wf := durable.NewWorkflow[Order]("confirm-order")
	placed := durable.Step(wf, "place", func(ctx durable.Context, o Order) (string, error) { return o.ID, nil })
	confirmed := durable.WaitForEvent[Confirmation](wf, "confirmed",
		func(ctx durable.Context, o Order) (string, error) { return "confirm:" + o.ID, nil },
		durable.After(placed), durable.WithWaitTimeout(48*time.Hour), durable.SkipOnTimeout(), durable.WithLookback(time.Hour))
	durable.Step(wf, "ship", func(ctx durable.Context, o Order) (string, error) {
		c, _ := confirmed.Output(ctx) // runs only once confirmed
		return "shipped, confirmed by " + c.By, nil
	}, durable.After(confirmed))
	durable.Step(wf, "record", func(ctx durable.Context, o Order) (string, error) {
		if _, ok := confirmed.Output(ctx); !ok {
			return "timed out", nil
		}
		return "confirmed", nil
	}, durable.After(placed, confirmed))

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	ctx := context.Background()

	id, _ := wf.RunNoWait(ctx, e, "tenant-1", Order{ID: "o-1"})
	// Sent at once: it reaches the step whether the step waits already
	// (SendEvent counts it) or begins waiting later (its lookback finds it).
	_, err := e.SendEvent(ctx, "tenant-1", "confirm:o-1", Confirmation{By: "ada"})
	fmt.Println(err)
	res, _ := e.Wait(ctx, id)
	s, _ := res.Step("ship")
	r, _ := res.Step("record")
	fmt.Println(res.Status, string(s.Output), string(r.Output))
	// Output:
	// <nil>
	// COMPLETED "shipped, confirmed by ada" "confirmed"
}

// A signal goes to one run by ID; it is kept with the run, so it may come
// before its step waits.
func ExampleWaitForSignal() {
	wf := durable.NewWorkflow[string]("publish")
	approved := durable.WaitForSignal[string](wf, "approved", "approve")
	durable.Step(wf, "publish", func(ctx durable.Context, doc string) (string, error) {
		by, _ := approved.Output(ctx)
		return doc + " approved by " + by, nil
	}, durable.After(approved))

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	ctx := context.Background()

	id, _ := wf.RunNoWait(ctx, e, "tenant-1", "draft-7")
	fmt.Println(e.Signal(ctx, id, "approve", "bob"))
	res, _ := e.Wait(ctx, id)
	s, _ := res.Step("publish")
	fmt.Println(res.Status, string(s.Output))
	// Output:
	// <nil>
	// COMPLETED "draft-7 approved by bob"
}

// A child step starts a run of another workflow and waits for it; the
// output of the child's result step becomes its output.
func ExampleChild() {
	shipping := durable.NewWorkflow[string]("shipping")
	label := durable.Step(shipping, "label", func(ctx durable.Context, addr string) (string, error) {
		return "label for " + addr, nil
	})

	checkout := durable.NewWorkflow[string]("checkout")
	ship := durable.Child(checkout, "ship", shipping, label,
		func(ctx durable.Context, addr string) (string, error) { return strings.ToUpper(addr), nil })

	e := startExampleEngine(checkout) // registers shipping too
	defer e.Stop(context.Background())
	ctx := context.Background()

	res, err := checkout.Run(ctx, e, "tenant-1", "1 main st")
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := ship.Result(res)
	s, _ := res.Step("ship")
	child, _ := e.Get(ctx, s.ChildRunID)
	fmt.Println(out)
	fmt.Println(child.Workflow, child.Parent.RunID == res.ID, child.Parent.Step)
	// Output:
	// label for 1 MAIN ST
	// shipping true ship
}

// A map step runs its function on each item of a parent's list, one task
// per item; the join gets the outputs in the list's order.
func ExampleMap() {
	wf := durable.NewWorkflow[[]int]("squares")
	list := durable.Step(wf, "list", func(ctx durable.Context, xs []int) ([]int, error) { return xs, nil })
	squares := durable.Map(wf, "square", list, func(ctx durable.Context, x int) (int, error) { return x * x, nil })
	sum := durable.Step(wf, "sum", func(ctx durable.Context, _ []int) (int, error) {
		sq, _ := squares.Output(ctx)
		total := 0
		for _, v := range sq {
			total += v
		}
		return total, nil
	}, durable.After(squares))

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())

	res, err := wf.Run(context.Background(), e, "tenant-1", []int{1, 2, 3, 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	sq, _ := squares.Result(res)
	total, _ := sum.Result(res)
	fmt.Println(sq, total)
	// Output:
	// [1 4 9 16] 30
}

// MapInput maps over a list the run's input holds, without a step to
// return it: the invoice's lines are selected when the map step starts,
// which is with the run, as the step has no parent.
func ExampleMapInput() {
	type Line struct {
		SKU   string
		Qty   int
		Cents int
	}
	type Invoice struct {
		ID    string
		Lines []Line
	}

	wf := durable.NewWorkflow[Invoice]("price-invoice")
	priced := durable.MapInput(wf, "price", func(in Invoice) []Line { return in.Lines },
		func(ctx durable.Context, l Line) (int, error) { return l.Qty * l.Cents, nil },
		durable.WithRetry(durable.RetryPolicy{MaxRetries: 3}))
	total := durable.Step(wf, "total", func(ctx durable.Context, in Invoice) (string, error) {
		amounts, _ := priced.Output(ctx)
		sum := 0
		for _, a := range amounts {
			sum += a
		}
		return fmt.Sprintf("%s: %d lines, %d cents", in.ID, len(amounts), sum), nil
	}, durable.After(priced))

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())

	res, err := wf.Run(context.Background(), e, "tenant-1", Invoice{ID: "inv-7", Lines: []Line{
		{SKU: "pen", Qty: 3, Cents: 150}, {SKU: "pad", Qty: 1, Cents: 499},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	amounts, _ := priced.Result(res)
	summary, _ := total.Result(res)
	fmt.Println(amounts)
	fmt.Println(summary)
	// Output:
	// [450 499]
	// inv-7: 2 lines, 949 cents
}
