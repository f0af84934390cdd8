// Versions and deploys: every run is pinned to the version of its workflow
// it started with (by default a fingerprint of the definition), and only
// engines that registered that version run its steps, so a deploy that
// changes a workflow fails no run in flight. When the new definition only
// adds steps, Accepts(oldVersion) lets its engines move the old version's
// runs to it, and the runs go on with the new steps.
//
//	go run ./examples/versions
//
// With DURABLE_DATABASE_URL set (a PostgreSQL URL) it runs on PostgreSQL,
// in the schema durable_examples (or DURABLE_SCHEMA).
//
// Without Accepts, runs of a version no live worker serves wait, listed as
// unserved (Engine.Versions, `durable workflows`), until an engine that
// registered it comes back, or an operator moves them, checked first
// (Engine.UpgradeRuns, `durable runs upgrade --dry-run`).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/examples/internal/example"
)

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "versions:", err)
		os.Exit(1)
	}
}

// publishWorkflow declares the workflow as a deploy's code does: the
// second deploy adds a step after publish.
func publishWorkflow(deploy int) *durable.Workflow[string] {
	wf := durable.NewWorkflow[string]("publish")
	approved := durable.WaitForSignal[string](wf, "approved", "approve")
	publish := durable.Step(wf, "publish", func(ctx durable.Context, doc string) (string, error) {
		by, _ := approved.Output(ctx)
		return doc + " published, approved by " + by, nil
	}, durable.After(approved))
	if deploy >= 2 {
		durable.Step(wf, "notify-subscribers", func(ctx durable.Context, doc string) (string, error) {
			return "subscribers told of " + doc, nil
		}, durable.After(publish))
	}
	return wf
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintln(out, "running", st.Where())

	// Deploy 1 starts a run, which waits for its approval; then the
	// deploy is replaced.
	v1 := publishWorkflow(1)
	e1, err := start(ctx, st, v1)
	if err != nil {
		return err
	}
	id, err := v1.RunNoWait(ctx, e1, "tenant-1", "post-7")
	if err != nil {
		return err
	}
	if _, err := example.WaitStep(ctx, e1, id, "approved", durabletype.TaskWaiting); err != nil {
		return err
	}
	if err := e1.Stop(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "deploy 1: version %s; its run waits for approval\n", v1.Version())

	// Deploy 2 adds a step: a new version, which declares that it can
	// run the runs of the old one.
	v2 := publishWorkflow(2).Accepts(v1.Version())
	e2, err := start(ctx, st, v2)
	if err != nil {
		return err
	}
	defer e2.Stop(context.Background())
	fmt.Fprintf(out, "deploy 2: version %s, accepts %s\n", v2.Version(), v1.Version())
	if err := waitVersion(ctx, e2, id, v2.Version()); err != nil {
		return err
	}
	fmt.Fprintln(out, "the run moved to version", v2.Version())

	if err := e2.Signal(ctx, id, "approve", "ada"); err != nil {
		return err
	}
	res, err := e2.Wait(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "run", res.Status)
	for _, s := range res.Steps {
		fmt.Fprintf(out, "  %-18s %s %s\n", s.Name, s.State, s.Output)
	}
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

// waitVersion polls run id until it is pinned to version.
func waitVersion(ctx context.Context, e *durable.Engine, id uuid.UUID, version string) error {
	for {
		res, err := e.Get(ctx, id)
		if err != nil {
			return err
		}
		if res.Version == version {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("run %s is still at version %s: %w", id, res.Version, context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
}
