package durable_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

// startExampleEngine returns a started engine on an in-memory store; in
// production pass a pgstore.Store instead.
func startExampleEngine(wfs ...durable.Definition) *durable.Engine {
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
	if err != nil {
		panic(err)
	}
	if err := e.Register(wfs...); err != nil {
		panic(err)
	}
	if err := e.Start(context.Background()); err != nil {
		panic(err)
	}
	return e
}

// A workflow is a DAG of typed steps. Each step gets the run's input and
// reads its parents' outputs through their typed references.
func Example() {
	type Signup struct{ Email string }

	wf := durable.NewWorkflow[Signup]("signup")
	account := durable.Step(wf, "create-account", func(ctx durable.Context, in Signup) (int, error) {
		return 42, nil // the new account's ID
	})
	welcome := durable.Step(wf, "send-welcome", func(ctx durable.Context, in Signup) (string, error) {
		id, ok := account.Output(ctx) // false only if create-account was skipped
		if !ok {
			return "", durable.Terminal(errors.New("no account"))
		}
		return fmt.Sprintf("welcome mail to %s for account %d", in.Email, id), nil
	}, durable.After(account))

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())

	res, err := wf.Run(context.Background(), e, "tenant-1", Signup{Email: "ada@example.com"})
	if err != nil {
		fmt.Println("run failed:", err)
		return
	}
	msg, _ := welcome.Result(res)
	fmt.Println(res.Status)
	fmt.Println(msg)
	// Output:
	// COMPLETED
	// welcome mail to ada@example.com for account 42
}

// Complementary skip conditions make a branch; a step after both branches
// runs after whichever one ran, and sees only its output.
func ExampleSkipIf() {
	wf := durable.NewWorkflow[int]("refund")
	check := durable.Step(wf, "check", func(ctx durable.Context, cents int) (bool, error) {
		return cents <= 100_00, nil // small refunds are automatic
	})
	auto := durable.Step(wf, "auto-refund", func(ctx durable.Context, cents int) (string, error) {
		return "refunded", nil
	}, durable.After(check), durable.SkipIf(check, func(small bool) bool { return !small }))
	manual := durable.Step(wf, "manual-review", func(ctx durable.Context, cents int) (string, error) {
		return "sent to review", nil
	}, durable.After(check), durable.SkipIf(check, func(small bool) bool { return small }))
	report := durable.Step(wf, "report", func(ctx durable.Context, cents int) (string, error) {
		if s, ok := auto.Output(ctx); ok {
			return s, nil
		}
		if s, ok := manual.Output(ctx); ok {
			return s, nil
		}
		return "", durable.Terminal(errors.New("neither branch ran"))
	}, durable.After(auto, manual))

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	for _, cents := range []int{25_00, 900_00} {
		res, _ := wf.Run(context.Background(), e, "tenant-1", cents)
		out, _ := report.Result(res)
		s, _ := res.Step("manual-review")
		fmt.Printf("%d: %s (manual-review %s)\n", cents, out, s.State)
	}
	// Output:
	// 2500: refunded (manual-review SKIPPED)
	// 90000: sent to review (manual-review COMPLETED)
}

// A sleep step waits durably: no worker is held, and the wait survives
// restarts.
func ExampleSleep() {
	wf := durable.NewWorkflow[string]("reminder")
	wait := durable.Sleep(wf, "wait", 20*time.Millisecond)
	durable.Step(wf, "remind", func(ctx durable.Context, who string) (string, error) {
		return "reminded " + who, nil
	}, durable.After(wait))

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	res, _ := wf.Run(context.Background(), e, "tenant-1", "ada")
	for _, s := range res.Steps {
		fmt.Println(s.Name, s.State)
	}
	// Output:
	// wait COMPLETED
	// remind COMPLETED
}

// Retries back off durably; a Terminal error stops them; the on-failure
// handler runs once after the run failed.
func ExampleWorkflow_OnFailure() {
	wf := durable.NewWorkflow[string]("charge")
	durable.Step(wf, "charge-card", func(ctx durable.Context, card string) (string, error) {
		if card == "expired" {
			return "", durable.Terminal(errors.New("card expired"))
		}
		return "charged", nil
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 10 * time.Millisecond}))
	wf.OnFailure(func(ctx durable.Context, card string, f durable.Failure) error {
		fmt.Printf("on-failure: step %s failed: %s\n", f.Step, f.Error)
		return nil
	})

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	res, err := wf.Run(context.Background(), e, "tenant-1", "expired")
	fmt.Println(errors.Is(err, durable.ErrRunFailed), res.Status)
	// Output:
	// on-failure: step charge-card failed: card expired
	// true FAILED
}

// RunNoWait starts a run and returns its ID; Wait (from any engine sharing
// the store) waits for it later.
func ExampleWorkflow_RunNoWait() {
	wf := durable.NewWorkflow[int]("square")
	sq := durable.Step(wf, "square", func(ctx durable.Context, n int) (int, error) { return n * n, nil })

	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	id, err := wf.RunNoWait(context.Background(), e, "tenant-1", 12)
	if err != nil {
		panic(err)
	}
	res, _ := e.Wait(context.Background(), id)
	n, _ := sq.Result(res)
	fmt.Println(n)
	// Output: 144
}
