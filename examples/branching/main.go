// Branching: complementary SkipIf conditions make an if/else in a DAG, a
// skipped step's descendants are skipped with it (the cascade), and a merge
// step after both branches runs after whichever one ran.
//
//	go run ./examples/branching
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
	"github.com/effectivelabs/durable/examples/internal/example"
)

// Refund is the input of a run.
type Refund struct {
	Order string
	Cents int
}

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "branching:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	// check decides the branch; its output is what SkipIf reads.
	wf := durable.NewWorkflow[Refund]("refund")
	check := durable.Step(wf, "check", func(ctx durable.Context, r Refund) (bool, error) {
		return r.Cents <= 100_00, nil // small refunds are automatic
	})

	// The automatic branch: runs when check says small.
	auto := durable.Step(wf, "auto-refund", func(ctx durable.Context, r Refund) (string, error) {
		return "refunded " + r.Order, nil
	}, durable.After(check), durable.SkipIf(check, func(small bool) bool { return !small }))

	// The manual branch, two steps long: when review is skipped, notify
	// (whose only parent is review) is skipped too, without a SkipIf.
	review := durable.Step(wf, "manual-review", func(ctx durable.Context, r Refund) (string, error) {
		return "review opened for " + r.Order, nil
	}, durable.After(check), durable.SkipIf(check, func(small bool) bool { return small }))
	notify := durable.Step(wf, "notify-reviewer", func(ctx durable.Context, r Refund) (string, error) {
		opened, _ := review.Output(ctx)
		return "mailed: " + opened, nil
	}, durable.After(review))

	// The merge: it runs if at least one parent completed, and sees the
	// skipped branch as absent (ok == false).
	report := durable.Step(wf, "report", func(ctx durable.Context, r Refund) (string, error) {
		if s, ok := auto.Output(ctx); ok {
			return s, nil
		}
		if s, ok := notify.Output(ctx); ok {
			return s, nil
		}
		return "", durable.Terminal(errors.New("neither branch ran"))
	}, durable.After(auto, notify))

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

	for _, r := range []Refund{{Order: "o-1", Cents: 25_00}, {Order: "o-2", Cents: 900_00}} {
		res, err := wf.Run(ctx, engine, "tenant-1", r)
		if err != nil {
			return err
		}
		text, _ := report.Result(res)
		fmt.Fprintf(out, "%s (%d cents): %s\n", r.Order, r.Cents, text)
		for _, s := range res.Steps {
			fmt.Fprintf(out, "  %-16s %s\n", s.Name, s.State)
		}
	}
	return nil
}
