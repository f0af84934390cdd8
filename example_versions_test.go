package durable_test

import (
	"fmt"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

// registered returns an engine (not started) that registered wfs.
func registered(wfs ...durable.Definition) *durable.Engine {
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
	if err != nil {
		panic(err)
	}
	if err := e.Register(wfs...); err != nil {
		panic(err)
	}
	return e
}

// invoiceV1 is the definition of workflow "invoice" that the last deploy
// ran: charge → email.
func invoiceV1() *durable.Workflow[string] {
	wf := durable.NewWorkflow[string]("invoice")
	charge := durable.Step(wf, "charge", func(ctx durable.Context, order string) (string, error) { return "ch_" + order, nil })
	durable.Step(wf, "email", func(ctx durable.Context, order string) (string, error) { return "sent", nil }, durable.After(charge))
	return wf
}

// A deploy adds a step to a workflow whose runs wait for days. The new
// definition accepts the runs of the old one: its workers move them to
// the new version and run the new step for them. Version returns the
// version id that `durable workflows` and `durable workers` show; Accepts
// takes such ids, AcceptsRunsOf the old definition itself.
func ExampleWorkflow_Accepts() {
	v1 := invoiceV1()

	v2 := durable.NewWorkflow[string]("invoice")
	charge := durable.Step(v2, "charge", func(ctx durable.Context, order string) (string, error) { return "ch_" + order, nil })
	email := durable.Step(v2, "email", func(ctx durable.Context, order string) (string, error) { return "sent", nil }, durable.After(charge))
	durable.Step(v2, "archive", func(ctx durable.Context, order string) (string, error) { return "archived", nil }, durable.After(email))
	v2.Accepts(v1.Version()) // or the id as `durable workflows` shows it: v2.Accepts("...")

	fmt.Println("v1:", v1.Version())
	fmt.Println("v2:", v2.Version())
	e := registered(v2)
	fmt.Println("v2 accepts:", e.Workflows()[0].Accepts)
	// Output:
	// v1: 640e7c6f126c
	// v2: 0dda945b0d5f
	// v2 accepts: [640e7c6f126c]
}

// AcceptsRunsOf takes the old definition, kept in code: it accepts its
// version and the version that releases of durable before fingerprint 2
// gave it, so that runs those releases started move too.
func ExampleWorkflow_AcceptsRunsOf() {
	v1 := invoiceV1()

	v2 := durable.NewWorkflow[string]("invoice")
	charge := durable.Step(v2, "charge", func(ctx durable.Context, order string) (string, error) { return "ch_" + order, nil })
	email := durable.Step(v2, "email", func(ctx durable.Context, order string) (string, error) { return "sent", nil }, durable.After(charge))
	durable.Step(v2, "archive", func(ctx durable.Context, order string) (string, error) { return "archived", nil }, durable.After(email))
	v2.AcceptsRunsOf(v1)

	e := registered(v2)
	fmt.Println(len(e.Workflows()[0].Accepts), "versions accepted")
	// Output: 2 versions accepted
}
