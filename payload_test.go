package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

type payment struct {
	Reference string `json:"reference"`
	Amount    int    `json:"amount"`
}

// paymentFlow waits for a payment, then records it.
func paymentFlow() (*durable.Workflow[string], *durable.StepRef[string]) {
	wf := durable.NewWorkflow[string]("payment")
	paid := durable.WaitForEvent[payment](wf, "payment.received", func(ctx durable.Context, order string) (string, error) {
		return "pay:" + order, nil
	})
	rec := durable.Step(wf, "record", func(ctx durable.Context, order string) (string, error) {
		p, _ := paid.Output(ctx)
		return p.Reference, nil
	}, durable.After(paid))
	return wf, rec
}

// refusedDetails returns the details of the events of step that record a
// refused payload.
func refusedDetails(t *testing.T, e *durable.Engine, id [16]byte, step string) []string {
	t.Helper()
	evs, err := e.Events(t.Context(), id)
	require.NoError(t, err)
	var out []string
	for _, ev := range evs {
		if ev.Step == step && strings.HasPrefix(ev.Detail, dag.RefusedDetail) {
			out = append(out, ev.Detail)
		}
	}
	return out
}

// The case: an event whose payload cannot be read as the awaited
// type no longer completes the wait (and fails the next step for good).
func TestEventPayloadRefusedEngine(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf, rec := paymentFlow()
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		id, err := wf.RunNoWait(ctx, e, "acme", "o1")
		require.NoError(t, err)
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
			return stepState(t, e, id, "payment.received") == durabletype.TaskWaiting
		}, "the run waits")

		n, err := e.SendEvent(ctx, "acme", "pay:o1", json.RawMessage(`{"reference":5}`))
		require.Zero(t, n)
		require.ErrorIs(t, err, durable.ErrPayloadRefused)
		var re *durable.RefusedError
		require.True(t, errors.As(err, &re))
		require.Len(t, re.Refusals, 1)
		require.Equal(t, id, re.Refusals[0].RunID)
		require.Equal(t, "payment.received", re.Refusals[0].Step)
		require.Equal(t, "at .reference: the number 5, expected a string", re.Refusals[0].Reason)
		require.Contains(t, re.Refusals[0].Expected.String(), `"reference": string`)
		require.Contains(t, err.Error(), `step "payment.received" refused the payload`)
		require.Equal(t, durabletype.TaskWaiting, stepState(t, e, id, "payment.received"))
		require.Len(t, refusedDetails(t, e, id, "payment.received"), 1)

		// A payload that fits completes the wait, and the run.
		n, err = e.SendEvent(ctx, "acme", "pay:o1", payment{Reference: "r-1", Amount: 3})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		res := h.wait(e, id, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		got, err := rec.Result(res)
		require.NoError(t, err)
		require.Equal(t, "r-1", got)
	})
}

func TestSignalPayloadRefusedEngine(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[string]("approval")
		ok := durable.WaitForSignal[bool](wf, "approved", "approve")
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		id, err := wf.RunNoWait(ctx, e, "acme", "o1")
		require.NoError(t, err)
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
			return stepState(t, e, id, "approved") == durabletype.TaskWaiting
		}, "the run waits")
		err = e.Signal(ctx, id, "approve", "yes")
		require.ErrorIs(t, err, durable.ErrPayloadRefused)
		require.Contains(t, err.Error(), "at the top: a string, expected a boolean")
		require.Equal(t, durabletype.TaskWaiting, stepState(t, e, id, "approved"))
		require.NoError(t, e.Signal(ctx, id, "approve", true))
		res := h.wait(e, id, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		got, err := ok.Result(res)
		require.NoError(t, err)
		require.True(t, got)
	})
}

// wrapCodec is encoding/json under another name: an engine with a codec
// other than JSONCodec checks no payload.
type wrapCodec struct{}

func (wrapCodec) Marshal(v any) ([]byte, error)   { return json.Marshal(v) }
func (wrapCodec) Unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// A run whose shape does not describe its payload (recorded by an engine
// older than the check, or with another codec) accepts any payload, as
// before, whoever sends it: a rolling deploy keeps its runs as they were,
// and the workflow's version does not change.
func TestEventPayloadUncheckedShape(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		oldWF, _ := paymentFlow()
		newWF, _ := paymentFlow()
		require.Equal(t, oldWF.Version(), newWF.Version())
		old, err := durable.New(h.store, h.config(durable.Config{Codec: wrapCodec{}}))
		require.NoError(t, err)
		require.NoError(t, old.Register(oldWF))
		e := h.start(durable.Config{}, newWF)
		ctx := h.ctx(time.Minute)
		id, err := oldWF.RunNoWait(ctx, old, "acme", "o1")
		require.NoError(t, err)
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
			return stepState(t, e, id, "payment.received") == durabletype.TaskWaiting
		}, "the run waits")
		n, err := e.SendEvent(ctx, "acme", "pay:o1", json.RawMessage(`{"reference":5}`))
		require.NoError(t, err, "no description, no check")
		require.Equal(t, 1, n)
		res := h.wait(e, id, time.Minute)
		require.Equal(t, durabletype.RunFailed, res.Status, "the next step cannot decode it, as before")
	})
}

// The description of a waiting step's payload is not part of its
// workflow's version: the legacy version of this workflow is what the
// build before payload checks computed (079f2681e4a6), so a rolling
// deploy keeps every run in flight served: an engine that registers it
// serves (accepts) that version; its version is fingerprint 2's.
func TestPayloadDescriptionKeepsVersion(t *testing.T) {
	wf := durable.NewWorkflow[string]("payment")
	paid := durable.WaitForEvent[payment](wf, "payment.received", func(ctx durable.Context, order string) (string, error) {
		return "pay:" + order, nil
	})
	durable.WaitForSignal[bool](wf, "approved", "approve")
	durable.Step(wf, "record", func(ctx durable.Context, order string) (string, error) {
		p, _ := paid.Output(ctx)
		return p.Reference, nil
	}, durable.After(paid))
	require.Equal(t, "c15c32a5a875", wf.Version())
	e := startExampleEngine(wf)
	defer e.Stop(context.Background())
	ws, err := e.Workers(context.Background())
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Equal(t, []durable.WorkflowVersion{{Workflow: "payment", Version: "079f2681e4a6"}}, ws[0].Accepts)
}
