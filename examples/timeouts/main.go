// Timeouts, each a row with a due time that the leader fires:
//
//   - WithTimeout(d) on a step: an attempt running longer than d has its
//     context cancelled (cause durable.ErrStepTimeout) and fails, and is
//     retried like any failed attempt;
//
//   - WithQueueTimeout(d) on a step: a step that no worker takes within d
//     (no engine serves its workflow, or all are busy) fails the run;
//
//   - WithRunTimeout(d) on a trigger: a run not settled within d fails, and
//     what it waits for is cancelled.
//
//     go run ./examples/timeouts
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
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/examples/internal/example"
)

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "timeouts:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	// Why the charge's first attempt was cancelled: its goroutine may
	// report it after the run has already completed on the retry.
	causes := make(chan error, 1)

	// A step timeout: the provider hangs on the first attempt.
	charge := durable.NewWorkflow[string]("charge")
	durable.Step(charge, "call-provider", func(ctx durable.Context, order string) (string, error) {
		if ctx.Attempt() == 1 {
			<-ctx.Done() // hangs until the timeout cancels the attempt
			select {
			case causes <- context.Cause(ctx):
			default:
			}
			return "", context.Cause(ctx)
		}
		return "charged " + order, nil
	}, durable.WithTimeout(time.Second), // the store times an attempt out from its claim until its outcome is recorded
		durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: 50 * time.Millisecond}))

	// A queue timeout: no engine here serves "export".
	export := durable.NewWorkflow[string]("export")
	durable.Step(export, "write-file", func(ctx durable.Context, name string) (string, error) {
		return "wrote " + name, nil
	}, durable.WithQueueTimeout(200*time.Millisecond))

	// A run timeout: the approval never comes.
	approval := durable.NewWorkflow[string]("approval")
	durable.WaitForSignal[string](approval, "approved", "approve")

	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	engine, err := durable.New(st.Store, durable.Config{Logger: example.Logger()})
	if err != nil {
		return err
	}
	if err := engine.Register(charge, approval); err != nil { // not export
		return err
	}
	if err := engine.Start(ctx); err != nil {
		return err
	}
	defer engine.Stop(context.Background())
	fmt.Fprintln(out, "running", st.Where())

	res, err := charge.Run(ctx, engine, "tenant-1", "o-1")
	if err != nil {
		return err
	}
	s, _ := res.Step("call-provider")
	var cause error
	select {
	case cause = <-causes:
	case <-ctx.Done():
		return ctx.Err()
	}
	timedOut := errors.Is(cause, durable.ErrStepTimeout)
	fmt.Fprintf(out, "charge: %s after %d attempts, the first cancelled by its timeout: %t\n", res.Status, s.Attempts, timedOut)

	res, err = export.Run(ctx, engine, "tenant-1", "report.csv")
	var runErr *durable.RunError
	if !errors.As(err, &runErr) {
		return fmt.Errorf("export: got %v, want a *durable.RunError", err)
	}
	fmt.Fprintf(out, "export: %s at step %s: %s\n", runErr.Status, runErr.Step, runErr.Message)

	res, err = approval.Run(ctx, engine, "tenant-1", "doc-9", durable.WithRunTimeout(300*time.Millisecond))
	if !errors.As(err, &runErr) {
		return fmt.Errorf("approval: got %v, want a *durable.RunError", err)
	}
	s, _ = res.Step("approved")
	fmt.Fprintf(out, "approval: %s: %s (the wait is %s)\n", runErr.Status, runErr.Message, s.State)
	return nil
}
