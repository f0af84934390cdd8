// Signals: a WaitForSignal step waits for a signal sent to its run by ID
// (engine.Signal). Unlike an event, a signal is kept with its run until a
// step waits for it, so it may come first. Its payload is typed: one that
// does not fit is refused, and the step goes on waiting.
//
//	go run ./examples/signals
//
// With DURABLE_DATABASE_URL set (a PostgreSQL URL) it runs on PostgreSQL,
// in the schema durable_examples (or DURABLE_SCHEMA).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/examples/internal/example"
)

// Approval is the payload of the signal "approve".
type Approval struct {
	By      string
	Comment string
}

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "signals:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	wf := durable.NewWorkflow[string]("publish")
	draft := durable.Step(wf, "render-draft", func(ctx durable.Context, doc string) (string, error) {
		return doc + ".pdf", nil
	})
	approved := durable.WaitForSignal[Approval](wf, "approved", "approve", durable.After(draft))
	publish := durable.Step(wf, "publish", func(ctx durable.Context, doc string) (string, error) {
		file, _ := draft.Output(ctx)
		a, _ := approved.Output(ctx)
		return fmt.Sprintf("published %s, approved by %s (%q)", file, a.By, a.Comment), nil
	}, durable.After(draft, approved)) // both are read: both are parents

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

	// The run waits for its approval.
	id, err := wf.RunNoWait(ctx, engine, "tenant-1", "draft-7")
	if err != nil {
		return err
	}
	s, err := example.WaitStep(ctx, engine, id, approved.Name(), durabletype.TaskWaiting)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "draft-7: step %s is %s for the signal %q\n", s.Name, s.State, s.Signal)

	// A payload that is not an Approval is refused; the step waits on.
	err = engine.Signal(ctx, id, "approve", 42)
	fmt.Fprintln(out, "draft-7: a number as the approval is refused:", errors.Is(err, durable.ErrPayloadRefused))

	if err := engine.Signal(ctx, id, "approve", Approval{By: "bob", Comment: "ship it"}); err != nil {
		return err
	}
	res, err := engine.Wait(ctx, id)
	if err != nil {
		return err
	}
	text, _ := publish.Result(res)
	fmt.Fprintln(out, "draft-7:", res.Status, "-", text)

	// A signal sent before its step waits is kept with the run: here
	// right after the trigger, while render-draft may not have run yet.
	id, err = wf.RunNoWait(ctx, engine, "tenant-1", "draft-8")
	if err != nil {
		return err
	}
	if err := engine.Signal(ctx, id, "approve", Approval{By: "carol", Comment: "fine"}); err != nil {
		return err
	}
	res, err = engine.Wait(ctx, id)
	if err != nil {
		return err
	}
	text, _ = publish.Result(res)
	fmt.Fprintln(out, "draft-8:", res.Status, "-", text)
	return nil
}
