// The on-failure handler: wf.OnFailure sets a handler that runs once after
// a run has failed (a step's retries spent, or a Terminal error), with the
// run's input and the failure, to compensate or alert. When a step fails
// for good the run is FAILED at once: its pending steps are cancelled, and
// Run returns a *durable.RunError naming the step, once the handler ran.
//
//	go run ./examples/onfailure
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
	"sync"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/examples/internal/example"
)

// Import is the input of a run.
type Import struct {
	File string
}

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "onfailure:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	var mu sync.Mutex
	var alerts []string // what the handler sent to the on-call channel

	wf := durable.NewWorkflow[Import]("import")
	reserve := durable.Step(wf, "reserve-space", func(ctx durable.Context, in Import) (string, error) {
		return "bucket/" + in.File, nil
	})
	parse := durable.Step(wf, "parse", func(ctx durable.Context, in Import) (int, error) {
		if in.File == "broken.csv" {
			return 0, durable.Terminal(errors.New("line 3: 4 fields, want 5"))
		}
		return 120, nil // rows
	}, durable.After(reserve))
	durable.Step(wf, "load", func(ctx durable.Context, in Import) (string, error) {
		rows, _ := parse.Output(ctx)
		return fmt.Sprintf("loaded %d rows", rows), nil
	}, durable.After(parse))
	wf.OnFailure(func(ctx durable.Context, in Import, f durable.Failure) error {
		// Compensate: free what reserve-space took, and tell someone.
		mu.Lock()
		defer mu.Unlock()
		alerts = append(alerts, fmt.Sprintf("import of %s failed at %s (%s); freed bucket/%s", in.File, f.Step, f.Error, in.File))
		return nil
	})

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

	for _, file := range []string{"good.csv", "broken.csv"} {
		res, err := wf.Run(ctx, engine, "tenant-1", Import{File: file})
		var runErr *durable.RunError
		switch {
		case err == nil:
			fmt.Fprintln(out, file+":", res.Status)
		case errors.As(err, &runErr):
			fmt.Fprintf(out, "%s: %s at step %s: %s\n", file, runErr.Status, runErr.Step, runErr.Message)
		default:
			return err
		}
		for _, s := range res.Steps { // the handler, once it ran, comes last, as durabletype.OnFailureTask
			fmt.Fprintf(out, "  %-14s %s\n", s.Name, s.State)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(out, "alerts: %d\n", len(alerts))
	for _, a := range alerts {
		fmt.Fprintln(out, " ", a)
	}
	return nil
}
