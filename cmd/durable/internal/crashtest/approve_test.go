package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
)

// chaosTenants is how many tenants the chaos runs are spread over.
const chaosTenants = 5

// chaosTenant is the tenant of the chaos run with input n.
func chaosTenant(n int) string { return fmt.Sprintf("tenant-%d", n%chaosTenants) }

// approval is the payload of the first event sent for the chaos run with
// input n, and so its approve step's output.
func approval(n int) string { return fmt.Sprintf("approved-%d", n) }

// reapproval is the payload of a second event sent for the same key, after
// the first: the approve step must not receive it.
func reapproval(n int) string { return fmt.Sprintf("again-%d", n) }

// approver triggers chaos runs in batches and sends the events their
// approve steps wait for (workloads.ChaosKey(n), with WithLookback), so
// that every run gets its event, by both ways of delivery:
//
//   - the events of a random half of each batch are sent before the batch
//     is triggered: no step waits for them yet, and each is delivered when
//     its step begins waiting, by the lookback;
//   - the events of the other half are held back and sent with the next
//     batch (or by flush), once most of those runs wait already: they are
//     delivered to the waiting steps at once.
//
// A random quarter of the runs get a second event for the same key, with
// another payload, one batch after the first: the step must receive the
// first only.
//
// An approver is used by one goroutine at a time.
type approver struct {
	client *durable.Engine
	wf     *durable.Workflow[workloads.ChaosInput]
	rng    *rand.Rand
	held   []int // runs triggered whose event is still to send
	again  []int // runs whose event was sent, to send a second one
	st     approvalStats
}

// approvalStats are what the events sent found.
type approvalStats struct {
	early int // events sent before their run was triggered
	late  int // events sent after their run was triggered
	// live counts the late events that a waiting step received when sent
	// (SendEvents counts them); the others found no step waiting yet and
	// were delivered by the lookback when it began to.
	live    int
	seconds int // second events for a key
	// secondsLive counts the second events that a step still waiting
	// received when sent. None should have been: a step waiting by then
	// had received the first event as its wait began.
	secondsLive int
}

func newApprover(client *durable.Engine, wf *durable.Workflow[workloads.ChaosInput], rng *rand.Rand) *approver {
	return &approver{client: client, wf: wf, rng: rng}
}

// trigger sends the events held back, sends the events of a random half of
// the runs with inputs ns, triggers them, and holds the events of the other
// half back for the next call (or flush).
func (a *approver) trigger(ctx context.Context, ns []int) error {
	if err := a.flush(ctx); err != nil {
		return err
	}
	ns = append([]int(nil), ns...)
	a.rng.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
	early, late := ns[:len(ns)/2], ns[len(ns)/2:]
	if live, err := a.send(ctx, early, approval); err != nil {
		return err
	} else if live > 0 {
		return fmt.Errorf("%d events of runs %v, not triggered yet, were received by a waiting step", live, early)
	}
	a.st.early += len(early)
	ts := make([]durable.Trigger[workloads.ChaosInput], len(ns))
	for k, n := range ns {
		ts[k] = durable.Trigger[workloads.ChaosInput]{Tenant: chaosTenant(n), Input: workloads.ChaosInput{N: n}}
	}
	if _, err := a.wf.RunManyNoWait(ctx, a.client, ts); err != nil {
		return fmt.Errorf("triggering runs %v: %w", ns, err)
	}
	a.held = late
	a.pickSeconds(early)
	return nil
}

// flush sends the second events due and the events held back.
func (a *approver) flush(ctx context.Context) error {
	if len(a.again) > 0 {
		live, err := a.send(ctx, a.again, reapproval)
		if err != nil {
			return err
		}
		a.st.seconds += len(a.again)
		a.st.secondsLive += live
		a.again = nil
	}
	if len(a.held) > 0 {
		live, err := a.send(ctx, a.held, approval)
		if err != nil {
			return err
		}
		a.st.late += len(a.held)
		a.st.live += live
		a.pickSeconds(a.held)
		a.held = nil
	}
	return nil
}

// pickSeconds picks a random quarter of ns, whose events were just sent,
// to get a second event with the next call.
func (a *approver) pickSeconds(ns []int) {
	for _, n := range ns {
		if a.rng.IntN(4) == 0 {
			a.again = append(a.again, n)
		}
	}
}

// send sends, in one call, the event of each run of ns, with the payload
// payload(n), and returns how many were received at once by a waiting
// step. Only the run with input n waits for its key, so no event may reach
// more than one step.
func (a *approver) send(ctx context.Context, ns []int, payload func(int) string) (live int, err error) {
	evs := make([]durable.EventToSend, len(ns))
	for k, n := range ns {
		evs[k] = durable.EventToSend{Tenant: chaosTenant(n), Key: workloads.ChaosKey(n), Payload: payload(n)}
	}
	got, err := a.client.SendEvents(ctx, evs)
	if err != nil {
		return 0, fmt.Errorf("sending the events of runs %v: %w", ns, err)
	}
	for k, d := range got {
		if d > 1 {
			return 0, fmt.Errorf("the event %s was received by %d steps, and only one waits for it", evs[k].Key, d)
		}
		live += d
	}
	return live, nil
}
