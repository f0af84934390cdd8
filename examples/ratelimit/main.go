// Rate limits: WithRateLimit(key, n, per) starts at most n steps with the
// same key in each window of length per (windows aligned on the store's
// clock), across every engine sharing the store. The steps over the limit
// wait for a later window as rows with a due time, holding no worker.
// Here: at most 2 text messages per customer per 500ms.
//
//	go run ./examples/ratelimit
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
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/examples/internal/example"
)

// Message is the input of a run.
type Message struct {
	Customer string
	Text     string
}

// Limit and Window: at most Limit messages per customer per Window.
const (
	Limit  = 2
	Window = 500 * time.Millisecond
)

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "ratelimit:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	wf := durable.NewWorkflow[Message]("notify")
	durable.Step(wf, "send-sms", func(ctx durable.Context, m Message) (string, error) {
		return "sent " + m.Text, nil // call the SMS provider here
	}, durable.WithRateLimit(func(m Message) string { return m.Customer }, Limit, Window))

	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	engine, err := durable.New(st.Store, durable.Config{Logger: example.Logger()})
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

	// Six messages for one customer at once.
	var ids []uuid.UUID
	for i := range 6 {
		id, err := wf.RunNoWait(ctx, engine, "tenant-1", Message{Customer: "ada", Text: fmt.Sprintf("message %d", i+1)})
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}

	// Count the starts in each window (StartedAt is on the store's clock,
	// as the windows are), and the times the limit held a message back.
	perWindow := map[int64]int{}
	heldBack := 0
	for _, id := range ids {
		res, err := engine.Wait(ctx, id)
		if err != nil {
			return err
		}
		if res.Status != durabletype.RunCompleted {
			return fmt.Errorf("run %s: %s: %v", id, res.Status, res.Err)
		}
		s, _ := res.Step("send-sms")
		perWindow[s.StartedAt.UnixNano()/int64(Window)]++
		events, err := engine.Events(ctx, id)
		if err != nil {
			return err
		}
		for _, ev := range events {
			if ev.Type == durabletype.EventQueued && strings.HasPrefix(ev.Detail, "rate limit") {
				heldBack++
			}
		}
	}
	most := 0
	for _, n := range perWindow {
		most = max(most, n)
	}
	fmt.Fprintf(out, "%d messages sent, in %d windows of %s\n", len(ids), len(perWindow), Window)
	fmt.Fprintf(out, "most started in one window: %d (the limit is %d)\n", most, Limit)
	fmt.Fprintln(out, "messages held back for a later window:", heldBack > 0)
	return nil
}
