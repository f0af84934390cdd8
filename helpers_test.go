package durable_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// Helpers of the engine tests, for every store: they only use the engine's
// public API.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// counter counts calls by key, safely across goroutines.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return c.n[key]
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// states returns the state of every step of a run, by name.
func states(res *durable.RunResult) map[string]durabletype.TaskState {
	m := map[string]durabletype.TaskState{}
	for _, s := range res.Steps {
		m[s.Name] = s.State
	}
	return m
}

// stepEvents returns the events of a run's step as "TYPE/attempt".
func stepEvents(t *testing.T, e *durable.Engine, id uuid.UUID, step string) []string {
	t.Helper()
	evs, err := e.Events(context.Background(), id)
	require.NoError(t, err)
	var out []string
	for _, ev := range evs {
		if ev.Step == step {
			out = append(out, fmt.Sprintf("%s/%d", ev.Type, ev.Attempt))
		}
	}
	return out
}

// eventOf returns the first event of a step with the given type.
func eventOf(t *testing.T, e *durable.Engine, id uuid.UUID, step string, typ durabletype.EventType) durabletype.Event {
	t.Helper()
	evs, err := e.Events(context.Background(), id)
	require.NoError(t, err)
	for _, ev := range evs {
		if ev.Step == step && ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("run %s: no %s event for step %q in %v", id, typ, step, evs)
	return durabletype.Event{}
}

// lastQueuedDetail returns the detail of the last QUEUED event of a step.
func lastQueuedDetail(t *testing.T, e *durable.Engine, id uuid.UUID, step string) string {
	t.Helper()
	evs, err := e.Events(context.Background(), id)
	require.NoError(t, err)
	detail := ""
	for _, ev := range evs {
		if ev.Step == step && ev.Type == durabletype.EventQueued {
			detail = ev.Detail
		}
	}
	return detail
}

// stepState reads a step's state now.
func stepState(t *testing.T, e *durable.Engine, id uuid.UUID, step string) durabletype.TaskState {
	t.Helper()
	res, err := e.Get(context.Background(), id)
	require.NoError(t, err)
	s, ok := res.Step(step)
	require.True(t, ok, "run %s has no step %q", id, step)
	return s.State
}

// sumOutputs sums the outputs of parents refs, failing if one is missing.
func sumOutputs(ctx durable.Context, refs []*durable.StepRef[int]) (int, error) {
	sum := 0
	for _, r := range refs {
		v, ok := r.Output(ctx)
		if !ok {
			return 0, fmt.Errorf("missing %s", r.Name())
		}
		sum += v
	}
	return sum, nil
}

// leaderLog is a slog handler that follows the engines' "leading" and "no
// longer leading" messages: who leads, how many led at once at most, and
// every message by worker.
type leaderLog struct {
	mu      sync.Mutex
	leading map[string]bool
	most    int
	turns   []string // workers in the order they became leader
	msgs    map[string][]string
}

func newLeaderLog() *leaderLog {
	return &leaderLog{leading: map[string]bool{}, msgs: map[string][]string{}}
}

func (l *leaderLog) logger() *slog.Logger { return slog.New(&leaderHandler{log: l}) }

func (l *leaderLog) record(worker, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs[worker] = append(l.msgs[worker], msg)
	switch msg {
	case "durable: leading":
		l.leading[worker] = true
		l.turns = append(l.turns, worker)
		l.most = max(l.most, len(l.leading))
	case "durable: no longer leading":
		delete(l.leading, worker)
	}
}

// leaders returns the workers leading now.
func (l *leaderLog) leaders() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for w := range l.leading {
		out = append(out, w)
	}
	return out
}

func (l *leaderLog) stats() (most int, turns []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.most, append([]string(nil), l.turns...)
}

func (l *leaderLog) said(worker, msg string) bool { return l.count(worker, msg) > 0 }

// count returns how many times worker logged msg.
func (l *leaderLog) count(worker, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs[worker] {
		if m == msg {
			n++
		}
	}
	return n
}

type leaderHandler struct {
	log    *leaderLog
	worker string
}

func (h *leaderHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *leaderHandler) Handle(_ context.Context, r slog.Record) error {
	worker := h.worker
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "worker" {
			worker = a.Value.String()
		}
		return true
	})
	h.log.record(worker, r.Message)
	return nil
}

func (h *leaderHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	for _, a := range attrs {
		if a.Key == "worker" {
			c.worker = a.Value.String()
		}
	}
	return &c
}

func (h *leaderHandler) WithGroup(string) slog.Handler { return h }
