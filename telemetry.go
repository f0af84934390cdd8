package durable

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// InstrumentationName names the engine's meter and tracer.
const InstrumentationName = "github.com/effectivelabs/durable"

// Names of the engine's metrics. The Prometheus exporter turns the dots
// into underscores and adds "_total" to counters and the unit to
// histograms ("durable_steps_completed_total",
// "durable_step_duration_seconds").
const (
	MetricStepsStarted   = "durable.steps.started"
	MetricStepsCompleted = "durable.steps.completed"
	MetricStepsFailed    = "durable.steps.failed"
	MetricStepsRetried   = "durable.steps.retried"
	MetricStepsSkipped   = "durable.steps.skipped"
	MetricStepsReleased  = "durable.steps.released"
	MetricStepsRescued   = "durable.steps.rescued"
	MetricRunsSettled    = "durable.runs.settled"
	MetricStepDuration   = "durable.step.duration"
	MetricQueueWait      = "durable.queue.wait"
	MetricStoreDuration  = "durable.store.duration"
	MetricQueueDepth     = "durable.queue.depth"
	// The storage of the store's tables (Engine.Storage), by table
	// (AttrTable), reported by the leader when the metrics are collected:
	// "durable_table_live_rows", "durable_table_dead_rows",
	// "durable_table_size_bytes" and "durable_table_attention" (1 for a
	// table that needs attention, 0 for the others).
	MetricTableLiveRows  = "durable.table.live_rows"
	MetricTableDeadRows  = "durable.table.dead_rows"
	MetricTableSize      = "durable.table.size"
	MetricTableAttention = "durable.table.attention"
)

// Attributes of the engine's metrics and spans.
const (
	AttrWorkflow = "durable.workflow"
	AttrStep     = "durable.step"
	AttrTenant   = "durable.tenant"
	AttrStatus   = "durable.status"
	AttrOp       = "durable.op"
	AttrState    = "durable.state"
	AttrRunID    = "durable.run_id"
	AttrAttempt  = "durable.attempt"
	AttrOutcome  = "durable.outcome"
	AttrTable    = "durable.table"
)

// telemetry is what an engine reports through OpenTelemetry. Either part is
// nil when its provider is not configured, and then costs one nil test.
type telemetry struct {
	m       *meters
	storage *storageMeters // nil without metrics, or on a store without tables
	tracer  trace.Tracer
	names   *sync.Map // span names by workflow and step
}

func newTelemetry(cfg *Config) (telemetry, error) {
	var t telemetry
	if cfg.TracerProvider != nil {
		t.tracer = cfg.TracerProvider.Tracer(InstrumentationName)
		t.names = &sync.Map{}
	}
	if cfg.MeterProvider != nil {
		m, err := newMeters(cfg.MeterProvider.Meter(InstrumentationName), cfg.MetricsTenant)
		if err != nil {
			return t, fmt.Errorf("durable: metrics: %w", err)
		}
		t.m = m
	}
	return t, nil
}

// meters holds the instruments and the attribute sets measured with them,
// made once per workflow and step (and tenant, with Config.MetricsTenant),
// so that a measurement allocates nothing.
type meters struct {
	started, completed, failed, retried, skipped, released, rescued metric.Int64Counter
	settled                                                         metric.Int64Counter
	stepDuration, queueWait, storeDuration                          metric.Float64Histogram
	depth                                                           metric.Int64ObservableGauge
	tenant                                                          bool

	mu    sync.RWMutex
	attrs map[attrKey]*attrs

	claimOp, finishOp *attrs

	depthMu sync.Mutex
	depths  []depthSample
}

// attrKey names an attribute set: of a step (kind 's': a is the workflow,
// b the step) or of a settled run (kind 'r': b is the status).
type attrKey struct {
	kind         byte
	a, b, tenant string
}

// attrs is one attribute set, as the options of a measurement.
type attrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

func newAttrs(kvs ...attribute.KeyValue) *attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return &attrs{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// depthSample is one point of the queue depth gauge.
type depthSample struct {
	n     int64
	attrs *attrs
}

// durationBuckets are the bounds, in seconds, of the duration histograms:
// from a millisecond to an hour.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

func newMeters(mt metric.Meter, tenant bool) (*meters, error) {
	m := &meters{tenant: tenant, attrs: map[attrKey]*attrs{}}
	var err error
	counter := func(name, desc string) metric.Int64Counter {
		c, e := mt.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{step}"))
		if err == nil {
			err = e
		}
		return c
	}
	m.started = counter(MetricStepsStarted, "Step attempts started (tasks claimed, except those skipped by their skip conditions).")
	m.completed = counter(MetricStepsCompleted, "Step attempts that completed, as recorded.")
	m.failed = counter(MetricStepsFailed, "Step attempts that failed, as recorded (retried or not).")
	m.retried = counter(MetricStepsRetried, "Failed step attempts that will be attempted again.")
	m.skipped = counter(MetricStepsSkipped, "Steps skipped by their skip conditions.")
	m.released = counter(MetricStepsReleased, "Step attempts given back to the queue by a stopping engine.")
	m.rescued = counter(MetricStepsRescued, "Step attempts of dead workers rescued by the leader.")
	if m.settled, err = mt.Int64Counter(MetricRunsSettled, metric.WithDescription("Runs settled by the store calls this engine made, by status."),
		metric.WithUnit("{run}")); err != nil {
		return nil, err
	}
	hist := func(name, desc string) metric.Float64Histogram {
		h, e := mt.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"),
			metric.WithExplicitBucketBoundaries(durationBuckets...))
		if err == nil {
			err = e
		}
		return h
	}
	m.stepDuration = hist(MetricStepDuration, "How long step attempts ran.")
	m.queueWait = hist(MetricQueueWait, "How long tasks waited ready in the queue before a claim took them.")
	m.storeDuration = hist(MetricStoreDuration, "How long the store's claim and finish calls took.")
	if err != nil {
		return nil, err
	}
	m.claimOp = newAttrs(attribute.String(AttrOp, "claim"))
	m.finishOp = newAttrs(attribute.String(AttrOp, "finish"))
	m.depth, err = mt.Int64ObservableGauge(MetricQueueDepth, metric.WithUnit("{task}"),
		metric.WithDescription("Unfinished tasks by workflow and state (ready, waiting, running), sampled by the leader."),
		metric.WithInt64Callback(m.observeDepth))
	if err != nil {
		return nil, err
	}
	return m, nil
}

// step returns the attribute set of a step of a workflow (and tenant).
func (m *meters) step(workflow, step, tenant string) *attrs {
	if !m.tenant {
		tenant = ""
	}
	k := attrKey{kind: 's', a: workflow, b: step, tenant: tenant}
	return m.lookup(k, func() *attrs {
		kvs := []attribute.KeyValue{attribute.String(AttrWorkflow, workflow), attribute.String(AttrStep, step)}
		if m.tenant {
			kvs = append(kvs, attribute.String(AttrTenant, tenant))
		}
		return newAttrs(kvs...)
	})
}

// run returns the attribute set of the runs of a workflow (and tenant)
// that settled with status.
func (m *meters) run(workflow string, status durabletype.RunStatus, tenant string) *attrs {
	if !m.tenant {
		tenant = ""
	}
	k := attrKey{kind: 'r', a: workflow, b: string(status), tenant: tenant}
	return m.lookup(k, func() *attrs {
		kvs := []attribute.KeyValue{attribute.String(AttrWorkflow, workflow), attribute.String(AttrStatus, string(status))}
		if m.tenant {
			kvs = append(kvs, attribute.String(AttrTenant, tenant))
		}
		return newAttrs(kvs...)
	})
}

func (m *meters) lookup(k attrKey, build func() *attrs) *attrs {
	m.mu.RLock()
	a := m.attrs[k]
	m.mu.RUnlock()
	if a != nil {
		return a
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a = m.attrs[k]; a == nil {
		a = build()
		m.attrs[k] = a
	}
	return a
}

// claimed returns the attribute set of a claimed task: its step's, or for a
// map step's item, its map step's (item names are unbounded).
func (m *meters) claimed(c *store.ClaimedTask) *attrs {
	step := c.Step
	if c.Kind == durabletype.KindItem {
		step = c.Map
	}
	return m.step(c.Workflow, step, c.Tenant)
}

// recordClaims records how long a claim call took, and how long the tasks
// it took (none if it failed) waited. They are counted started when they
// begin (startStep): a step skipped on its worker is not.
func (m *meters) recordClaims(ctx context.Context, claimed []*store.ClaimedTask, took time.Duration) {
	m.storeDuration.Record(ctx, took.Seconds(), m.claimOp.rec...)
	for _, c := range claimed {
		a := m.claimed(c)
		if !c.ReadyAt.IsZero() && !c.ClaimedAt.IsZero() {
			m.queueWait.Record(ctx, max(c.ClaimedAt.Sub(c.ReadyAt), 0).Seconds(), a.rec...)
		}
	}
}

// recordFinish counts the outcomes of a batch the store took; meta[i]
// describes batch[i].
func (m *meters) recordFinish(ctx context.Context, batch []store.Outcome, meta []outcomeMeta, res []store.FinishResult) {
	for i, r := range res {
		if r.Status != store.FinishApplied || i >= len(meta) || meta[i].attrs == nil {
			continue
		}
		a := meta[i].attrs
		switch batch[i].Kind {
		case store.OutcomeComplete:
			m.completed.Add(ctx, 1, a.add...)
		case store.OutcomeFail:
			m.failed.Add(ctx, 1, a.add...)
			if r.Retried {
				m.retried.Add(ctx, 1, a.add...)
			}
		case store.OutcomeSkip:
			m.skipped.Add(ctx, 1, a.add...)
		case store.OutcomeRelease:
			m.released.Add(ctx, 1, a.add...)
		}
		if r.Settled != "" {
			m.settled.Add(ctx, 1, m.run(meta[i].workflow, r.Settled, meta[i].tenant).add...)
		}
	}
	if len(res) > 0 {
		m.recordSettled(ctx, res[0].Cascade)
	}
}

// recordSettled counts the runs a store call settled.
func (m *meters) recordSettled(ctx context.Context, runs []store.SettledRun) {
	for k := range runs {
		r := &runs[k]
		m.settled.Add(ctx, 1, m.run(r.Workflow, r.Status, r.Tenant).add...)
	}
}

// countSettled counts the runs a store call this engine made settled
// (store.SettledRun): each settlement is reported by the one call that
// recorded it, so each is counted once, by the engine that made the call.
func (e *Engine) countSettled(ctx context.Context, runs []store.SettledRun) {
	if e.tel.m != nil && len(runs) > 0 {
		e.tel.m.recordSettled(ctx, runs)
	}
}

// recordRescued counts the tasks a rescue pass rescued. The store does not
// say their tenants: with MetricsTenant their tenant attribute is empty.
func (m *meters) recordRescued(ctx context.Context, res *store.RescueTasksResult) {
	for k, ref := range res.Rescued {
		if k >= len(res.Workflows) {
			return
		}
		step := ref.Step
		if name, _, ok := dag.ParseItem(step); ok {
			step = name
		}
		m.rescued.Add(ctx, 1, m.step(res.Workflows[k], step, "").add...)
	}
}

// depthStates are the states of the queue depth gauge.
var depthStates = [...]string{"ready", "waiting", "running"}

// setDepth replaces the queue depth the gauge reports with st's, with
// zeros for the workflows this engine serves that st does not name (nil:
// nothing, when this engine stops leading).
func (m *meters) setDepth(st *durabletype.Stats, workflows []string) {
	type key struct{ workflow, tenant, state string }
	sums := map[key]int64{}
	var order []key
	if st != nil && !m.tenant {
		for _, wf := range workflows {
			for _, state := range depthStates {
				k := key{wf, "", state}
				sums[k] = 0
				order = append(order, k)
			}
		}
	}
	if st != nil {
		for _, q := range st.Queues {
			tenant := ""
			if m.tenant {
				tenant = q.Tenant
			}
			for _, s := range [...]struct {
				state string
				n     int
			}{{"ready", q.Ready}, {"waiting", q.Waiting}, {"running", q.Running}} {
				k := key{q.Workflow, tenant, s.state}
				if _, ok := sums[k]; !ok {
					order = append(order, k)
				}
				sums[k] += int64(s.n)
			}
		}
	}
	samples := make([]depthSample, 0, len(order))
	for _, k := range order {
		kvs := []attribute.KeyValue{attribute.String(AttrWorkflow, k.workflow), attribute.String(AttrState, k.state)}
		if m.tenant {
			kvs = append(kvs, attribute.String(AttrTenant, k.tenant))
		}
		samples = append(samples, depthSample{n: sums[k], attrs: newAttrs(kvs...)})
	}
	m.depthMu.Lock()
	m.depths = samples
	m.depthMu.Unlock()
}

// observeDepth reports the last sample of the queue depth: no query per
// scrape.
func (m *meters) observeDepth(_ context.Context, o metric.Int64Observer) error {
	m.depthMu.Lock()
	defer m.depthMu.Unlock()
	for _, s := range m.depths {
		o.Observe(s.n, s.attrs.obs...)
	}
	return nil
}

// depthLoop samples the queue depth for the gauge every
// Config.QueueDepthInterval while this engine leads.
func (e *Engine) depthLoop(ctx context.Context) {
	m := e.tel.m
	defer m.setDepth(nil, nil)
	for {
		st, err := e.store.Stats(ctx, &store.StatsParams{Now: e.now()})
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Warn("durable: sampling queue depth", slog.Any("error", err))
		case err == nil:
			m.setDepth(st, e.workflowNames())
		}
		t := time.NewTimer(e.cfg.QueueDepthInterval)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// traceCarrier carries one traceparent between a propagator and a run
// record, without a map.
type traceCarrier struct{ parent string }

const traceParentKey = "traceparent"

func (c *traceCarrier) Get(key string) string {
	if key == traceParentKey {
		return c.parent
	}
	return ""
}

func (c *traceCarrier) Set(key, value string) {
	if key == traceParentKey {
		c.parent = value
	}
}

func (c *traceCarrier) Keys() []string { return []string{traceParentKey} }

// traceParent returns the W3C traceparent of the span in ctx, or "" when
// tracing is off or ctx has no valid span (the run then stores none).
func (t *telemetry) traceParent(ctx context.Context) string {
	if t.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	var c traceCarrier
	propagation.TraceContext{}.Inject(ctx, &c)
	return c.parent
}

// startStep starts the span of a step attempt, the child of the span that
// triggered its run (or of its parent run's step), if any. It returns ctx
// unchanged and a nil span when tracing is off. A span that records
// nothing (a no-op tracer, a trace not sampled) gets no attributes, and
// ctx carries it only if it continues a trace.
func (t *telemetry) startStep(ctx context.Context, c *store.ClaimedTask) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	parent := ctx
	if c.TraceParent != "" {
		parent = propagation.TraceContext{}.Extract(ctx, &traceCarrier{parent: c.TraceParent})
	}
	step := c.Step
	if c.Kind == durabletype.KindItem {
		step = c.Map
	}
	_, span := t.tracer.Start(parent, t.spanName(c.Workflow, step), consumerSpan...)
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(AttrRunID, c.RunID.String()),
			attribute.String(AttrWorkflow, c.Workflow),
			attribute.String(AttrStep, c.Step),
			attribute.Int(AttrAttempt, c.Attempt),
			attribute.String(AttrTenant, c.Tenant),
		)
	}
	if !span.SpanContext().IsValid() {
		return ctx, span
	}
	// The span lives in the step's context, which keeps ctx's
	// cancellation and values: only the span comes from parent.
	return trace.ContextWithSpan(ctx, span), span
}

// consumerSpan are the options of a step's span (a slice made once: a
// variadic call would allocate one per span).
var consumerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}

// spanName returns the name of the spans of a step: "durable.step
// <workflow>/<step>", made once.
func (t *telemetry) spanName(workflow, step string) string {
	k := [2]string{workflow, step}
	if n, ok := t.names.Load(k); ok {
		return n.(string)
	}
	n := "durable.step " + workflow + "/" + step
	t.names.Store(k, n)
	return n
}

// endStep ends a step attempt's span with its outcome.
func endStep(span trace.Span, o *store.Outcome) {
	if !span.IsRecording() {
		span.End()
		return
	}
	switch o.Kind {
	case store.OutcomeFail:
		span.SetStatus(codes.Error, o.Error)
	case store.OutcomeComplete:
		span.SetStatus(codes.Ok, "")
	}
	span.SetAttributes(attribute.String(AttrOutcome, outcomeName(o.Kind)))
	span.End()
}

func outcomeName(k store.OutcomeKind) string {
	switch k {
	case store.OutcomeComplete:
		return "completed"
	case store.OutcomeFail:
		return "failed"
	case store.OutcomeSkip:
		return "skipped"
	case store.OutcomeRelease:
		return "released"
	case store.OutcomeWait:
		return "waiting"
	case store.OutcomeSpawn:
		return "child"
	case store.OutcomeFanOut:
		return "fan_out"
	case store.OutcomeSuspend:
		return "suspended"
	}
	return "unknown"
}

// startCall starts the span of one attempt of a function's call that runs
// inline (Do, Go, DoTx): a child of its body's span, which ctx carries.
func (t *telemetry) startCall(ctx context.Context, c *store.ClaimedTask, name string, attempt int) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, t.spanName(c.Workflow, name), trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(AttrRunID, c.RunID.String()),
			attribute.String(AttrWorkflow, c.Workflow),
			attribute.String(AttrStep, name),
			attribute.Int(AttrAttempt, attempt),
			attribute.String(AttrTenant, c.Tenant),
		)
	}
	return ctx, span
}

// endCall ends the span of a call's attempt, with its error.
func endCall(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetStatus(codes.Ok, "")
	}
	span.End()
}
