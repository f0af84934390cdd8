package durable_test

import (
	"context"
	"fmt"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

// A schedule starts a run of a workflow at every slot of a cron
// expression, read in a time zone.
func ExampleWorkflow_Schedule() {
	ctx := context.Background()
	engine, err := durable.New(memstore.New(), durable.Config{})
	if err != nil {
		panic(err)
	}
	report := durable.NewWorkflow[string]("report")
	durable.Step(report, "build", func(ctx durable.Context, kind string) (string, error) {
		return "report: " + kind, nil
	})
	if err := engine.Register(report); err != nil {
		panic(err)
	}

	sc, err := report.Schedule(ctx, engine, "tenant-42", "weekday-report", "daily",
		"0 9 * * MON-FRI", durable.ScheduleOptions{TimeZone: "Europe/Paris"})
	if err != nil {
		panic(err)
	}
	fmt.Println(sc.Name, sc.Cron, sc.TimeZone, sc.NextAt.In(must(sc.TimeZone)).Format("15:04"))

	_, err = report.Schedule(ctx, engine, "tenant-42", "weekday-report", "daily", "@hourly", durable.ScheduleOptions{})
	fmt.Println(err)

	paused, _ := engine.PauseSchedule(ctx, "tenant-42", "weekday-report")
	fmt.Println("paused:", paused.Paused)
	// Output:
	// weekday-report 0 9 * * MON-FRI Europe/Paris 09:00
	// durable: creating schedule: memstore: schedule tenant-42/weekday-report: durable: schedule already exists
	// paused: true
}

func must(zone string) *time.Location {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		panic(err)
	}
	return loc
}

// Schedules declared with their workflow are created at every engine start,
// and updated when their declaration changes: no boot-time CreateSchedule,
// no ErrScheduleExists to swallow, and a changed expression reaches the
// store with the deploy. A process started again with the same code writes
// nothing.
func ExampleWorkflow_DeclareSchedule() {
	ctx := context.Background()
	st := memstore.New() // pgstore in production: shared by every process
	build := func(cron string) *durable.Workflow[string] {
		report := durable.NewWorkflow[string]("report")
		durable.Step(report, "build", func(ctx durable.Context, kind string) (string, error) {
			return "report: " + kind, nil
		})
		report.DeclareSchedule("tenant-42", "weekday-report", "daily", cron,
			durable.ScheduleOptions{TimeZone: "Europe/Paris"})
		return report
	}
	start := func(cron string) *durable.Engine {
		engine, err := durable.New(st, durable.Config{Logger: quiet})
		if err != nil {
			panic(err)
		}
		if err := engine.Register(build(cron)); err != nil {
			panic(err)
		}
		if err := engine.Start(ctx); err != nil {
			panic(err)
		}
		return engine
	}

	first := start("0 9 * * MON-FRI")
	sc, _ := first.GetSchedule(ctx, "tenant-42", "weekday-report")
	fmt.Println(sc.Cron, sc.Declared)
	_ = first.Stop(ctx)

	// The next deploy moves the report to 8:00.
	second := start("0 8 * * MON-FRI")
	again, _ := second.GetSchedule(ctx, "tenant-42", "weekday-report")
	fmt.Println(again.Cron, again.ID == sc.ID)
	_ = second.Stop(ctx)
	// Output:
	// 0 9 * * MON-FRI true
	// 0 8 * * MON-FRI true
}
