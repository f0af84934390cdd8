// Sleep: a durable sleep step. While a run sleeps no worker, goroutine or
// timer of any process holds it: the sleep is a row with a due time. So
// the engine that started the run can stop (a deploy) and another one,
// started later on the same store, wakes the run when the time comes.
//
//	go run ./examples/sleep
//
// With DURABLE_DATABASE_URL set (a PostgreSQL URL) it runs on PostgreSQL,
// in the schema durable_examples (or DURABLE_SCHEMA).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/examples/internal/example"
)

// TrialLength is how long the trial lasts: 14*24*time.Hour in production,
// short here so that the example ends soon.
const TrialLength = 2 * time.Second

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "sleep:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	wf := durable.NewWorkflow[string]("trial")
	welcome := durable.Step(wf, "send-welcome", func(ctx durable.Context, email string) (string, error) {
		return "welcome mail to " + email, nil
	})
	trial := durable.Sleep(wf, "trial", TrialLength, durable.After(welcome))
	ending := durable.Step(wf, "send-trial-ended", func(ctx durable.Context, email string) (string, error) {
		return "trial-ended mail to " + email, nil
	}, durable.After(trial))

	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintln(out, "running", st.Where())

	// The first engine starts the run, and stops while the run sleeps.
	first, err := start(ctx, st, wf)
	if err != nil {
		return err
	}
	id, err := wf.RunNoWait(ctx, first, "tenant-1", "ada@example.com")
	if err != nil {
		return err
	}
	s, err := example.WaitStep(ctx, first, id, trial.Name(), durabletype.TaskSleeping)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "step %s is %s until its due time (%s after it began)\n", s.Name, s.State, s.DueAt.Sub(s.StartedAt).Round(time.Millisecond))
	if err := first.Stop(ctx); err != nil {
		return err
	}
	fmt.Fprintln(out, "the engine stopped; the run sleeps on in the store")

	// Another engine, as after a deploy, finishes the run.
	second, err := start(ctx, st, wf)
	if err != nil {
		return err
	}
	defer second.Stop(context.Background())
	res, err := second.Wait(ctx, id)
	if err != nil {
		return err
	}
	text, _ := ending.Result(res)
	fmt.Fprintln(out, res.Status+":", text)
	fmt.Fprintln(out, "slept at least the trial's length:", res.FinishedAt.Sub(res.CreatedAt) >= TrialLength)
	return nil
}

// start starts an engine that runs wf.
func start(ctx context.Context, st *example.Store, wf durable.Definition) (*durable.Engine, error) {
	engine, err := durable.New(st.Store, durable.Config{Logger: example.Logger()})
	if err != nil {
		return nil, err
	}
	if err := engine.Register(wf); err != nil {
		return nil, err
	}
	if err := engine.Start(ctx); err != nil {
		return nil, err
	}
	return engine, nil
}
