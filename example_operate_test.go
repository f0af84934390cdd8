package durable_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// Replay runs a failed run again once the bug is fixed: the failed step and
// what follows it run afresh; the steps that completed keep their outputs
// and do not run again.
func ExampleEngine_Replay() {
	var fixed atomic.Bool
	var charges atomic.Int32
	wf := durable.NewWorkflow[string]("invoice")
	charge := durable.Step(wf, "charge", func(ctx durable.Context, order string) (string, error) {
		charges.Add(1)
		return "ch_" + order, nil
	})
	durable.Step(wf, "email", func(ctx durable.Context, order string) (string, error) {
		if !fixed.Load() {
			return "", durable.Terminal(errors.New("template missing"))
		}
		receipt, _ := charge.Output(ctx)
		return "receipt " + receipt + " mailed", nil
	}, durable.After(charge))

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	ctx := context.Background()
	res, _ := wf.Run(ctx, e, "tenant-1", "o-7")
	fmt.Println(res.Status)

	fixed.Store(true) // the fix is deployed
	if err := e.Replay(ctx, res.ID, durable.ReplayOptions{}); err != nil {
		panic(err)
	}
	res, _ = e.Wait(ctx, res.ID)
	email, _ := res.Step("email")
	fmt.Println(res.Status, string(email.Output))
	fmt.Println("charged", charges.Load(), "time")
	// Output:
	// FAILED
	// COMPLETED "receipt ch_o-7 mailed"
	// charged 1 time
}

// Cancel stops a run: steps waiting (here a sleep) never run, a running
// step's context is cancelled with cause ErrRunCancelled, and the run's
// error (Run's, or the result's Err) matches ErrRunCancelled.
func ExampleEngine_Cancel() {
	wf := durable.NewWorkflow[string]("trial")
	wait := durable.Sleep(wf, "trial-period", 14*24*time.Hour)
	durable.Step(wf, "bill", func(ctx durable.Context, customer string) (string, error) {
		return "billed " + customer, nil
	}, durable.After(wait))

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	ctx := context.Background()
	id, _ := wf.RunNoWait(ctx, e, "tenant-1", "ada")
	if err := e.Cancel(ctx, id, "customer left"); err != nil {
		panic(err)
	}
	res, _ := e.Wait(ctx, id)
	fmt.Println(res.Status, errors.Is(res.Err, durable.ErrRunCancelled))
	for _, s := range res.Steps {
		fmt.Println(s.Name, s.State)
	}
	fmt.Println(errors.Is(e.Cancel(ctx, id, "again"), durabletype.ErrRunSettled))
	// Output:
	// CANCELLED true
	// trial-period CANCELLED
	// bill CANCELLED
	// true
}

// ListRuns pages through runs newest first; Next continues the listing.
// Engine.Tenant gives one tenant's view, in which other tenants' runs do
// not exist.
func ExampleEngine_ListRuns() {
	wf := durable.NewWorkflow[int]("check")
	durable.Step(wf, "check", func(ctx durable.Context, n int) (int, error) {
		if n%2 == 1 {
			return 0, durable.Terminal(fmt.Errorf("%d is odd", n))
		}
		return n, nil
	})

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	ctx := context.Background()
	for n := range 5 {
		tenant := "acme"
		if n == 4 {
			tenant = "globex"
		}
		_, _ = wf.Run(ctx, e, tenant, n)
	}

	failed := durable.ListOptions{RunFilter: durable.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunFailed}}, Limit: 1}
	for {
		page, err := e.ListRuns(ctx, failed)
		if err != nil {
			panic(err)
		}
		for _, r := range page.Runs {
			fmt.Println(r.Tenant, r.Status, r.FailedStep, r.Error)
		}
		if page.Next == "" {
			break
		}
		failed.Cursor = page.Next
	}
	page, _ := e.Tenant("globex").ListRuns(ctx, durable.ListOptions{})
	fmt.Println("globex sees", len(page.Runs), "run")
	// Output:
	// acme FAILED check 3 is odd
	// acme FAILED check 1 is odd
	// globex sees 1 run
}
