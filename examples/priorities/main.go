// Priorities: WithPriority orders a tenant's ready steps, so that a run
// triggered with a higher priority is claimed before the tenant's backlog
// of normal ones. (It does not change the share of the workers each tenant
// gets: fairness between tenants holds whatever the priorities.)
//
//	go run ./examples/priorities
//
// With DURABLE_DATABASE_URL set (a PostgreSQL URL) it runs on PostgreSQL,
// in the schema durable_examples (or DURABLE_SCHEMA).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/examples/internal/example"
)

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "priorities:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	var mu sync.Mutex
	var order []string // the mails in the order they were sent

	wf := durable.NewWorkflow[string]("mail")
	durable.Step(wf, "send", func(ctx durable.Context, mail string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, mail)
		return "sent " + mail, nil
	})

	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	// One step at a time, one claimed at a time, so that the order shows.
	engine, err := durable.New(st.Store, durable.Config{Concurrency: 1, ClaimBatch: 1, Logger: example.Logger()})
	if err != nil {
		return err
	}
	if err := engine.Register(wf); err != nil {
		return err
	}
	fmt.Fprintln(out, "running", st.Where())

	// A backlog: runs triggered before the engine starts (as while every
	// worker is busy) wait in the store. The password reset comes last,
	// with a high priority: it takes the slot of newsletter-1, which takes
	// the reset's slot, so the newsletters go 2, 3, 4, 1.
	var ids []uuid.UUID
	for i := range 4 {
		id, err := wf.RunNoWait(ctx, engine, "tenant-1", fmt.Sprintf("newsletter-%d", i+1))
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	id, err := wf.RunNoWait(ctx, engine, "tenant-1", "password-reset", durable.WithPriority(durable.PriorityHigh))
	if err != nil {
		return err
	}
	ids = append(ids, id)

	if err := engine.Start(ctx); err != nil {
		return err
	}
	defer engine.Stop(context.Background())
	for _, id := range ids {
		if _, err := engine.Wait(ctx, id); err != nil {
			return err
		}
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintln(out, "sent first:", order[0])
	fmt.Fprintln(out, "then:", strings.Join(order[1:], ", "))
	return nil
}
