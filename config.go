package durable

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Config configures an Engine. The zero value is valid: every field has a
// documented default.
type Config struct {
	// WorkerID identifies this engine in claims and heartbeats; it must be
	// unique among the engines sharing a store, and 1-200 bytes of UTF-8
	// without control characters. Defaults to
	// "<hostname>-<pid>-<random>".
	WorkerID string

	// Version labels this engine's code in the registry of workers
	// (Engine.Workers), e.g. a release or a commit; at most 255 bytes of
	// UTF-8. Defaults to the main module's version as the Go toolchain
	// recorded it, or the first 12 digits of its VCS revision.
	Version string

	// Concurrency is the most steps this engine runs at once. Defaults to 100.
	Concurrency int

	// ClaimBatch is the most tasks claimed in one store call. Defaults to
	// Concurrency, capped at 200.
	ClaimBatch int

	// FinishBatch is the most step outcomes recorded in one store call.
	// Outcomes are batched only when they pile up, so a lone step is
	// recorded at once. Defaults to 500.
	FinishBatch int

	// PollInterval is how often an idle engine looks for work it was not
	// notified of. With a store that sends notifications (both stores do) it
	// doubles while idle, up to MaxPollInterval. Defaults to 1s.
	PollInterval time.Duration

	// MaxPollInterval caps PollInterval's idle back-off. Defaults to 30s.
	MaxPollInterval time.Duration

	// HeartbeatInterval is how often the engine tells the store that its
	// running steps are alive. Defaults to 5s.
	HeartbeatInterval time.Duration

	// DeadAfter is how long a worker may miss heartbeats before the leader
	// treats its running steps as lost and runs them again elsewhere,
	// without spending a retry (a step lost DefaultLostLimit times in a row,
	// or WithLostLimit's n, fails: see docs/semantics.md, "Lost workers"). It must exceed 2×HeartbeatInterval; the
	// leader scans every DeadAfter/4, so a dead step is rescued within
	// 1.25×DeadAfter. Silence counts only while the leader reaches the
	// store: a leader just elected, or back after losing the store, rescues
	// once it has been in contact for 2×HeartbeatInterval, so that an outage
	// that silenced every worker does not read as every worker dead.
	// Defaults to 30s.
	DeadAfter time.Duration

	// TenantLimit, when positive, caps the steps of one tenant running at
	// once across all engines sharing the store. Defaults to 0 (no cap).
	TenantLimit int

	// Retention is how long settled runs are kept: the leader deletes runs
	// that settled longer ago, with their tasks and events, in small
	// batches, each a short transaction. Defaults to 7 days; KeepForever
	// (any negative value) keeps every run. (Zero means the default, as for
	// every field of Config.)
	Retention time.Duration

	// EventRetention is how long sent events are kept, for the steps that
	// begin waiting after an event was sent and look back for it
	// (WithLookback): the leader deletes older events in small batches.
	// Defaults to 24 hours; KeepForever keeps every event. Signals are
	// kept as long as their run.
	EventRetention time.Duration

	// Codec encodes inputs and outputs. Defaults to JSONCodec.
	Codec Codec

	// Logger receives the engine's logs. Defaults to slog.Default().
	Logger *slog.Logger

	// Clock, when set, supplies the timestamps the engine records, for
	// tests on the in-memory store outside a testing/synctest bubble
	// (inside one, time.Now is already virtual). Defaults to nil: the
	// store's clock. A store shared between processes keeps its own clock
	// (pgstore: PostgreSQL's) and New refuses a Clock for it, since every
	// time such a store compares must come from one clock: an engine whose
	// clock ran ahead would rescue other engines' live steps and fire
	// timers early.
	Clock func() time.Time

	// MeterProvider, when set, receives the engine's metrics (steps
	// started, completed, failed, retried, rescued; runs settled; step,
	// queue-wait and store-call durations; the queue depth, sampled by the
	// leader): see docs/observability.md. Defaults to nil: no
	// metrics, at no cost.
	MeterProvider metric.MeterProvider

	// TracerProvider, when set, makes the engine trace every step attempt
	// in a span whose parent is the span that was active when its run was
	// triggered (its W3C traceparent is stored with the run), or for a
	// child run the span of the parent's step. Defaults to nil: no spans,
	// and runs store no trace parent.
	TracerProvider trace.TracerProvider

	// MetricsTenant adds the tenant attribute to the metrics of steps,
	// runs and queues. Tenants are as many as your users: opt in only if
	// your metrics backend can take one series per tenant. Defaults to
	// false.
	MetricsTenant bool

	// QueueDepthInterval is how often the leader samples the queue depth
	// (a Stats call) for the durable.queue.depth gauge; only with a
	// MeterProvider. Defaults to 30s.
	QueueDepthInterval time.Duration

	// MaxInputSize is the largest encoded input of a run, in bytes: a
	// trigger (or schedule, or child run) with a larger one fails with
	// ErrPayloadTooLarge and starts nothing. Defaults to 1 MiB
	// (DefaultMaxInputSize); NoLimit (any negative value) sets none. See
	// docs/semantics.md, "Limits".
	MaxInputSize int

	// MaxOutputSize is the largest encoded output of a step, in bytes: a
	// step whose output is larger fails with ErrPayloadTooLarge, without
	// retries. Defaults to 2 MiB (DefaultMaxOutputSize); NoLimit sets
	// none.
	MaxOutputSize int

	// MaxEventSize is the largest encoded payload of an event or a signal,
	// in bytes: SendEvent and Signal refuse a larger one with
	// ErrPayloadTooLarge and send nothing. Defaults to 1 MiB
	// (DefaultMaxEventSize); NoLimit sets none.
	MaxEventSize int
}

// Payload limits (Config.MaxInputSize, MaxOutputSize, MaxEventSize).
const (
	// DefaultMaxInputSize is the Config.MaxInputSize of a zero Config.
	DefaultMaxInputSize = 1 << 20
	// DefaultMaxOutputSize is the Config.MaxOutputSize of a zero Config.
	DefaultMaxOutputSize = 2 << 20
	// DefaultMaxEventSize is the Config.MaxEventSize of a zero Config.
	DefaultMaxEventSize = 1 << 20
	// NoLimit, as a payload limit, sets no limit.
	NoLimit = -1
)

// KeepForever is the Config.Retention that keeps every run.
const KeepForever time.Duration = -1

// DefaultLostLimit is how many attempts of a step in a row may lose their
// worker before the step fails, unless WithLostLimit says otherwise.
const DefaultLostLimit = durabletype.DefaultLostLimit

// DefaultRetention is the Config.Retention of a zero Config: 7 days.
const DefaultRetention = 7 * 24 * time.Hour

// DefaultEventRetention is the Config.EventRetention of a zero Config: a
// day.
const DefaultEventRetention = 24 * time.Hour

// ErrInvalidConfig is returned by New for a Config it cannot use.
var ErrInvalidConfig = errors.New("durable: invalid config")

func (c *Config) setDefaults(s store.Store) error {
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if c.Version == "" {
		c.Version = buildVersion()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Concurrency == 0 {
		c.Concurrency = 100
	}
	if c.ClaimBatch == 0 {
		c.ClaimBatch = min(c.Concurrency, 200)
	}
	if c.FinishBatch == 0 {
		c.FinishBatch = 500
	}
	def(&c.PollInterval, time.Second)
	def(&c.MaxPollInterval, 30*time.Second)
	def(&c.HeartbeatInterval, 5*time.Second)
	def(&c.DeadAfter, 30*time.Second)
	def(&c.Retention, DefaultRetention)
	def(&c.EventRetention, DefaultEventRetention)
	def(&c.QueueDepthInterval, 30*time.Second)
	if c.Codec == nil {
		c.Codec = JSONCodec{}
	}
	for _, l := range []struct {
		v   *int
		def int
	}{{&c.MaxInputSize, DefaultMaxInputSize}, {&c.MaxOutputSize, DefaultMaxOutputSize}, {&c.MaxEventSize, DefaultMaxEventSize}} {
		if *l.v == 0 {
			*l.v = l.def
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	clocked, _ := s.(store.Clocked)
	switch {
	case !dag.ValidWorker(c.WorkerID):
		return fmt.Errorf("%w: WorkerID %s: use 1-200 bytes of UTF-8 without control characters", ErrInvalidConfig, dag.Quote(c.WorkerID))
	case !dag.ValidWorkerLabel(c.Version):
		return fmt.Errorf("%w: Version %s: use at most %d bytes of UTF-8 without control characters", ErrInvalidConfig, dag.Quote(c.Version), dag.MaxWorkerLabelLen)
	case c.Concurrency < 0 || c.ClaimBatch < 0 || c.FinishBatch < 0 || c.TenantLimit < 0:
		return fmt.Errorf("%w: negative count", ErrInvalidConfig)
	case c.PollInterval < 0 || c.HeartbeatInterval < 0 || c.DeadAfter < 0 || c.QueueDepthInterval < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	case c.MaxPollInterval < c.PollInterval:
		return fmt.Errorf("%w: MaxPollInterval %s < PollInterval %s", ErrInvalidConfig, c.MaxPollInterval, c.PollInterval)
	case c.DeadAfter <= 2*c.HeartbeatInterval:
		return fmt.Errorf("%w: DeadAfter %s must exceed 2×HeartbeatInterval %s", ErrInvalidConfig, c.DeadAfter, c.HeartbeatInterval)
	case c.Clock != nil && clocked != nil && clocked.KeepsTime():
		return fmt.Errorf("%w: Clock: the store keeps its own clock (%T), which every engine sharing it must use", ErrInvalidConfig, s)
	}
	return nil
}
