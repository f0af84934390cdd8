// Cron schedules, declared with their workflow: every engine that registers
// the workflow creates its declared schedules when it starts (or updates
// them, when the declaration changed), and the leader fires each slot once
// as a normal run, however many engines run. Expressions take an optional
// seconds field, and a time zone.
//
//	go run ./examples/cron
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

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/examples/internal/example"
)

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "cron:", err)
		os.Exit(1)
	}
}

// reportWorkflow declares the workflow and its schedules, as each process
// of a deploy does.
func reportWorkflow() *durable.Workflow[string] {
	wf := durable.NewWorkflow[string]("report")
	durable.Step(wf, "build", func(ctx durable.Context, kind string) (string, error) {
		return kind + " report built", nil
	})
	// Weekdays at 09:00, Paris time.
	wf.DeclareSchedule("tenant-1", "weekday-report", "daily", "0 9 * * MON-FRI",
		durable.ScheduleOptions{TimeZone: "Europe/Paris"})
	// Every second (six fields: the first is the seconds), so that the
	// example sees it fire.
	wf.DeclareSchedule("tenant-1", "pulse", "pulse", "* * * * * *", durable.ScheduleOptions{})
	return wf
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintln(out, "running", st.Where())

	// Two engines, as two processes of one deploy: both declare the same
	// schedules, and the store holds each once.
	var engines []*durable.Engine
	for range 2 {
		engine, err := durable.New(st.Store, durable.Config{Logger: example.Logger()})
		if err != nil {
			return err
		}
		if err := engine.Register(reportWorkflow()); err != nil {
			return err
		}
		if err := engine.Start(ctx); err != nil {
			return err
		}
		defer engine.Stop(context.Background())
		engines = append(engines, engine)
	}
	engine := engines[0]

	page, err := engine.ListSchedules(ctx, durable.ScheduleListOptions{Tenant: "tenant-1"})
	if err != nil {
		return err
	}
	for _, sc := range page.Schedules {
		fmt.Fprintf(out, "schedule %-14s %-16q declared=%t\n", sc.Name, sc.Cron, sc.Declared)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		return err
	}
	weekday, err := engine.GetSchedule(ctx, "tenant-1", "weekday-report")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "weekday-report's next slot, in Paris:", weekday.NextAt.In(paris).Format("15:04"))

	// Watch the pulse fire two slots: the schedule records the last slot
	// fired and its run. (engine.PauseSchedule would stop it, until a
	// deploy changes its declaration or an operator resumes it.)
	pulse, err := engine.GetSchedule(ctx, "tenant-1", "pulse")
	if err != nil {
		return err
	}
	var slots []time.Time
	var last uuid.UUID
	for len(slots) < 2 {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
		sc, err := engine.GetSchedule(ctx, "tenant-1", "pulse")
		if err != nil {
			return err
		}
		if !sc.LastSlot.IsZero() && sc.LastSlot.After(pulse.LastSlot) {
			slots = append(slots, sc.LastSlot)
			pulse, last = sc, sc.LastRunID
		}
	}
	fmt.Fprintf(out, "the pulse fired two slots, a whole number of seconds apart: %t\n", slots[1].Sub(slots[0])%time.Second == 0)
	res, err := engine.Wait(ctx, last)
	if err != nil {
		return err
	}
	s, _ := res.Step("build")
	fmt.Fprintf(out, "the last slot's run: %s, tenant %s, build's output %s\n", res.Status, res.Tenant, s.Output)
	return nil
}
