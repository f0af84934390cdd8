package durable_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// Payload limits: an input, an event's or a signal's payload over its
// limit is an error at the call (nothing is sent or started); a step's
// output over its limit fails the step for good; the run stays readable.
func TestPayloadLimits(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[string]("sized")
		durable.Step(wf, "grow", func(ctx durable.Context, in string) (string, error) {
			return strings.Repeat(in, 100), nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: time.Millisecond}))
		gate := durable.NewWorkflow[string]("sized-gate")
		durable.WaitForSignal[string](gate, "go", "go")
		durable.WaitForEvent[string](gate, "ev", func(ctx durable.Context, in string) (string, error) { return in, nil })
		e := h.start(durable.Config{MaxInputSize: 300, MaxOutputSize: 1000, MaxEventSize: 200}, wf, gate)
		ctx := h.ctx(time.Minute)

		_, err := wf.RunNoWait(ctx, e, "acme", strings.Repeat("x", 400))
		require.ErrorIs(t, err, durable.ErrPayloadTooLarge)
		require.ErrorContains(t, err, "the input is 402 bytes, over the limit of 300 (Config.MaxInputSize)")
		_, err = e.StartByName(ctx, "sized", "acme", json.RawMessage(`"`+strings.Repeat("x", 400)+`"`))
		require.ErrorIs(t, err, durable.ErrPayloadTooLarge)
		list, err := e.ListRuns(ctx, durable.ListOptions{})
		require.NoError(t, err)
		require.Empty(t, list.Runs, "nothing started")

		// An output over the limit fails the step, without retries.
		id, err := wf.RunNoWait(ctx, e, "acme", strings.Repeat("y", 20))
		require.NoError(t, err)
		res := h.wait(e, id, time.Minute)
		require.Equal(t, durabletype.RunFailed, res.Status)
		st, _ := res.Step("grow")
		require.Equal(t, 1, st.Attempts, "not retried")
		require.Contains(t, st.Error, "payload too large: the output of step \"grow\" is 2002 bytes, over the limit of 1000 (Config.MaxOutputSize)")
		require.Empty(t, st.Output)
		// Within the limit, it completes.
		id, err = wf.RunNoWait(ctx, e, "acme", "z")
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, h.wait(e, id, time.Minute).Status)

		// Events and signals over the limit are not sent.
		gid, err := gate.RunNoWait(ctx, e, "acme", "k")
		require.NoError(t, err)
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
			return stepState(t, e, gid, "ev") == durabletype.TaskWaiting && stepState(t, e, gid, "go") == durabletype.TaskWaiting
		}, "the run waits")
		n, err := e.SendEvent(ctx, "acme", "k", strings.Repeat("e", 300))
		require.ErrorIs(t, err, durable.ErrPayloadTooLarge)
		require.Zero(t, n)
		err = e.Signal(ctx, gid, "go", strings.Repeat("s", 300))
		require.ErrorIs(t, err, durable.ErrPayloadTooLarge)
		require.Equal(t, durabletype.TaskWaiting, stepState(t, e, gid, "ev"))
		require.Equal(t, durabletype.TaskWaiting, stepState(t, e, gid, "go"))
		n, err = e.SendEvent(ctx, "acme", "k", "small")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.NoError(t, e.Signal(ctx, gid, "go", "small"))
		require.Equal(t, durabletype.RunCompleted, h.wait(e, gid, time.Minute).Status)
	})
}

// The defaults: 1 MiB inputs and events, 2 MiB outputs; NoLimit lifts them.
func TestPayloadLimitDefaults(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[string]("sized-default")
		durable.Step(wf, "echo", func(ctx durable.Context, in string) (int, error) { return len(in), nil })
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		_, err := wf.RunNoWait(ctx, e, "acme", strings.Repeat("x", durable.DefaultMaxInputSize))
		require.ErrorIs(t, err, durable.ErrPayloadTooLarge)
		_, err = e.SendEvent(ctx, "acme", "k", strings.Repeat("x", durable.DefaultMaxEventSize))
		require.ErrorIs(t, err, durable.ErrPayloadTooLarge)
		id, err := wf.RunNoWait(ctx, e, "acme", strings.Repeat("x", durable.DefaultMaxInputSize-2))
		require.NoError(t, err, "exactly at the limit")
		require.Equal(t, durabletype.RunCompleted, h.wait(e, id, time.Minute).Status)

		unlimited, err := durable.New(h.store, h.config(durable.Config{MaxInputSize: durable.NoLimit}))
		require.NoError(t, err)
		require.NoError(t, unlimited.Register(wf))
		id, err = wf.RunNoWait(ctx, unlimited, "acme", strings.Repeat("x", durable.DefaultMaxInputSize+10))
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, h.wait(e, id, time.Minute).Status)
	})
}
