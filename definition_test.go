package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
)

// Definitions and configurations are validated by the engine alone:
// Register and New make no store call. The tests of them run once, on an
// engine over an in-memory store that is never started, since no store is
// involved; TestTriggerValidation and TestStartStopLifecycle, which reach
// the store, run on both (suite_test.go).

func noop[I any](ctx durable.Context, in I) (int, error) { return 0, nil }

// newEngine returns an engine over a new in-memory store, never started.
func newEngine(t *testing.T) *durable.Engine {
	t.Helper()
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
	require.NoError(t, err)
	return e
}

// requireDefErr asserts that err holds a *DefinitionError for the workflow
// and step with the sentinel want.
func requireDefErr(t *testing.T, err error, want error, workflow, step string) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var found bool
	for _, e := range flatten(err) {
		var de *durable.DefinitionError
		if errors.As(e, &de) && errors.Is(de, want) {
			require.Equal(t, workflow, de.Workflow)
			require.Equal(t, step, de.Step)
			require.True(t, strings.HasPrefix(de.Error(), "durable: workflow "), de.Error())
			found = true
		}
	}
	require.True(t, found, "no *DefinitionError for %v in %v", want, err)
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func TestDefinitionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		build    func() durable.Definition
		want     error
		workflow string
		step     string
	}{
		{"duplicate step", func() durable.Definition {
			wf := durable.NewWorkflow[int]("dup")
			durable.Step(wf, "a", noop[int])
			durable.Step(wf, "a", noop[int])
			return wf
		}, durable.ErrDuplicateStep, "dup", "a"},
		{"parent from another workflow", func() durable.Definition {
			other := durable.NewWorkflow[int]("other")
			x := durable.Step(other, "x", noop[int])
			wf := durable.NewWorkflow[int]("mine")
			durable.Step(wf, "a", noop[int], durable.After(x))
			return wf
		}, durable.ErrForeignParent, "mine", "a"},
		{"skip condition on a non-parent", func() durable.Definition {
			wf := durable.NewWorkflow[int]("skip")
			a := durable.Step(wf, "a", noop[int])
			b := durable.Step(wf, "b", noop[int])
			durable.Step(wf, "c", noop[int], durable.After(a), durable.SkipIf(b, func(int) bool { return true }))
			return wf
		}, durable.ErrSkipNotParent, "skip", "c"},
		{"empty workflow", func() durable.Definition {
			return durable.NewWorkflow[int]("empty")
		}, durable.ErrEmptyWorkflow, "empty", ""},
		{"zero sleep", func() durable.Definition {
			wf := durable.NewWorkflow[int]("nap")
			durable.Sleep(wf, "zzz", 0)
			return wf
		}, durable.ErrInvalidSleep, "nap", "zzz"},
		{"negative sleep", func() durable.Definition {
			wf := durable.NewWorkflow[int]("nap")
			durable.Sleep(wf, "zzz", -time.Second)
			return wf
		}, durable.ErrInvalidSleep, "nap", "zzz"},
		{"negative retries", func() durable.Definition {
			wf := durable.NewWorkflow[int]("retry")
			durable.Step(wf, "a", noop[int], durable.WithRetry(durable.RetryPolicy{MaxRetries: -1}))
			return wf
		}, durable.ErrInvalidRetryPolicy, "retry", "a"},
		{"factor below one", func() durable.Definition {
			wf := durable.NewWorkflow[int]("retry")
			durable.Step(wf, "a", noop[int], durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, Factor: 0.5}))
			return wf
		}, durable.ErrInvalidRetryPolicy, "retry", "a"},
		{"jitter above one", func() durable.Definition {
			wf := durable.NewWorkflow[int]("retry")
			durable.Step(wf, "a", noop[int], durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, Jitter: 1.5}))
			return wf
		}, durable.ErrInvalidRetryPolicy, "retry", "a"},
		{"invalid workflow name", func() durable.Definition {
			wf := durable.NewWorkflow[int]("bad name")
			durable.Step(wf, "a", noop[int])
			return wf
		}, durable.ErrInvalidName, "bad name", ""},
		{"invalid step name", func() durable.Definition {
			wf := durable.NewWorkflow[int]("names")
			durable.Step(wf, "@on_failure", noop[int])
			return wf
		}, durable.ErrInvalidName, "names", "@on_failure"},
		{"nil step function", func() durable.Definition {
			wf := durable.NewWorkflow[int]("nilfn")
			durable.Step[int, int](wf, "a", nil)
			return wf
		}, durable.ErrNilFunc, "nilfn", "a"},
		{"parent listed twice", func() durable.Definition {
			wf := durable.NewWorkflow[int]("twice")
			a := durable.Step(wf, "a", noop[int])
			durable.Step(wf, "b", noop[int], durable.After(a, a))
			return wf
		}, durable.ErrDuplicateParent, "twice", "b"},
		{"After on the on-failure handler", func() durable.Definition {
			wf := durable.NewWorkflow[int]("of")
			a := durable.Step(wf, "a", noop[int])
			wf.OnFailure(func(durable.Context, int, durable.Failure) error { return nil }, durable.After(a))
			return wf
		}, durable.ErrInvalidOption, "of", durabletype.OnFailureTask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t)
			err := e.Register(tt.build())
			requireDefErr(t, err, tt.want, tt.workflow, tt.step)
		})
	}
}

func TestDuplicateWorkflow(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	a := durable.NewWorkflow[int]("same").WithVersion("1")
	durable.Step(a, "x", noop[int])
	b := durable.NewWorkflow[string]("same").WithVersion("1")
	durable.Step(b, "y", noop[string])
	requireDefErr(t, e.Register(a, b), durable.ErrDuplicateWorkflow, "same", "")

	// Nothing was registered by the failed call, so a alone registers, and
	// registering b afterwards fails too.
	require.NoError(t, e.Register(a))
	requireDefErr(t, e.Register(b), durable.ErrDuplicateWorkflow, "same", "")

	// Two versions of a workflow register side by side; the same version
	// twice is a duplicate, whether set by hand or a fingerprint.
	c := durable.NewWorkflow[string]("same")
	durable.Step(c, "y", noop[string])
	require.NoError(t, e.Register(c))
	d := durable.NewWorkflow[string]("same")
	durable.Step(d, "y", noop[string])
	require.Equal(t, c.Version(), d.Version(), "the same definition has the same fingerprint")
	requireDefErr(t, e.Register(d), durable.ErrDuplicateWorkflow, "same", "")
}

func TestRegisterReportsEveryError(t *testing.T) {
	t.Parallel()
	wf := durable.NewWorkflow[int]("many")
	durable.Step(wf, "a", noop[int])
	durable.Step(wf, "a", noop[int])
	durable.Sleep(wf, "s", 0)
	err := newEngine(t).Register(wf)
	require.ErrorIs(t, err, durable.ErrDuplicateStep)
	require.ErrorIs(t, err, durable.ErrInvalidSleep)
}

func TestWorkflowFrozenAfterRegistration(t *testing.T) {
	t.Parallel()
	wf := durable.NewWorkflow[int]("frozen")
	durable.Step(wf, "a", noop[int])
	require.NoError(t, newEngine(t).Register(wf))
	durable.Step(wf, "late", noop[int])
	_, err := wf.RunNoWait(context.Background(), newEngine(t), "t", 1)
	require.ErrorIs(t, err, durable.ErrWorkflowFrozen)
}

// TestTriggerValidation: invalid tenants, inputs that do not encode and
// invalid workflows are refused with clear errors; a tenant of 200 bytes of
// UTF-8 is stored; and a run can be started in a transaction of the store's
// kind (none in memory).
func TestTriggerValidation(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		e := h.client()
		wf := durable.NewWorkflow[int]("valid")
		durable.Step(wf, "a", noop[int])
		ctx := h.ctx(time.Minute)
		for _, tenant := range []string{"", strings.Repeat("x", 201), "tab\there", "nul\x00"} {
			_, err := wf.RunNoWait(ctx, e, tenant, 1)
			require.ErrorIs(t, err, durabletype.ErrInvalidTenant, "tenant %q", tenant)
		}
		_, err := wf.RunNoWait(ctx, e, strings.Repeat("é", 100), 1)
		require.NoError(t, err, "200 bytes of UTF-8 is a valid tenant")

		// An input that does not encode is a clear error, and starts nothing.
		chans := durable.NewWorkflow[chan int]("chans")
		durable.Step(chans, "a", noop[chan int])
		_, err = chans.RunNoWait(ctx, e, "t", make(chan int))
		require.ErrorIs(t, err, durable.ErrEncode)

		// An invalid workflow cannot be triggered either.
		bad := durable.NewWorkflow[int]("bad")
		_, err = bad.RunNoWait(ctx, e, "t", 1)
		require.ErrorIs(t, err, durable.ErrEmptyWorkflow)

		tx, commit := h.tx()
		_, err = wf.RunNoWaitTx(ctx, e, tx, "t", 1)
		require.NoError(t, err, "a run starts in a transaction of the store's kind (memstore has none: nil)")
		require.NoError(t, commit())
	})
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	_, err := durable.New(nil, durable.Config{})
	require.ErrorIs(t, err, durable.ErrInvalidConfig)
	for _, cfg := range []durable.Config{
		{Concurrency: -1},
		{HeartbeatInterval: 10 * time.Second, DeadAfter: 15 * time.Second},
		{PollInterval: time.Minute, MaxPollInterval: time.Second},
		{DeadAfter: -time.Second},
	} {
		_, err := durable.New(s, cfg)
		require.ErrorIs(t, err, durable.ErrInvalidConfig, "%+v", cfg)
	}
	e, err := durable.New(s, durable.Config{})
	require.NoError(t, err)
	require.NotEmpty(t, e.WorkerID())
}

// TestStartStopLifecycle: Stop without Start is a no-op; Start twice is an
// error; Stop is idempotent; a stopped engine does not start again.
func TestStartStopLifecycle(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		ctx := h.ctx(time.Minute)
		e := h.client()
		require.NoError(t, e.Stop(ctx), "stopping an engine that never started is a no-op")
		e = h.client()
		require.NoError(t, e.Start(ctx))
		require.ErrorIs(t, e.Start(ctx), durable.ErrAlreadyStarted)
		require.NoError(t, e.Stop(ctx))
		require.NoError(t, e.Stop(ctx))
		require.ErrorIs(t, e.Start(ctx), durable.ErrEngineStopped)
	})
}
