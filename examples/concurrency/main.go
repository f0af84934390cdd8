// Concurrency keys: WithConcurrency(key, max) lets at most max steps with
// the same key run at once, across every engine sharing the store; the
// others wait in first-in first-out order, as rows, holding no worker.
// Here: one charge at a time per customer, while different customers'
// charges run side by side.
//
//	go run ./examples/concurrency
//
// With DURABLE_DATABASE_URL set (a PostgreSQL URL) it runs on PostgreSQL,
// in the schema durable_examples (or DURABLE_SCHEMA).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/examples/internal/example"
)

// Order is the input of a run.
type Order struct {
	Customer string
	Cents    int
}

// gauge counts the charges running at once, per customer.
type gauge struct {
	mu      sync.Mutex
	running map[string]int
	most    map[string]int
}

func (g *gauge) enter(customer string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running[customer]++
	g.most[customer] = max(g.most[customer], g.running[customer])
}

func (g *gauge) leave(customer string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running[customer]--
}

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "concurrency:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	g := &gauge{running: map[string]int{}, most: map[string]int{}}

	wf := durable.NewWorkflow[Order]("orders")
	durable.Step(wf, "charge", func(ctx durable.Context, o Order) (string, error) {
		g.enter(o.Customer)
		defer g.leave(o.Customer)
		time.Sleep(20 * time.Millisecond) // the payment provider's latency
		return fmt.Sprintf("charged %s %d cents", o.Customer, o.Cents), nil
	}, durable.WithConcurrency(func(o Order) string { return o.Customer }, 1))

	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	// The engine could run 10 steps at once; the key allows one per customer.
	engine, err := durable.New(st.Store, durable.Config{Concurrency: 10, Logger: example.Logger()})
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

	var ids []uuid.UUID
	for i := range 4 {
		for _, customer := range []string{"ada", "bob"} {
			id, err := wf.RunNoWait(ctx, engine, "tenant-1", Order{Customer: customer, Cents: 100 * (i + 1)})
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
	}
	completed := 0
	for _, id := range ids {
		res, err := engine.Wait(ctx, id)
		if err != nil {
			return err
		}
		if res.Status == durabletype.RunCompleted {
			completed++
		}
	}
	fmt.Fprintf(out, "%d of %d charges completed\n", completed, len(ids))
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, customer := range []string{"ada", "bob"} {
		fmt.Fprintf(out, "most charges of %s running at once: %d\n", customer, g.most[customer])
	}
	return nil
}
