package durable_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/effectivelabs/durable"
)

// StartByName starts a registered workflow from encoded input, for callers
// that do not share its Go types (an HTTP API, a service in another
// language): the input is checked by decoding it into the workflow's input
// type. Workflows describes the registered DAGs.
func ExampleEngine_StartByName() {
	type Order struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	wf := durable.NewWorkflow[Order]("checkout")
	charge := durable.Step(wf, "charge", func(ctx durable.Context, o Order) (int, error) {
		return o.Amount, nil
	})
	durable.Step(wf, "receipt", func(ctx durable.Context, o Order) (string, error) {
		amount, _ := charge.Output(ctx)
		return fmt.Sprintf("order %s: charged %d", o.ID, amount), nil
	}, durable.After(charge))

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	ctx := context.Background()

	for _, w := range e.Workflows() {
		for _, s := range w.Steps {
			fmt.Println(w.Name, s.Name, s.Kind, s.Parents)
		}
	}
	st, err := e.StartByName(ctx, "checkout", "tenant-1", []byte(`{"id":"o-1","amount":42}`),
		durable.WithIdempotencyKey("o-1"))
	if err != nil {
		panic(err)
	}
	res, _ := e.Wait(ctx, st.RunID)
	receipt, _ := res.Step("receipt")
	fmt.Println(res.Status, string(receipt.Output))

	_, err = e.StartByName(ctx, "checkout", "tenant-1", []byte(`{"amount":"a lot"}`))
	fmt.Println(errors.Is(err, durable.ErrInvalidInput))
	_, err = e.StartByName(ctx, "refund", "tenant-1", []byte(`{}`))
	fmt.Println(errors.Is(err, durable.ErrWorkflowNotRegistered))
	// Output:
	// checkout charge step []
	// checkout receipt step [charge]
	// COMPLETED "order o-1: charged 42"
	// true
	// true
}
