package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/demo"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/cliflag"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	window := fs.Duration("fraud-window", 2*time.Second, "length of the durable fraud-window sleep")
	var db cliflag.DB
	db.Register(fs, true)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: durable demo [flags]\n\n"+
			"Runs the order-processing workflow for one valid and one invalid order, on the\n"+
			"in-memory store or (with --database-url) on PostgreSQL, migrating the schema if\n"+
			"needed, and shows each step's state changes as they happen.\n"+
			"Exits 0 when both orders end as expected.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	if *window <= 0 {
		fmt.Fprintf(stderr, "durable demo: --fraud-window must be positive, got %s\n", *window)
		return exitUsage
	}
	if db.URL() == "" {
		return runDemo(ctx, memstore.New(), "the in-memory store", *window, stdout, stderr)
	}
	s, pool, err := db.OpenStore(ctx, 10, true)
	if err != nil {
		fmt.Fprintf(stderr, "durable demo: %v\n", err)
		return 1
	}
	defer pool.Close()
	return runDemo(ctx, s, fmt.Sprintf("PostgreSQL (schema %s)", db.Schema), *window, stdout, stderr)
}

type demoOrder struct {
	order demo.Order
	valid bool
	id    uuid.UUID
}

func runDemo(ctx context.Context, s store.Store, where string, window time.Duration, stdout, stderr io.Writer) int {
	flow := demo.New(window, nil)
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e, err := durable.New(s, durable.Config{Logger: logger, WorkerID: "demo"})
	if err == nil {
		err = e.Register(flow.Workflow)
	}
	if err == nil {
		err = e.Start(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "durable demo: %v\n", err)
		return 1
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = e.Stop(stopCtx)
	}()

	orders := []*demoOrder{
		{order: demo.Order{ID: "A-1001", Customer: "ada", Cents: 4200, Items: []string{"keyboard"}}, valid: true},
		{order: demo.Order{ID: "B-2002", Customer: "bob", Cents: 0, Items: []string{"mouse"}}, valid: false},
	}
	fmt.Fprintf(stdout, "durable demo: workflow %q on %s, fraud window %s\n\n", demo.WorkflowName, where, window)
	start := time.Now()
	for _, o := range orders {
		id, err := flow.Workflow.RunNoWait(ctx, e, o.order.Customer, o.order)
		if err != nil {
			fmt.Fprintf(stderr, "durable demo: starting order %s: %v\n", o.order.ID, err)
			return 1
		}
		o.id = id
		kind := "invalid"
		if o.valid {
			kind = "valid"
		}
		fmt.Fprintf(stdout, "  order %s (%s, %d cents) -> run %s\n", o.order.ID, kind, o.order.Cents, id)
	}
	fmt.Fprintf(stdout, "\n%9s  %-7s %-17s %s\n", "elapsed", "order", "step", "state")
	if err := watch(ctx, e, orders, start, stdout); err != nil {
		fmt.Fprintf(stderr, "durable demo: %v\n", err)
		return 1
	}

	ok := true
	for _, o := range orders {
		res, err := e.Get(ctx, o.id)
		if err != nil {
			fmt.Fprintf(stderr, "durable demo: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "\norder %s: %s in %.3fs\n", o.order.ID, res.Status, res.FinishedAt.Sub(res.CreatedAt).Seconds())
		for _, st := range res.Steps {
			attempts, output := "", ""
			if st.Attempts > 1 {
				attempts = fmt.Sprintf("%d attempts", st.Attempts)
			}
			if len(st.Output) > 0 && string(st.Output) != "null" {
				output = string(st.Output)
			}
			line := fmt.Sprintf("  %-17s %-10s %-11s %s", st.Name, st.State, attempts, output)
			fmt.Fprintln(stdout, strings.TrimRight(line, " "))
		}
		if problem := checkOrder(flow, o, res); problem != "" {
			ok = false
			fmt.Fprintf(stdout, "  UNEXPECTED: %s\n", problem)
		}
	}
	if !ok {
		fmt.Fprintln(stdout, "\ndemo: an order did not end as expected")
		return 1
	}
	fmt.Fprintln(stdout, "\ndemo: both orders ended as expected")
	return 0
}

// watch prints every run's events as they happen, until all runs settle.
func watch(ctx context.Context, e *durable.Engine, orders []*demoOrder, start time.Time, w io.Writer) error {
	seen := make([]int, len(orders))
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		type line struct {
			at   time.Time
			text string
		}
		var lines []line
		done := true
		for i, o := range orders {
			evs, err := e.Events(ctx, o.id)
			if err != nil {
				return err
			}
			for _, ev := range evs[seen[i]:] {
				lines = append(lines, line{ev.At, fmt.Sprintf("%8.3fs  %-7s %-17s %s",
					ev.At.Sub(start).Seconds(), o.order.ID, ev.Step, describe(ev, start))})
			}
			seen[i] = len(evs)
			res, err := e.Get(ctx, o.id)
			if err != nil {
				return err
			}
			done = done && res.Done()
		}
		slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
		for _, l := range lines {
			fmt.Fprintln(w, l.text)
		}
		if done {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func describe(ev durabletype.Event, start time.Time) string {
	switch ev.Type {
	case durabletype.EventStarted:
		return fmt.Sprintf("RUNNING    attempt %d", ev.Attempt)
	case durabletype.EventRetrying:
		return fmt.Sprintf("RETRYING   in %s after: %s", ev.DueAt.Sub(ev.At).Round(time.Millisecond), ev.Detail)
	case durabletype.EventSleeping:
		return fmt.Sprintf("SLEEPING   until %.3fs", ev.DueAt.Sub(start).Seconds())
	case durabletype.EventFailed, durabletype.EventSkipped, durabletype.EventCancelled, durabletype.EventQueued:
		if ev.Detail != "" {
			return fmt.Sprintf("%-10s %s", ev.Type, ev.Detail)
		}
	}
	return string(ev.Type)
}

func checkOrder(flow *demo.Flow, o *demoOrder, res *durable.RunResult) string {
	if res.Status != durabletype.RunCompleted {
		return fmt.Sprintf("status %s, want COMPLETED", res.Status)
	}
	out, err := flow.Finalize.Result(res)
	if err != nil {
		return err.Error()
	}
	if o.valid {
		if r, err := flow.Charge.Result(res); err != nil || r.Cents != o.order.Cents {
			return fmt.Sprintf("charge: %+v, %v", r, err)
		}
		if !strings.HasPrefix(out, "done: shipped") {
			return fmt.Sprintf("finalize said %q, want a shipment", out)
		}
		return ""
	}
	if _, err := flow.Charge.Result(res); err == nil {
		return "an invalid order was charged"
	}
	if !strings.Contains(out, "rejected") {
		return fmt.Sprintf("finalize said %q, want a rejection", out)
	}
	return ""
}
