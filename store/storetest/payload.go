package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Tests of payload checks: a step waiting for an event or a signal whose
// shape describes the type it awaits (WaitSpec.Payload) refuses a payload
// that does not fit it, records why in its events, and keeps waiting.

// paymentType is the description of struct{ Reference string; Amount int }.
func paymentType() *durabletype.JSONType {
	return &durabletype.JSONType{Type: durabletype.TypeObject, Go: "shop.Payment", Fields: map[string]*durabletype.JSONType{
		"reference": {Type: durabletype.TypeString},
		"amount":    {Type: durabletype.TypeInt, Bits: 64},
	}}
}

func checkedEventStep(name string, parents ...string) durabletype.StepSpec {
	s := eventStep(name, parents...)
	s.Wait.Payload = paymentType()
	return s
}

// refusals returns the details of the WAITING events of step that record
// a refused payload.
func refusals(t *testing.T, s store.Store, id uuid.UUID, step string) []string {
	t.Helper()
	evs, err := s.ListEvents(ctx, id)
	require.NoError(t, err)
	var out []string
	for _, e := range evs {
		if e.Step == step && e.Type == durabletype.EventWaiting && strings.HasPrefix(e.Detail, dag.RefusedDetail) {
			out = append(out, e.Detail)
		}
	}
	return out
}

func testEventPayloadRefused(t *testing.T, s store.Store) {
	sh := shape(checkedEventStep("paid"), step("ship", "paid"))
	r := startWait(t, s, at(0), "acme", sh, "pay-1")
	r2 := startWait(t, s, at(0), "acme", shape(checkedEventStep("paid")), "pay-1")
	// An old shape, recorded before payloads were described: no check.
	old := startWait(t, s, at(0), "acme", shape(eventStep("paid")), "pay-1")

	// Two events in one call: the first does not fit the checked waits,
	// which refuse it and receive the second.
	res, err := s.SendEvents(ctx, &store.SendEventsParams{Now: at(time.Second), Events: []store.EventMessage{
		event("acme", "pay-1", `{"reference":5}`), event("acme", "pay-1", `{"reference":"r-1","amount":3}`),
	}})
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, res.Delivered, "the old wait takes the first event, the checked ones the second")
	require.Len(t, res.Refused, 2)
	for _, rf := range res.Refused {
		require.Equal(t, 0, rf.Event)
		require.Equal(t, "paid", rf.Step)
		require.Contains(t, []uuid.UUID{r.ID, r2.ID}, rf.RunID)
		require.Equal(t, "at .reference: the number 5, expected a string", rf.Reason)
		require.Equal(t, paymentType(), rf.Expected)
	}
	require.Equal(t, `{"reference":5}`, string(tasks(t, s, old.ID)["paid"].Output))
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskCompleted, ts["paid"].State)
	require.Equal(t, `{"reference":"r-1","amount":3}`, string(ts["paid"].Output))
	require.Equal(t, durabletype.TaskQueued, ts["ship"].State)
	require.Equal(t, []string{`refused the payload of event "pay-1": at .reference: the number 5, expected a string; still waiting`},
		refusals(t, s, r.ID, "paid"))

	c := claimOne(t, s, at(2*time.Second))
	require.Equal(t, "ship", c.Step)
	require.Equal(t, `{"reference":"r-1","amount":3}`, string(c.ParentOutputs["paid"]))
	mustApply(t, s, at(2*time.Second), complete(c, `1`))

	// Refused alone: the step keeps waiting, the run goes on.
	r3 := startWait(t, s, at(2*time.Second), "acme", shape(checkedEventStep("paid")), "pay-2")
	res, err = s.SendEvents(ctx, &store.SendEventsParams{Now: at(3 * time.Second), Events: []store.EventMessage{
		event("acme", "pay-2", `["not", "an", "object"]`)}})
	require.NoError(t, err)
	require.Equal(t, []int{0}, res.Delivered)
	require.Len(t, res.Refused, 1)
	require.Equal(t, "at the top: an array, expected an object (shop.Payment)", res.Refused[0].Reason)
	require.Equal(t, durabletype.TaskWaiting, states(t, s, r3.ID)["paid"])
	require.Equal(t, durabletype.RunRunning, run(t, s, r3.ID).Status)
	// null fits, as encoding/json ignores it.
	require.Equal(t, []int{1}, send(t, s, at(4*time.Second), event("acme", "pay-2", `null`)))
	require.Equal(t, durabletype.TaskCompleted, states(t, s, r3.ID)["paid"])

	// A refused wait still times out.
	timed := shape(checkedEventStep("paid"))
	timed.Steps[0].Wait.Timeout = time.Minute
	timed.Steps[0].Wait.SkipOnTimeout = true
	r4 := startWait(t, s, at(10*time.Second), "acme", timed, "pay-3")
	res, err = s.SendEvents(ctx, &store.SendEventsParams{Now: at(11 * time.Second), Events: []store.EventMessage{
		event("acme", "pay-3", `{"amount":1.5}`)}})
	require.NoError(t, err)
	require.Len(t, res.Refused, 1)
	fireAll(t, s, at(71*time.Second))
	require.Equal(t, durabletype.TaskSkipped, states(t, s, r4.ID)["paid"])
}

func testEventPayloadLookback(t *testing.T, s store.Store) {
	send(t, s, at(0), event("acme", "k", `{"amount":"1"}`))
	send(t, s, at(time.Second), event("acme", "k", `{"reference":"ok","amount":1}`))
	send(t, s, at(2*time.Second), event("acme", "k", `{"reference":"later"}`))
	// The first event within the lookback does not fit: the wait skips it
	// (and records why) and receives the next.
	sh := shape(checkedEventStep("w"))
	sh.Steps[0].Wait.Lookback = time.Minute
	r := startWait(t, s, at(3*time.Second), "acme", sh, "k")
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskCompleted, ts["w"].State)
	require.Equal(t, `{"reference":"ok","amount":1}`, string(ts["w"].Output))
	require.Equal(t, []string{`refused the payload of event "k": at .amount: a string, expected an integer (64 bits); still waiting`},
		refusals(t, s, r.ID, "w"))

	// None fits: the wait waits for a new one.
	send(t, s, at(4*time.Second), event("acme", "bad", `{"reference":1}`))
	send(t, s, at(5*time.Second), event("acme", "bad", `{"reference":2}`))
	r = startWait(t, s, at(6*time.Second), "acme", sh, "bad")
	require.Equal(t, durabletype.TaskWaiting, states(t, s, r.ID)["w"])
	require.Len(t, refusals(t, s, r.ID, "w"), 2)
	require.Equal(t, []int{1}, send(t, s, at(7*time.Second), event("acme", "bad", `{"reference":"3"}`)))
	require.Equal(t, `{"reference":"3"}`, string(tasks(t, s, r.ID)["w"].Output))
}

func testSignalPayloadRefused(t *testing.T, s store.Store) {
	checked := signalStep("approve", "approved", "a")
	checked.Wait.Payload = paymentType()
	sh := shape(step("a"), checked, signalStep("also", "approved", "a"))
	r := newRun("wf", "acme", sh)
	create(t, s, at(0), r)
	mustApply(t, s, at(0), complete(claimOne(t, s, at(0)), `1`))
	for _, c := range claim(t, s, at(time.Second), 10) {
		mustApply(t, s, at(time.Second), waitFor(c, ""))
	}
	// Sent while both wait: the unchecked one receives it, the checked one
	// refuses it and waits on.
	res := mustSignal(t, s, &store.SignalParams{Now: at(2 * time.Second), RunID: r.ID, Name: "approved", Payload: []byte(`"yes"`)})
	require.Len(t, res.Refused, 1)
	require.Equal(t, "approve", res.Refused[0].Step)
	require.Equal(t, r.ID, res.Refused[0].RunID)
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskCompleted, ts["also"].State)
	require.Equal(t, durabletype.TaskWaiting, ts["approve"].State)
	require.Equal(t, []string{`refused the payload of signal "approved": at the top: a string, expected an object (shop.Payment); still waiting`},
		refusals(t, s, r.ID, "approve"))
	res = mustSignal(t, s, &store.SignalParams{Now: at(3 * time.Second), RunID: r.ID, Name: "approved", Payload: []byte(`{"reference":"r"}`)})
	require.Empty(t, res.Refused)
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)

	// A wait that begins later skips the kept signals that do not fit.
	r2 := newRun("wf", "acme", shape(step("a"), checked))
	create(t, s, at(4*time.Second), r2)
	mustSignal(t, s, &store.SignalParams{Now: at(5 * time.Second), RunID: r2.ID, Name: "approved", Payload: []byte(`7`)})
	mustSignal(t, s, &store.SignalParams{Now: at(6 * time.Second), RunID: r2.ID, Name: "approved", Payload: []byte(`{"amount":2}`)})
	mustApply(t, s, at(7*time.Second), complete(claimOne(t, s, at(7*time.Second)), `1`))
	mustApply(t, s, at(7*time.Second), waitFor(claimOne(t, s, at(7*time.Second)), ""))
	require.Equal(t, `{"amount":2}`, string(tasks(t, s, r2.ID)["approve"].Output))
	require.Len(t, refusals(t, s, r2.ID, "approve"), 1)
}
