package durable_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
)

// BenchmarkEngine: b.N runs of a two-step workflow on the in-memory store,
// triggered 100 at a time and run by one engine: the cost of the engine's
// path (claim, execute, record) per run, without OpenTelemetry providers
// (none), with the API's no-op providers (noop, and either alone) and with
// the SDK's (sdk: a manual metric reader, every span sampled and dropped).
func BenchmarkEngine(b *testing.B) {
	for _, bc := range []struct {
		name string
		mp   metric.MeterProvider
		tp   trace.TracerProvider
	}{
		{"none", nil, nil},
		{"noop-metrics", metricnoop.NewMeterProvider(), nil},
		{"noop-traces", nil, tracenoop.NewTracerProvider()},
		{"noop", metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider()},
		{"sdk", sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())), sdktrace.NewTracerProvider()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchEngine(b, durable.Config{MeterProvider: bc.mp, TracerProvider: bc.tp})
		})
	}
}

func benchEngine(b *testing.B, cfg durable.Config) {
	cfg.Logger = quiet
	wf := durable.NewWorkflow[int]("bench")
	a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in + 1, nil })
	durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) { return in, nil }, durable.After(a))
	e, err := durable.New(memstore.New(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Register(wf); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stop, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_ = e.Stop(stop)
	}()
	const batch = 100
	triggers := make([]durable.Trigger[int], batch)
	for i := range triggers {
		triggers[i] = durable.Trigger[int]{Tenant: "t", Input: i}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		ids, err := wf.RunManyNoWait(ctx, e, triggers[:min(batch, b.N-done)])
		if err != nil {
			b.Fatal(err)
		}
		waitAll(b, e, ids)
	}
}

func waitAll(b *testing.B, e *durable.Engine, ids []uuid.UUID) {
	for _, id := range ids {
		res, err := e.Wait(context.Background(), id)
		if err != nil || res.Status != durabletype.RunCompleted {
			b.Fatalf("run %s: %v %v", id, res, err)
		}
	}
}
