package durable_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
)

// A durable function is a workflow written as plain Go: each call to Do
// runs a step once and records its result, and loops and branches are the
// language's own. Run, Start, RunNoWait and the rest work as for any
// workflow; Output decodes what the function returned.
func ExampleNewFunction() {
	type Order struct {
		ID    string
		Lines []int // cents per line
	}
	checkout := durable.NewFunction("checkout", func(ctx durable.FuncContext, o Order) (string, error) {
		total := 0
		for _, cents := range o.Lines { // a loop: one step per line, each recorded
			v, err := durable.Do(ctx, "price-line", func(ctx durable.Context) (int, error) {
				return cents + cents/10, nil // with tax
			})
			if err != nil {
				return "", err
			}
			total += v
		}
		if total > 100_00 { // a branch on recorded results
			if _, err := durable.Do(ctx, "fraud-check", func(ctx durable.Context) (bool, error) { return true, nil }); err != nil {
				return "", err
			}
		}
		charge, err := durable.Do(ctx, "charge", func(ctx durable.Context) (string, error) {
			return fmt.Sprintf("ch_%s_%d", o.ID, total), nil
		})
		if err != nil {
			return "", err
		}
		return "charged " + charge, nil
	})

	e := startExampleEngine(checkout)
	defer e.Stop(context.Background())

	res, err := checkout.Run(context.Background(), e, "tenant-1", Order{ID: "o-1", Lines: []int{1000, 2500}})
	if err != nil {
		fmt.Println("run failed:", err)
		return
	}
	out, _ := checkout.Output(res)
	fmt.Println(res.Status, out)
	for _, s := range res.Steps { // the body, then one record per call
		fmt.Println(s.Name, s.State)
	}
	// Output:
	// COMPLETED charged ch_o-1_3850
	// main COMPLETED
	// price-line#0 COMPLETED
	// price-line#1 COMPLETED
	// charge#2 COMPLETED
}

// The README's first workflow as a durable function (README.md, "A first
// workflow"): the charge fails once and is retried after a durable
// backoff, and the function's output is what it returns. Keep the two
// alike.
func Example_function() {
	type Order struct {
		ID    string
		Cents int
	}
	checkout := durable.NewFunction("checkout", func(ctx durable.FuncContext, o Order) (string, error) {
		chargeID, err := durable.Do(ctx, "charge", func(ctx durable.Context) (string, error) {
			if ctx.Attempt() == 1 {
				return "", errors.New("payment provider timed out") // retried after a durable backoff
			}
			return "ch_" + o.ID, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 100 * time.Millisecond}))
		if err != nil {
			return "", err // a *durable.StepError: the retries are spent
		}
		return fmt.Sprintf("order %s: %d cents, charge %s", o.ID, o.Cents, chargeID), nil
	})

	ctx := context.Background()
	engine := startExampleEngine(checkout)
	defer engine.Stop(ctx)

	res, err := checkout.Run(ctx, engine, "tenant-42", Order{ID: "o-1", Cents: 4200})
	if err != nil {
		panic(err)
	}
	text, _ := checkout.Output(res)
	step, _ := res.Step("charge#0")
	fmt.Println(res.Status, "-", text)
	fmt.Println("charge took", step.Attempts, "attempts")
	// Output:
	// COMPLETED - order o-1: 4200 cents, charge ch_o-1
	// charge took 2 attempts
}

// SleepFor sleeps durably: the function holds no goroutine, worker slot
// or claim while it sleeps, and runs again from the start once the sleep
// is over, its earlier calls answering from their records (the step
// below runs once). Days pass the same way; durabletest runs such a
// function in virtual time.
func ExampleSleepFor() {
	ran := 0
	reminder := durable.NewFunction("reminder", func(ctx durable.FuncContext, email string) (string, error) {
		if _, err := durable.Do(ctx, "first-mail", func(ctx durable.Context) (string, error) {
			ran++
			return "sent", nil
		}); err != nil {
			return "", err
		}
		durable.SleepFor(ctx, "wait", 50*time.Millisecond) // 72*time.Hour in production
		return durable.Do(ctx, "reminder-mail", func(ctx durable.Context) (string, error) {
			return "reminded " + email, nil
		})
	})

	e := startExampleEngine(reminder)
	defer e.Stop(context.Background())

	res, err := reminder.Run(context.Background(), e, "tenant-1", "ada@example.com")
	if err != nil {
		fmt.Println("run failed:", err)
		return
	}
	out, _ := reminder.Output(res)
	fmt.Println(out)
	fmt.Println("first-mail ran", ran, "time; slept:", res.FinishedAt.Sub(res.CreatedAt) >= 50*time.Millisecond)
	// Output:
	// reminded ada@example.com
	// first-mail ran 1 time; slept: true
}

// AwaitSignal waits durably for a signal sent to the run by ID; a signal
// is kept with its run, so it may come before the function waits for it.
// AwaitEvent waits likewise for an event of the run's tenant, by key;
// past its WithWaitTimeout a wait returns an error matching
// ErrWaitTimeout, which the function handles like any other.
func ExampleAwaitSignal() {
	publish := durable.NewFunction("publish", func(ctx durable.FuncContext, doc string) (string, error) {
		by, err := durable.AwaitSignal[string](ctx, "approval", "approve", durable.WithWaitTimeout(48*time.Hour))
		if err != nil {
			return "", err
		}
		_, err = durable.AwaitEvent[string](ctx, "legal", "legal-ok:"+doc, durable.WithWaitTimeout(30*time.Millisecond))
		if errors.Is(err, durable.ErrWaitTimeout) {
			return doc + " approved by " + by + ", no word from legal", nil
		}
		if err != nil {
			return "", err
		}
		return doc + " approved by " + by + " and legal", nil
	})

	e := startExampleEngine(publish)
	defer e.Stop(context.Background())
	ctx := context.Background()

	id, _ := publish.RunNoWait(ctx, e, "tenant-1", "draft-7")
	fmt.Println(e.Signal(ctx, id, "approve", "bob"))
	res, _ := e.Wait(ctx, id)
	out, _ := publish.Output(res)
	fmt.Println(res.Status, out)
	// Output:
	// <nil>
	// COMPLETED draft-7 approved by bob, no word from legal
}

// Go starts a step without waiting for it: up to MaxParallel of them run
// at once in the body's process, each recorded as it completes. AwaitAll
// waits for them all (AwaitFirst, for the first); Get reads each result.
func ExampleGo() {
	type Quote struct {
		Carrier string
		Cents   int
	}
	shipping := durable.NewFunction("cheapest-shipping", func(ctx durable.FuncContext, parcel string) (Quote, error) {
		var quotes []*durable.Future[Quote]
		var all []durable.Awaitable
		for k, carrier := range []string{"post", "courier", "freight"} {
			f := durable.Go(ctx, "quote-"+carrier, func(ctx durable.Context) (Quote, error) {
				return Quote{Carrier: carrier, Cents: []int{700, 450, 900}[k]}, nil
			})
			quotes = append(quotes, f)
			all = append(all, f)
		}
		if err := durable.AwaitAll(ctx, all...); err != nil {
			return Quote{}, err
		}
		best := Quote{}
		for _, f := range quotes {
			q, err := f.Get(ctx)
			if err != nil {
				return Quote{}, err
			}
			if best.Carrier == "" || q.Cents < best.Cents {
				best = q
			}
		}
		return best, nil
	}, durable.MaxParallel(2))

	e := startExampleEngine(shipping)
	defer e.Stop(context.Background())

	res, err := shipping.Run(context.Background(), e, "tenant-1", "parcel-9")
	if err != nil {
		fmt.Println("run failed:", err)
		return
	}
	best, _ := shipping.Output(res)
	fmt.Printf("%s at %d cents\n", best.Carrier, best.Cents)
	// Output:
	// courier at 450 cents
}

// StartChild starts another function as a child run, which inherits the
// tenant and the priority; Get waits for its result durably (the parent
// holds nothing meanwhile). StartWorkflow does the same for a DAG
// workflow, whose result is one of its steps.
func ExampleStartChild() {
	label := durable.NewFunction("label", func(ctx durable.FuncContext, addr string) (string, error) {
		return durable.Do(ctx, "print", func(ctx durable.Context) (string, error) { return "label for " + addr, nil })
	})
	ship := durable.NewFunction("ship", func(ctx durable.FuncContext, addrs []string) ([]string, error) {
		var kids []*durable.Future[string]
		for _, a := range addrs {
			kids = append(kids, durable.StartChild(ctx, "label", label, a))
		}
		var out []string
		for _, k := range kids {
			l, err := k.Get(ctx)
			if err != nil {
				return nil, err
			}
			out = append(out, l)
		}
		return out, nil
	})

	e := startExampleEngine(ship, label) // register the child's function too
	defer e.Stop(context.Background())
	ctx := context.Background()

	res, err := ship.Run(ctx, e, "tenant-1", []string{"1 main st", "2 high st"})
	if err != nil {
		fmt.Println("run failed:", err)
		return
	}
	out, _ := ship.Output(res)
	fmt.Println(out)
	s, _ := res.Step("label#0")
	child, _ := e.Get(ctx, s.ChildRunID)
	fmt.Println(child.Workflow, child.Tenant, child.Parent.RunID == res.ID)
	// Output:
	// [label for 1 main st label for 2 high st]
	// label tenant-1 true
}

// DoTx runs a step inside the store's transaction that records its
// result: what it writes through tx and the result commit together, or
// neither does, so a step run twice (its worker died before the result
// was recorded) still writes once. With pgstore tx is a pgx.Tx; in memory
// it is a *memstore.Tx, whose OnCommit effects run when the result is
// recorded.
func ExampleDoTx() {
	var ledger []string
	pay := durable.NewFunction("pay", func(ctx durable.FuncContext, cents int) (string, error) {
		return durable.DoTx(ctx, "record-payment", func(ctx durable.Context, tx *memstore.Tx) (string, error) {
			entry := fmt.Sprintf("paid %d cents", cents)
			// With pgstore: tx.Exec(ctx, "INSERT INTO ledger (entry) VALUES ($1)", entry)
			tx.OnCommit(func() { ledger = append(ledger, entry) })
			return entry, nil
		})
	})

	e := startExampleEngine(pay)
	defer e.Stop(context.Background())

	res, err := pay.Run(context.Background(), e, "tenant-1", 1250)
	if err != nil {
		fmt.Println("run failed:", err)
		return
	}
	out, _ := pay.Output(res)
	fmt.Println(out)
	fmt.Println(ledger)
	// Output:
	// paid 1250 cents
	// [paid 1250 cents]
}

// Patched changes a function while runs of it are in flight. A run whose
// history went past the marker before it existed takes the old path
// (false), so its replay makes the calls it recorded; every other run
// takes the new one (true). Without Patched the old run would fail with a
// *NondeterminismError (or the function gets a new FuncVersion, and the
// old version is served until its runs are done).
func ExamplePatched() {
	ctx := context.Background()
	st := memstore.New() // pgstore in production: shared by both deploys

	// The first deploy: charge, then wait for the shipping signal.
	v1 := durable.NewFunction("order", func(ctx durable.FuncContext, id string) (string, error) {
		if _, err := durable.Do(ctx, "charge", func(ctx durable.Context) (string, error) { return "ok", nil }); err != nil {
			return "", err
		}
		by, err := durable.AwaitSignal[string](ctx, "shipped", "shipped")
		return id + " shipped by " + by, err
	})
	e1 := startOn(st, v1)
	old, _ := v1.RunNoWait(ctx, e1, "tenant-1", "o-old")
	waitState(e1, old, "main", durabletype.TaskWaiting) // waits for its signal
	_ = e1.Stop(ctx)

	// The next deploy adds a fraud check after the charge.
	v2 := durable.NewFunction("order", func(ctx durable.FuncContext, id string) (string, error) {
		if _, err := durable.Do(ctx, "charge", func(ctx durable.Context) (string, error) { return "ok", nil }); err != nil {
			return "", err
		}
		checked := ""
		if durable.Patched(ctx, "fraud-check") {
			if _, err := durable.Do(ctx, "fraud-check", func(ctx durable.Context) (bool, error) { return true, nil }); err != nil {
				return "", err
			}
			checked = ", fraud-checked"
		}
		by, err := durable.AwaitSignal[string](ctx, "shipped", "shipped")
		return id + " shipped by " + by + checked, err
	})
	e2 := startOn(st, v2)
	defer e2.Stop(ctx)
	young, _ := v2.RunNoWait(ctx, e2, "tenant-1", "o-new")
	for _, id := range []uuid.UUID{old, young} {
		_ = e2.Signal(ctx, id, "shipped", "post")
		res, _ := e2.Wait(ctx, id)
		out, _ := v2.Output(res)
		fmt.Println(res.Status, out)
	}
	// Output:
	// COMPLETED o-old shipped by post
	// COMPLETED o-new shipped by post, fraud-checked
}

// startOn starts an engine on st with wfs registered.
func startOn(st *memstore.Store, wfs ...durable.Definition) *durable.Engine {
	e, err := durable.New(st, durable.Config{Logger: quiet})
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

// waitState polls run id until its step is in state (examples have no
// synctest bubble to wait in).
func waitState(e *durable.Engine, id uuid.UUID, step string, state durabletype.TaskState) {
	for range 1000 {
		res, err := e.Get(context.Background(), id)
		if err != nil {
			panic(err)
		}
		if s, ok := res.Step(step); ok && s.State == state {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	panic(fmt.Sprintf("run %s: step %s never %s", id, step, state))
}
