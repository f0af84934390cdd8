// The test kit: durabletest runs workflows on the real engine, on the
// in-memory store, inside a testing/synctest bubble, so that time is
// virtual: a trial's 3 days and a retry's hour pass at once, and the test
// reads the state at exact instants. The example is main_test.go; this
// program runs the same workflow in real time, with short durations.
//
//	go test ./examples/testkit     # the kit, in virtual time
//	go run ./examples/testkit      # the workflow, with a 300ms "trial"
//
// With DURABLE_DATABASE_URL set (a PostgreSQL URL) the program runs on
// PostgreSQL, in the schema durable_examples (or DURABLE_SCHEMA).
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

// Trial is the input of a run.
type Trial struct{ Email string }

// Durations are the workflow's waits.
type Durations struct {
	Trial         time.Duration // the free trial
	ChargeBackoff time.Duration // before the charge's first retry
}

// Production are the durations the workflow is written for, and that the
// kit's test runs in virtual time.
var Production = Durations{Trial: 3 * 24 * time.Hour, ChargeBackoff: time.Hour}

// trialFlow is the workflow and the steps its callers read.
type trialFlow struct {
	wf      *durable.Workflow[Trial]
	trial   *durable.StepRef[struct{}]
	charge  *durable.StepRef[string]
	receipt *durable.StepRef[string]
}

// newTrialFlow declares the workflow: a welcome mail, the trial, then the
// first charge (the provider fails once) and its receipt.
func newTrialFlow(d Durations) trialFlow {
	wf := durable.NewWorkflow[Trial]("trial")
	welcome := durable.Step(wf, "send-welcome", func(ctx durable.Context, in Trial) (string, error) {
		return "welcome, " + in.Email, nil
	})
	trial := durable.Sleep(wf, "trial", d.Trial, durable.After(welcome))
	charge := durable.Step(wf, "charge", func(ctx durable.Context, in Trial) (string, error) {
		if ctx.Attempt() == 1 {
			return "", errors.New("payment provider timed out")
		}
		return "ch_" + in.Email, nil
	}, durable.After(trial), durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: d.ChargeBackoff}))
	receipt := durable.Step(wf, "send-receipt", func(ctx durable.Context, in Trial) (string, error) {
		id, _ := charge.Output(ctx)
		return "receipt for " + id, nil
	}, durable.After(charge))
	return trialFlow{wf: wf, trial: trial, charge: charge, receipt: receipt}
}

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "testkit:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	flow := newTrialFlow(Durations{Trial: 300 * time.Millisecond, ChargeBackoff: 100 * time.Millisecond})

	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	engine, err := durable.New(st.Store, durable.Config{Logger: example.Logger()})
	if err != nil {
		return err
	}
	if err := engine.Register(flow.wf); err != nil {
		return err
	}
	if err := engine.Start(ctx); err != nil {
		return err
	}
	defer engine.Stop(context.Background())
	fmt.Fprintln(out, "running", st.Where())

	res, err := flow.wf.Run(ctx, engine, "tenant-1", Trial{Email: "ada@example.com"})
	if err != nil {
		return err
	}
	text, _ := flow.receipt.Result(res)
	s, _ := res.Step(flow.charge.Name())
	fmt.Fprintf(out, "%s: %s (charge took %d attempts)\n", res.Status, text, s.Attempts)
	return nil
}
