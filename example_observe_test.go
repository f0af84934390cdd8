package durable_test

import (
	"context"
	"fmt"
	"sort"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

// With a MeterProvider the engine counts steps and runs through
// OpenTelemetry: here an in-memory reader (in production, the Prometheus
// or OTLP exporter). The counts are by workflow and step, never by run.
func ExampleConfig_metrics() {
	wf := durable.NewWorkflow[int]("double")
	durable.Step(wf, "times-two", func(ctx durable.Context, n int) (int, error) { return 2 * n, nil })

	reader := sdkmetric.NewManualReader()
	e, err := durable.New(memstore.New(), durable.Config{
		Logger:        quiet,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if err != nil {
		panic(err)
	}
	if err := e.Register(wf); err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		panic(err)
	}
	for n := range 3 {
		if _, err := wf.Run(ctx, e, "tenant-1", n); err != nil {
			panic(err)
		}
	}
	if err := e.Stop(ctx); err != nil {
		panic(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != durable.MetricStepsCompleted && m.Name != durable.MetricRunsSettled {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				lines = append(lines, fmt.Sprintf("%s %s = %d", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value))
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// durable.runs.settled durable.status=COMPLETED,durable.workflow=double = 3
	// durable.steps.completed durable.step=times-two,durable.workflow=double = 3
}

// Engine.Workers lists the engines sharing the store: what each serves,
// how busy it is, and which one leads. Unserved names the workflows that
// no live engine serves, whose runs would wait.
func ExampleEngine_Workers() {
	wf := durable.NewWorkflow[string]("greet")
	durable.Step(wf, "hello", func(ctx durable.Context, name string) (string, error) { return "hello " + name, nil })
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet, WorkerID: "worker-1", Concurrency: 8})
	if err != nil {
		panic(err)
	}
	if err := e.Register(wf); err != nil {
		panic(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		panic(err)
	}
	defer e.Stop(ctx)

	workers, err := e.Workers(ctx)
	if err != nil {
		panic(err)
	}
	for _, w := range workers {
		fmt.Println(w.ID, w.Live, w.Workflows, w.Concurrency)
	}
	unserved, err := e.Unserved(ctx, "greet", "shipping")
	if err != nil {
		panic(err)
	}
	fmt.Println("unserved:", unserved)
	// Output:
	// worker-1 true [greet] 8
	// unserved: [shipping]
}
