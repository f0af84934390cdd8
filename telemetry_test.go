package durable_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// stopNow stops an engine and fails the test if it cannot: the engine's
// last outcomes are counted once Stop returns.
func stopNow(t *testing.T, e *durable.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, e.Stop(ctx))
}

// collect reads every metric of a manual reader, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, durable.InstrumentationName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// attrKey names a data point by the values of its attributes, in
// attribute order, e.g. "wf/step".
func attrKey(set attribute.Set) string {
	k := ""
	for _, kv := range set.ToSlice() {
		if k != "" {
			k += "/"
		}
		k += kv.Value.Emit()
	}
	return k
}

// sums returns a counter's values by attributes.
func sums(t *testing.T, ms map[string]metricdata.Metrics, name string) map[string]int64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return map[string]int64{}
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a sum, not %T", name, m.Data)
	require.True(t, sum.IsMonotonic)
	out := map[string]int64{}
	for _, dp := range sum.DataPoints {
		for _, kv := range dp.Attributes.ToSlice() {
			require.NotEqual(t, attribute.Key(durable.AttrRunID), kv.Key, "no run IDs in metrics")
			require.NotEqual(t, attribute.Key(durable.AttrTenant), kv.Key, "no tenants in metrics unless asked")
		}
		out[attrKey(dp.Attributes)] += dp.Value
	}
	return out
}

// counts returns how many values a histogram recorded, by attributes.
func counts(t *testing.T, ms map[string]metricdata.Metrics, name string) map[string]uint64 {
	t.Helper()
	m, ok := ms[name]
	require.True(t, ok, "no metric %s", name)
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a histogram, not %T", name, m.Data)
	out := map[string]uint64{}
	for _, dp := range h.DataPoints {
		out[attrKey(dp.Attributes)] += dp.Count
	}
	return out
}

// TestMetrics: three runs of a two-step workflow whose second step fails
// once (on the first run) and then succeeds count 7 steps started, 6
// completed, 1 failed and retried, and 3 runs completed; each attempt's
// duration and queue wait is recorded once, and the store's calls by
// operation.
func TestMetrics(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		var failedOnce atomic.Bool
		wf := durable.NewWorkflow[int]("metered")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in + 1, nil })
		durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) {
			if failedOnce.CompareAndSwap(false, true) {
				return 0, errors.New("once")
			}
			return in, nil
		}, durable.After(a), durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: h.duration(time.Second, 10*time.Millisecond)}))
		e := h.launchOn(h.store, durable.Config{MeterProvider: mp}, wf)
		ctx := h.ctx(time.Minute)
		for i := range 3 {
			res, err := wf.Run(ctx, e, "tenant-x", i)
			require.NoError(t, err)
			require.Equal(t, durabletype.RunCompleted, res.Status)
		}
		stopNow(t, e)

		ms := collect(t, reader)
		require.Equal(t, map[string]int64{"a/metered": 3, "b/metered": 4}, sums(t, ms, durable.MetricStepsStarted))
		require.Equal(t, map[string]int64{"a/metered": 3, "b/metered": 3}, sums(t, ms, durable.MetricStepsCompleted))
		require.Equal(t, map[string]int64{"b/metered": 1}, sums(t, ms, durable.MetricStepsFailed))
		require.Equal(t, map[string]int64{"b/metered": 1}, sums(t, ms, durable.MetricStepsRetried))
		require.Equal(t, map[string]int64{"COMPLETED/metered": 3}, sums(t, ms, durable.MetricRunsSettled))
		require.Empty(t, sums(t, ms, durable.MetricStepsRescued))
		require.Empty(t, sums(t, ms, durable.MetricStepsReleased))
		require.Equal(t, map[string]uint64{"a/metered": 3, "b/metered": 4}, counts(t, ms, durable.MetricStepDuration))
		require.Equal(t, map[string]uint64{"a/metered": 3, "b/metered": 4}, counts(t, ms, durable.MetricQueueWait))
		ops := counts(t, ms, durable.MetricStoreDuration)
		require.Positive(t, ops["claim"])
		require.Positive(t, ops["finish"])
		require.Len(t, ops, 2)
	})
}

// TestMetricsTenant: with Config.MetricsTenant the tenant is an attribute.
func TestMetricsTenant(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		wf := durable.NewWorkflow[int]("by-tenant")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		e := h.launchOn(h.store, durable.Config{MeterProvider: mp, MetricsTenant: true}, wf)
		ctx := h.ctx(time.Minute)
		for _, tenant := range []string{"t1", "t2", "t2"} {
			_, err := wf.Run(ctx, e, tenant, 1)
			require.NoError(t, err)
		}
		stopNow(t, e)
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		got := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == durable.MetricRunsSettled {
					for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
						got[attrKey(dp.Attributes)] += dp.Value
					}
				}
			}
		}
		require.Equal(t, map[string]int64{"COMPLETED/t1/by-tenant": 1, "COMPLETED/t2/by-tenant": 2}, got)
	})
}

// TestMetricsRescued: a task claimed by a worker that dies is rescued by
// the leader, and counted once.
func TestMetricsRescued(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		wf := durable.NewWorkflow[int]("rescued")
		durable.Step(wf, "work", func(ctx durable.Context, in int) (int, error) { return in, nil },
			durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: h.duration(time.Second, 10*time.Millisecond)}))
		id, err := wf.RunNoWait(ctx, h.client(), "t", 1)
		require.NoError(t, err)
		// A worker claims the task and dies: it never heartbeats.
		claimed, err := h.store.ClaimTasks(ctx, &store.ClaimTasksParams{WorkerID: "ghost", Limit: 1, Workflows: []string{"rescued"}})
		require.NoError(t, err)
		require.Len(t, claimed, 1)

		e := h.launchOn(h.another(), durable.Config{MeterProvider: mp,
			HeartbeatInterval: h.duration(5*time.Second, 200*time.Millisecond), DeadAfter: h.duration(20*time.Second, time.Second)}, wf)
		res := h.wait(e, id, h.duration(time.Hour, 20*time.Second))
		require.Equal(t, durabletype.RunCompleted, res.Status)
		stopNow(t, e)
		ms := collect(t, reader)
		require.Equal(t, map[string]int64{"work/rescued": 1}, sums(t, ms, durable.MetricStepsRescued))
		require.Equal(t, map[string]int64{"work/rescued": 1}, sums(t, ms, durable.MetricStepsStarted), "the ghost's attempt was not this engine's")
		require.Equal(t, map[string]int64{"COMPLETED/rescued": 1}, sums(t, ms, durable.MetricRunsSettled))
	})
}

// TestMetricsQueueDepth: the leader samples the queue depth into a gauge.
func TestMetricsQueueDepth(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		wf := durable.NewWorkflow[int]("deep")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		for range 4 {
			_, err := wf.RunNoWait(ctx, h.client(), "t", 1, durable.WithStartAfter(time.Hour))
			require.NoError(t, err)
		}
		e := h.launchOn(h.store, durable.Config{MeterProvider: mp, QueueDepthInterval: h.duration(time.Second, 50*time.Millisecond)}, wf)
		depth := func() map[string]int64 {
			m, ok := collect(t, reader)[durable.MetricQueueDepth]
			if !ok {
				return nil
			}
			out := map[string]int64{}
			for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				out[attrKey(dp.Attributes)] = dp.Value
			}
			return out
		}
		want := map[string]int64{"running/deep": 0, "ready/deep": 0, "waiting/deep": 4}
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
			return len(depth()) == len(want)
		}, "the leader samples the queue depth")
		require.Equal(t, want, depth())
		stopNow(t, e)
		require.Empty(t, depth(), "an engine that no longer leads reports no depth")
	})
}

// TestTraces: the span active when a run is triggered is the parent of the
// span of every attempt of its steps, a retry included; a child run's
// steps are in the same trace, their parent the span of the step that
// started the child. A run triggered without a span stores no trace parent.
func TestTraces(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		var failedOnce atomic.Bool
		child := durable.NewWorkflow[int]("traced-child")
		x := durable.Step(child, "x", func(ctx durable.Context, in int) (int, error) { return in * 2, nil })
		wf := durable.NewWorkflow[int]("traced")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			if failedOnce.CompareAndSwap(false, true) {
				return 0, errors.New("once")
			}
			return in, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: h.duration(time.Second, 10*time.Millisecond)}))
		durable.Child(wf, "c", child, x, func(ctx durable.Context, in int) (int, error) { return in, nil }, durable.After(a))
		e := h.launchOn(h.store, durable.Config{TracerProvider: tp}, wf)
		ctx := h.ctx(time.Minute)

		tctx, root := tp.Tracer("test").Start(ctx, "trigger")
		id, err := wf.RunNoWait(tctx, e, "t", 3)
		root.End()
		require.NoError(t, err)
		res := h.wait(e, id, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		untraced, err := wf.RunNoWait(ctx, e, "t", 4)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, h.wait(e, untraced, time.Minute).Status)
		stopNow(t, e)

		run, err := h.store.GetRun(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "00-"+root.SpanContext().TraceID().String()+"-"+root.SpanContext().SpanID().String()+"-01", run.TraceParent)
		run, err = h.store.GetRun(ctx, untraced)
		require.NoError(t, err)
		require.Empty(t, run.TraceParent)

		traceID := root.SpanContext().TraceID()
		byName := map[string][]sdktrace.ReadOnlySpan{}
		others := 0
		for _, s := range rec.Ended() {
			if attrOf(s, durable.AttrRunID) == untraced.String() {
				require.False(t, s.Parent().IsValid(), "a run triggered without a span has root spans")
			}
			if s.SpanContext().TraceID() != traceID {
				others++ // the untraced run's, and its child's
				continue
			}
			byName[s.Name()] = append(byName[s.Name()], s)
		}
		require.Equal(t, 3, others)
		as := byName["durable.step traced/a"]
		require.Len(t, as, 2, "a span per attempt")
		for k, s := range as {
			require.Equal(t, traceID, s.SpanContext().TraceID())
			require.Equal(t, root.SpanContext().SpanID(), s.Parent().SpanID())
			require.Equal(t, id.String(), attrOf(s, durable.AttrRunID))
			require.Equal(t, "t", attrOf(s, durable.AttrTenant))
			require.Equal(t, "traced", attrOf(s, durable.AttrWorkflow))
			require.Equal(t, "a", attrOf(s, durable.AttrStep))
			require.Equal(t, int64(k+1), attrInt(s, durable.AttrAttempt))
		}
		require.Equal(t, codes.Error, as[0].Status().Code, "the first attempt failed")
		require.Equal(t, "once", as[0].Status().Description)
		require.Equal(t, "failed", attrOf(as[0], durable.AttrOutcome))
		require.Equal(t, codes.Ok, as[1].Status().Code)
		require.Equal(t, "completed", attrOf(as[1], durable.AttrOutcome))
		cs := byName["durable.step traced/c"]
		require.Len(t, cs, 1)
		require.Equal(t, root.SpanContext().SpanID(), cs[0].Parent().SpanID())
		xs := byName["durable.step traced-child/x"]
		require.Len(t, xs, 1)
		require.Equal(t, traceID, xs[0].SpanContext().TraceID(), "a child run's steps are in its parent's trace")
		require.Equal(t, cs[0].SpanContext().SpanID(), xs[0].Parent().SpanID(), "under the span of the step that started it")
		require.Len(t, byName, 4, "the trigger span and three steps")
	})
}

// TestTraceParentNeedsATracer: an engine without a TracerProvider stores no
// trace parent, whatever span is active when it triggers a run.
func TestTraceParentNeedsATracer(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		tp := sdktrace.NewTracerProvider()
		wf := durable.NewWorkflow[int]("untraced")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		ctx, span := tp.Tracer("test").Start(h.ctx(time.Minute), "trigger")
		defer span.End()
		require.True(t, trace.SpanContextFromContext(ctx).IsValid())
		id, err := wf.RunNoWait(ctx, h.client(), "t", 1)
		require.NoError(t, err)
		run, err := h.store.GetRun(ctx, id)
		require.NoError(t, err)
		require.Empty(t, run.TraceParent)
	})
}

func attrOf(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func attrInt(s sdktrace.ReadOnlySpan, key string) int64 {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsInt64()
		}
	}
	return -1
}

// TestTraceParentTriggers: every way to trigger a run stores the active
// span as its trace parent: StartMany (every run of the batch) and, on
// PostgreSQL, StartTx inside the caller's transaction.
func TestTraceParentTriggers(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		tp := sdktrace.NewTracerProvider()
		wf := durable.NewWorkflow[int]("triggers")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		e, err := durable.New(h.store, h.config(durable.Config{TracerProvider: tp}))
		require.NoError(t, err)
		ctx, span := tp.Tracer("test").Start(h.ctx(time.Minute), "trigger")
		defer span.End()
		want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
		traceParent := func(id uuid.UUID) string {
			run, err := h.store.GetRun(ctx, id)
			require.NoError(t, err)
			return run.TraceParent
		}

		st, err := wf.StartMany(ctx, e, []durable.Trigger[int]{{Tenant: "t", Input: 1}, {Tenant: "t", Input: 2}})
		require.NoError(t, err)
		for _, s := range st {
			require.Equal(t, want, traceParent(s.RunID))
		}
		require.NoError(t, e.Register(wf))
		byName, err := e.StartByName(ctx, "triggers", "t", []byte("4"))
		require.NoError(t, err)
		require.Equal(t, want, traceParent(byName.RunID), "StartByName (the HTTP API's trigger)")
		if h.pg == nil {
			return // no transactions in memory
		}
		tx, commit := h.tx()
		id, err := wf.RunNoWaitTx(ctx, e, tx, "t", 3)
		require.NoError(t, err)
		require.NoError(t, commit())
		require.Equal(t, want, traceParent(id))
	})
}

// settledRuns starts an engine of wfs with metrics, runs fn, waits until
// the engine counted the settled runs want (the leader counts what its
// passes settle once its store call returns, which may be after the run is
// seen settled), stops the engine and checks that it counted exactly want.
func settledRuns(t *testing.T, h *harness, want map[string]int64, fn func(e *durable.Engine), wfs ...durable.Definition) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	e := h.launchOn(h.store, durable.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}, wfs...)
	fn(e)
	total := func(m map[string]int64) (n int64) {
		for _, v := range m {
			n += v
		}
		return n
	}
	// Polled like harness.eventually, but the engine is stopped before
	// the counts are checked, whether or not they came.
	deadline := time.Now().Add(h.duration(time.Minute, 10*time.Second))
	for total(sums(t, collect(t, reader), durable.MetricRunsSettled)) < total(want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stopNow(t, e)
	require.Equal(t, want, sums(t, collect(t, reader), durable.MetricRunsSettled))
}

// waitsForEvent returns a workflow whose one step waits for the event
// named by the run's input.
func waitsForEvent(name string) *durable.Workflow[string] {
	wf := durable.NewWorkflow[string](name)
	durable.WaitForEvent[int](wf, "w", func(ctx durable.Context, key string) (string, error) { return key, nil })
	return wf
}

// TestMetricsSettledCancelled: a run cancelled is counted CANCELLED, once.
func TestMetricsSettledCancelled(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		wf := waitsForEvent("cancelled")
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		settledRuns(t, h, map[string]int64{"CANCELLED/cancelled": 1}, func(e *durable.Engine) {
			id, err := wf.RunNoWait(ctx, e, "t", "never")
			require.NoError(t, err)
			require.NoError(t, e.Cancel(ctx, id, "not wanted"))
			require.ErrorIs(t, e.Cancel(ctx, id, "again"), durabletype.ErrRunSettled)
			require.Equal(t, durabletype.RunCancelled, h.wait(e, id, time.Minute).Status)
		}, wf)
	})
}

// TestMetricsSettledDeadline: a run past its deadline is failed by the
// leader's timers, and counted FAILED by the leader.
func TestMetricsSettledDeadline(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[string]("late")
		durable.WaitForEvent[int](wf, "w", func(ctx durable.Context, key string) (string, error) { return key, nil },
			durable.WithWaitTimeout(time.Hour))
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		settledRuns(t, h, map[string]int64{"FAILED/late": 1}, func(e *durable.Engine) {
			id, err := wf.RunNoWait(ctx, e, "t", "never", durable.WithRunTimeout(h.duration(time.Minute, time.Second)))
			require.NoError(t, err)
			res := h.wait(e, id, h.duration(time.Hour, 30*time.Second))
			require.Equal(t, durabletype.RunFailed, res.Status)
		}, wf)
	})
}

// TestMetricsSettledByEvent: a run whose last step receives its event
// settles in the call that sends it, and is counted COMPLETED once, by
// the engine that sent it; sent inside a transaction (delivered after the
// commit, on PostgreSQL by the leader's inbox pass), likewise.
func TestMetricsSettledByEvent(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		wf := waitsForEvent("awaited")
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		settledRuns(t, h, map[string]int64{"COMPLETED/awaited": 2}, func(e *durable.Engine) {
			for k, key := range []string{"sent", "sent-in-tx"} {
				id, err := wf.RunNoWait(ctx, e, "t", key)
				require.NoError(t, err)
				h.eventually(h.duration(time.Minute, 10*time.Second), func() bool { return stepState(t, e, id, "w") == durabletype.TaskWaiting },
					"the step waits")
				if k == 0 {
					n, err := e.SendEvent(ctx, "t", key, 1)
					require.NoError(t, err)
					require.Equal(t, 1, n)
				} else {
					tx, commit := h.tx()
					n, err := e.SendEventTx(ctx, tx, "t", key, 2)
					require.NoError(t, err)
					require.Equal(t, 1, n)
					require.NoError(t, commit())
				}
				require.Equal(t, durabletype.RunCompleted, h.wait(e, id, h.duration(time.Hour, 30*time.Second)).Status)
			}
		}, wf)
	})
}

// TestMetricsSettledWithParent: cancelling a parent run cancels its child
// run; both are counted CANCELLED.
func TestMetricsSettledWithParent(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		child := durable.NewWorkflow[string]("kid")
		w := durable.WaitForEvent[int](child, "w", func(ctx durable.Context, key string) (string, error) { return key, nil })
		parent := durable.NewWorkflow[string]("parent")
		durable.Child(parent, "c", child, w, func(ctx durable.Context, in string) (string, error) { return in, nil })
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		settledRuns(t, h, map[string]int64{"CANCELLED/kid": 1, "CANCELLED/parent": 1}, func(e *durable.Engine) {
			id, err := parent.RunNoWait(ctx, e, "t", "never")
			require.NoError(t, err)
			h.eventually(h.duration(time.Minute, 10*time.Second), func() bool { return stepState(t, e, id, "c") == durabletype.TaskWaiting },
				"the child run starts")
			require.NoError(t, e.Cancel(ctx, id, "not wanted"))
			require.Equal(t, durabletype.RunCancelled, h.wait(e, id, time.Minute).Status)
			kids, err := e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Parent: id}})
			require.NoError(t, err)
			require.Len(t, kids.Runs, 1)
			require.Equal(t, durabletype.RunCancelled, h.wait(e, kids.Runs[0].ID, time.Minute).Status)
		}, parent)
	})
}

// TestMetricsSettledByChild: a child run's last outcome settles the child
// and, by its settlement, its parent: each counted once.
func TestMetricsSettledByChild(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		child := durable.NewWorkflow[int]("kid")
		x := durable.Step(child, "x", func(ctx durable.Context, in int) (int, error) { return in, nil })
		parent := durable.NewWorkflow[int]("parent")
		durable.Child(parent, "c", child, x, func(ctx durable.Context, in int) (int, error) { return in, nil })
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		settledRuns(t, h, map[string]int64{"COMPLETED/kid": 2, "COMPLETED/parent": 2}, func(e *durable.Engine) {
			for i := range 2 {
				res, err := parent.Run(ctx, e, "t", i)
				require.NoError(t, err)
				require.Equal(t, durabletype.RunCompleted, res.Status)
			}
		}, parent)
	})
}

// TestMetricsSkippedNotStarted: a step whose own skip condition fires on
// its worker is counted skipped, not started, and records no duration; a
// map step skipped on its worker because its list was skipped likewise.
// Steps skipped by the cascade
// are never claimed and count nothing. Only the step that ran is started.
func TestMetricsSkippedNotStarted(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		wf := durable.NewWorkflow[int]("skipper")
		check := durable.Step(wf, "check", func(ctx durable.Context, in int) (bool, error) { return true, nil })
		list := durable.Step(wf, "list", func(ctx durable.Context, in int) ([]int, error) { return []int{1, 2}, nil },
			durable.After(check), durable.SkipIf(check, func(skip bool) bool { return skip }))
		durable.Step(wf, "after-list", func(ctx durable.Context, in int) (int, error) { return in, nil }, durable.After(list))
		// A map step with a parent that completed is claimed, and skipped on
		// its worker because its list was skipped.
		durable.Map(wf, "each", list, func(ctx durable.Context, item int) (int, error) { return item, nil }, durable.After(check))
		e := h.launchOn(h.store, durable.Config{MeterProvider: mp}, wf)
		res, err := wf.Run(h.ctx(time.Minute), e, "t", 1)
		require.NoError(t, err)
		require.Equal(t, map[string]durabletype.TaskState{"check": durabletype.TaskCompleted, "list": durabletype.TaskSkipped,
			"after-list": durabletype.TaskSkipped, "each": durabletype.TaskSkipped}, states(res))
		stopNow(t, e)

		ms := collect(t, reader)
		require.Equal(t, map[string]int64{"check/skipper": 1}, sums(t, ms, durable.MetricStepsStarted),
			"a step skipped on its worker was not started")
		require.Equal(t, map[string]int64{"list/skipper": 1, "each/skipper": 1}, sums(t, ms, durable.MetricStepsSkipped))
		require.Equal(t, map[string]int64{"check/skipper": 1}, sums(t, ms, durable.MetricStepsCompleted))
		require.Equal(t, map[string]uint64{"check/skipper": 1}, counts(t, ms, durable.MetricStepDuration),
			"a skipped step did not run")
		require.Equal(t, map[string]uint64{"check/skipper": 1, "list/skipper": 1, "each/skipper": 1},
			counts(t, ms, durable.MetricQueueWait), "every claim waited in the queue")
	})
}

// TestFunctionTraces: each attempt of a function's inline call has a span
// of its own, a child of its body's span; a call answered from its record
// has none.
func TestFunctionTraces(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		var failedOnce atomic.Bool
		fn := durable.NewFunction("traced-fn", func(ctx durable.FuncContext, in int) (int, error) {
			a, err := durable.Do(ctx, "a", func(ctx durable.Context) (int, error) { return in, nil })
			if err != nil {
				return 0, err
			}
			return durable.Do(ctx, "b", func(ctx durable.Context) (int, error) {
				if failedOnce.CompareAndSwap(false, true) {
					return 0, errors.New("once")
				}
				return a + 1, nil
			}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: h.duration(time.Second, 10*time.Millisecond)}))
		})
		e := h.launchOn(h.store, durable.Config{TracerProvider: tp}, fn)
		ctx := h.ctx(time.Minute)
		res, err := fn.Run(ctx, e, "t", 3)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		stopNow(t, e)

		byName := map[string][]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			byName[s.Name()] = append(byName[s.Name()], s)
		}
		bodies := byName["durable.step traced-fn/main"]
		require.Len(t, bodies, 2, "one execution before the retry's wait, one after")
		require.Len(t, byName["durable.step traced-fn/a"], 1, "a call answered from its record has no span")
		bs := byName["durable.step traced-fn/b"]
		require.Len(t, bs, 2, "a span per attempt")
		require.Equal(t, codes.Error, bs[0].Status().Code)
		require.Equal(t, codes.Ok, bs[1].Status().Code)
		for k, s := range bs {
			require.Equal(t, bodies[k].SpanContext().SpanID(), s.Parent().SpanID(), "a child of its execution's span")
			require.EqualValues(t, k+1, attrInt(s, durable.AttrAttempt))
		}
	})
}
