package durable_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
)

// Engine tests of the steps that wait: events, signals, child runs, maps.

type basket struct {
	ID    string
	Lines []int
}

type confirmation struct {
	By string
}

func TestEventWaitEngine(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		// On PostgreSQL, long enough for the event to reach yes's wait on a
		// loaded machine (both runs must wait first); only no waits it out.
		timeout := h.duration(48*time.Hour, 8*time.Second)
		wf := durable.NewWorkflow[basket]("confirm")
		sent := durable.Step(wf, "send-email", func(ctx durable.Context, o basket) (string, error) {
			return "mail-" + o.ID, nil
		})
		confirmed := durable.WaitForEvent[confirmation](wf, "confirmed", func(ctx durable.Context, o basket) (string, error) {
			mail, ok := sent.Output(ctx) // a parent's output may make the key
			if !ok {
				return "", errors.New("no mail")
			}
			return "confirm:" + mail, nil
		}, durable.After(sent), durable.WithWaitTimeout(timeout), durable.SkipOnTimeout())
		shipRef := durable.Step(wf, "ship", func(ctx durable.Context, o basket) (string, error) {
			c, ok := confirmed.Output(ctx)
			if !ok {
				return "", errors.New("not confirmed")
			}
			return "shipped for " + c.By, nil
		}, durable.After(confirmed))
		// With a second parent that completes either way, a step runs
		// whether the wait received its event or timed out, and branches on
		// Output's ok.
		recordRef := durable.Step(wf, "record", func(ctx durable.Context, o basket) (string, error) {
			if c, ok := confirmed.Output(ctx); ok {
				return "confirmed by " + c.By, nil
			}
			return "timed out", nil
		}, durable.After(sent, confirmed))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)

		yes, err := wf.RunNoWait(ctx, e, "acme", basket{ID: "o1"})
		require.NoError(t, err)
		no, err := wf.RunNoWait(ctx, e, "acme", basket{ID: "o2"})
		require.NoError(t, err)
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
			return stepState(t, e, yes, "confirmed") == durabletype.TaskWaiting && stepState(t, e, no, "confirmed") == durabletype.TaskWaiting
		}, "both runs wait")

		// Another tenant's event with the key reaches nothing.
		n, err := e.SendEvent(ctx, "globex", "confirm:mail-o1", confirmation{By: "intruder"})
		require.NoError(t, err)
		require.Zero(t, n)
		n, err = e.SendEvent(ctx, "acme", "confirm:mail-o1", confirmation{By: "alice"})
		require.NoError(t, err)
		require.Equal(t, 1, n)

		res := h.wait(e, yes, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		ship, err := shipRef.Result(res)
		require.NoError(t, err)
		require.Equal(t, "shipped for alice", ship)
		record, err := recordRef.Result(res)
		require.NoError(t, err)
		require.Equal(t, "confirmed by alice", record)
		got, err := confirmed.Result(res)
		require.NoError(t, err)
		require.Equal(t, confirmation{By: "alice"}, got)
		st, _ := res.Step("confirmed")
		require.Equal(t, "confirm:mail-o1", st.EventKey)

		// The other times out and is skipped, so is ship.
		res = h.wait(e, no, h.duration(72*time.Hour, time.Minute))
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.Equal(t, durabletype.TaskSkipped, states(res)["confirmed"])
		require.Equal(t, durabletype.TaskSkipped, states(res)["ship"], "its only parent was skipped")
		record, err = recordRef.Result(res)
		require.NoError(t, err)
		require.Equal(t, "timed out", record, "it has a completed parent: it runs, and reads the wait's output as absent")

		// Invalid events are refused, nothing sent.
		_, err = e.SendEvent(ctx, "acme", "", 1)
		require.ErrorIs(t, err, durabletype.ErrInvalidEvent)
		_, err = e.SendEvent(ctx, "", "k", 1)
		require.ErrorIs(t, err, durabletype.ErrInvalidEvent)
		_, err = e.SendEvent(ctx, "acme", "k\x00", 1)
		require.ErrorIs(t, err, durabletype.ErrInvalidEvent)
		_, err = e.SendEvent(ctx, "acme", "k", func() {})
		require.ErrorIs(t, err, durable.ErrEncode)
	})
}

func TestEventWaitTimeoutFails(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[string]("deadline")
		durable.WaitForEvent[int](wf, "w", func(ctx durable.Context, k string) (string, error) { return k, nil },
			durable.WithWaitTimeout(h.duration(24*time.Hour, time.Second)))
		failures := make(chan durable.Failure, 1)
		wf.OnFailure(func(ctx durable.Context, in string, f durable.Failure) error {
			failures <- f
			return nil
		})
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		id, err := wf.RunNoWait(ctx, e, "acme", "never")
		require.NoError(t, err)
		res := h.wait(e, id, h.duration(48*time.Hour, time.Minute))
		require.Equal(t, durabletype.RunFailed, res.Status)
		var re *durable.RunError
		require.ErrorAs(t, res.Err, &re)
		require.Equal(t, "w", re.Step)
		require.Contains(t, re.Message, `no event "never" within`)
		f := <-failures
		require.Equal(t, "w", f.Step)
	})
}

func TestEventKeyErrors(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[string]("keys")
		var attempts atomic.Int32
		durable.WaitForEvent[int](wf, "w", func(ctx durable.Context, k string) (string, error) {
			switch k {
			case "flaky":
				if attempts.Add(1) == 1 {
					return "", errors.New("lookup failed")
				}
				return "ok", nil
			case "panic":
				panic("boom")
			}
			return k, nil // "" and "bad\n" are invalid keys
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: 10 * time.Millisecond}))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		for _, k := range []string{"", "bad\n", "panic"} {
			id, err := wf.RunNoWait(ctx, e, "acme", k)
			require.NoError(t, err)
			res := h.wait(e, id, time.Minute)
			require.Equal(t, durabletype.RunFailed, res.Status, "key %q", k)
		}
		id, err := wf.RunNoWait(ctx, e, "acme", "flaky")
		require.NoError(t, err)
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool { return stepState(t, e, id, "w") == durabletype.TaskWaiting },
			"an error of the key function is retried")
		n, err := e.SendEvent(ctx, "acme", "ok", 7)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, durabletype.RunCompleted, h.wait(e, id, time.Minute).Status)
	})
}

func TestSignalEngine(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("approval")
		prep := durable.Step(wf, "prepare", func(ctx durable.Context, n int) (int, error) { return n, nil })
		approved := durable.WaitForSignal[string](wf, "approved", "approve", durable.After(prep))
		durable.Step(wf, "apply", func(ctx durable.Context, n int) (string, error) {
			by, _ := approved.Output(ctx)
			return fmt.Sprintf("%d by %s", n, by), nil
		}, durable.After(approved))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)

		// Sent before the step waits, and while it does.
		early, err := wf.RunNoWait(ctx, e, "acme", 1)
		require.NoError(t, err)
		require.NoError(t, e.Signal(ctx, early, "approve", "bob"))
		late, err := wf.RunNoWait(ctx, e, "acme", 2)
		require.NoError(t, err)
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool { return stepState(t, e, late, "approved") == durabletype.TaskWaiting },
			"the step waits")
		require.ErrorIs(t, e.Tenant("globex").Signal(ctx, late, "approve", "eve"), durabletype.ErrRunNotFound)
		require.NoError(t, e.Tenant("acme").Signal(ctx, late, "approve", "carol"))
		for id, want := range map[uuid.UUID]string{early: "1 by bob", late: "2 by carol"} {
			res := h.wait(e, id, time.Minute)
			require.Equal(t, durabletype.RunCompleted, res.Status)
			s, _ := res.Step("apply")
			require.JSONEq(t, fmt.Sprintf("%q", want), string(s.Output))
		}
		require.ErrorIs(t, e.Signal(ctx, early, "approve", "x"), durabletype.ErrRunSettled)
		require.ErrorIs(t, e.Signal(ctx, uuid.New(), "approve", "x"), durabletype.ErrRunNotFound)
		require.ErrorIs(t, e.Signal(ctx, early, "", "x"), durabletype.ErrInvalidEvent)
	})
}

func shippingWorkflows(fail *atomic.Int32) (*durable.Workflow[basket], *durable.Workflow[int], *durable.StepRef[string]) {
	child := durable.NewWorkflow[int]("ship-parcel")
	pack := durable.Step(child, "pack", func(ctx durable.Context, n int) (int, error) {
		if fail != nil && fail.Add(-1) >= 0 {
			return 0, durable.Terminal(errors.New("no boxes left"))
		}
		return n * 10, nil
	})
	label := durable.Step(child, "label", func(ctx durable.Context, n int) (string, error) {
		w, _ := pack.Output(ctx)
		return fmt.Sprintf("parcel of %d", w), nil
	}, durable.After(pack))
	parent := durable.NewWorkflow[basket]("checkout-with-child")
	ship := durable.Child(parent, "ship", child, label, func(ctx durable.Context, o basket) (int, error) {
		return len(o.Lines), nil
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: 10 * time.Millisecond}))
	durable.Step(parent, "notify", func(ctx durable.Context, o basket) (string, error) {
		p, _ := ship.Output(ctx)
		return "sent " + p, nil
	}, durable.After(ship))
	return parent, child, ship
}

func TestChildRunEngine(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		var fail atomic.Int32
		fail.Store(1) // the first child fails: the step's retry starts another
		parent, _, ship := shippingWorkflows(&fail)
		e := h.start(durable.Config{}, parent) // registers the child workflow too
		ctx := h.ctx(time.Minute)
		res, err := parent.Run(ctx, e, "acme", basket{ID: "o", Lines: []int{1, 2, 3}})
		require.NoError(t, err)
		got, err := ship.Result(res)
		require.NoError(t, err)
		require.Equal(t, "parcel of 30", got)
		s, _ := res.Step("ship")
		require.Equal(t, 2, s.Attempts)
		require.NotEqual(t, uuid.Nil, s.ChildRunID)

		kids, err := e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Parent: res.ID}})
		require.NoError(t, err)
		require.Len(t, kids.Runs, 2, "one child per attempt")
		var statuses []durabletype.RunStatus
		for _, k := range kids.Runs {
			require.Equal(t, res.ID, k.ParentID)
			require.Equal(t, "ship", k.ParentStep)
			require.Equal(t, "acme", k.Tenant)
			statuses = append(statuses, k.Status)
		}
		slices.Sort(statuses)
		require.Equal(t, []durabletype.RunStatus{durabletype.RunCompleted, durabletype.RunFailed}, statuses)
		child, err := e.Get(ctx, s.ChildRunID)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, child.Status)
		require.NotNil(t, child.Parent)
		require.Equal(t, res.ID, child.Parent.RunID)
	})
}

func TestCancelParentCancelsChild(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		child := durable.NewWorkflow[int]("slow-child")
		started := make(chan struct{}, 1)
		step := durable.Step(child, "work", func(ctx durable.Context, n int) (int, error) {
			started <- struct{}{}
			<-ctx.Done()
			return 0, context.Cause(ctx)
		})
		parent := durable.NewWorkflow[int]("parent")
		durable.Child(parent, "c", child, step, func(ctx durable.Context, n int) (int, error) { return n, nil })
		e := h.start(durable.Config{}, parent)
		ctx := h.ctx(time.Minute)
		id, err := parent.RunNoWait(ctx, e, "acme", 1)
		require.NoError(t, err)
		<-started
		require.NoError(t, e.Cancel(ctx, id, "customer left"))
		res := h.wait(e, id, time.Minute)
		require.Equal(t, durabletype.RunCancelled, res.Status)
		s, _ := res.Step("c")
		kid := h.wait(e, s.ChildRunID, time.Minute)
		require.Equal(t, durabletype.RunCancelled, kid.Status)
		require.Contains(t, kid.Err.Error(), "customer left")
	})
}

func TestMapEngine(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[basket]("lines")
		lines := durable.Step(wf, "lines", func(ctx durable.Context, o basket) ([]int, error) { return o.Lines, nil })
		var calls atomic.Int32
		charged := durable.Map(wf, "charge", lines, func(ctx durable.Context, line int) (string, error) {
			calls.Add(1)
			if line < 0 {
				return "", durable.Terminal(fmt.Errorf("negative line %d", line))
			}
			require.True(t, strings.HasPrefix(ctx.StepName(), "charge["), ctx.StepName())
			return fmt.Sprintf("c%d", line), nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: 10 * time.Millisecond}))
		total := durable.Step(wf, "total", func(ctx durable.Context, o basket) (string, error) {
			cs, ok := charged.Output(ctx)
			if !ok {
				return "", errors.New("no charges")
			}
			return strings.Join(cs, ","), nil
		}, durable.After(charged))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)

		in := make([]int, 50)
		for k := range in {
			in[k] = k
		}
		res, err := wf.Run(ctx, e, "acme", basket{Lines: in})
		require.NoError(t, err)
		got, err := charged.Result(res)
		require.NoError(t, err)
		require.Len(t, got, 50)
		require.Equal(t, "c0", got[0])
		require.Equal(t, "c49", got[49])
		sum, err := total.Result(res)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(sum, "c0,c1,c2,"), sum)
		s, _ := res.Step("charge")
		require.Len(t, s.Items, 50)
		require.Equal(t, 7, s.Items[7].Item)

		// Empty list: the map completes at once with an empty output.
		res, err = wf.Run(ctx, e, "acme", basket{})
		require.NoError(t, err)
		got, err = charged.Result(res)
		require.NoError(t, err)
		require.Empty(t, got)

		// A failing item fails the run.
		res, err = wf.Run(ctx, e, "acme", basket{Lines: []int{1, -2, 3}})
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.Equal(t, durabletype.RunFailed, res.Status)
		var re *durable.RunError
		require.ErrorAs(t, err, &re)
		require.Equal(t, "charge", re.Step)
		require.Contains(t, re.Message, "item 1: negative line -2")
	})
}

func TestMapReplayKeepsCompletedItems(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("fix-and-replay")
		list := durable.Step(wf, "list", func(ctx durable.Context, n int) ([]int, error) {
			out := make([]int, n)
			for k := range out {
				out[k] = k
			}
			return out, nil
		})
		var broken atomic.Bool
		broken.Store(true)
		var ran counter
		sq := durable.Map(wf, "square", list, func(ctx durable.Context, x int) (int, error) {
			ran.inc(fmt.Sprint(x))
			if x == 3 && broken.Load() {
				return 0, durable.Terminal(errors.New("bug"))
			}
			return x * x, nil
		})
		e := h.start(durable.Config{Concurrency: 1}, wf)
		ctx := h.ctx(time.Minute)
		res, err := wf.Run(ctx, e, "acme", 6)
		require.Error(t, err)
		require.Equal(t, durabletype.RunFailed, res.Status)
		// Items 4 and 5 may have been claimed before item 3's failure was
		// recorded and run after Run returned: stopping the engine waits for
		// whatever it still runs, so that the count before the replay is
		// complete.
		require.NoError(t, e.Stop(ctx))
		before := ran.snapshot()

		broken.Store(false) // the bug is fixed, and deployed
		e = h.start(durable.Config{Concurrency: 1}, wf)
		require.NoError(t, e.Replay(ctx, res.ID, durable.ReplayOptions{}))
		res = h.wait(e, res.ID, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		got, err := sq.Result(res)
		require.NoError(t, err)
		require.Equal(t, []int{0, 1, 4, 9, 16, 25}, got)
		// One worker slot: items ran one by one; 0, 1 and 2 completed, 3
		// failed, and 4 and 5 were cancelled (and may have started while
		// the failure was being recorded).
		after := ran.snapshot()
		for _, k := range []string{"0", "1", "2"} {
			require.Equal(t, 1, before[k], "item %s ran once before the replay", k)
			require.Equal(t, 1, after[k], "item %s completed before the replay: it kept its output", k)
		}
		for _, k := range []string{"3", "4", "5"} {
			require.Equal(t, before[k]+1, after[k], "item %s did not complete before the replay: it ran again", k)
		}
		for x := range 6 {
			require.Equal(t, durabletype.TaskCompleted, stepStateOfItem(res, "square", x))
		}
	})
}

// invoice is the input of the MapInput tests: the list to map over is a
// field of the run's input.
type invoice struct {
	ID    string
	Lines []invoiceLine
}

type invoiceLine struct {
	SKU   string
	Cents int
}

func TestMapInputEngine(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[*invoice]("invoice")
		var selected atomic.Int32
		var flaky counter
		priced := durable.MapInput(wf, "price", func(in *invoice) []invoiceLine {
			selected.Add(1)
			return in.Lines // panics on a nil invoice
		}, func(ctx durable.Context, l invoiceLine) (string, error) {
			if l.Cents < 0 {
				return "", durable.Terminal(fmt.Errorf("negative price of %s", l.SKU))
			}
			if l.SKU == "flaky" && flaky.inc(ctx.RunID().String()) == 1 {
				return "", errors.New("flaky")
			}
			return fmt.Sprintf("%s=%d", l.SKU, l.Cents), nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: 10 * time.Millisecond}))
		total := durable.Step(wf, "total", func(ctx durable.Context, in *invoice) (string, error) {
			ps, ok := priced.Output(ctx)
			if !ok {
				return "", errors.New("no prices")
			}
			return in.ID + ":" + strings.Join(ps, ","), nil
		}, durable.After(priced))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)

		// A root step: it starts with the run, and selects its items once;
		// an item's retry does not select them again.
		res, err := wf.Run(ctx, e, "acme", &invoice{ID: "inv-1", Lines: []invoiceLine{{"pen", 150}, {"flaky", 2}, {"pad", 499}}})
		require.NoError(t, err)
		got, err := priced.Result(res)
		require.NoError(t, err)
		require.Equal(t, []string{"pen=150", "flaky=2", "pad=499"}, got)
		sum, err := total.Result(res)
		require.NoError(t, err)
		require.Equal(t, "inv-1:pen=150,flaky=2,pad=499", sum)
		s, _ := res.Step("price")
		require.Empty(t, s.Parents, "a map over the input without After is a root step")
		require.Equal(t, durabletype.KindMap, s.Kind)
		require.Len(t, s.Items, 3)
		require.Equal(t, 2, s.Items[1].Attempts, "the flaky item was retried")
		require.Equal(t, int32(1), selected.Load(), "the items were selected once")

		// No lines, nil or empty: the map completes at once with an empty
		// output, as Map does on an empty list.
		for _, lines := range [][]invoiceLine{nil, {}} {
			res, err = wf.Run(ctx, e, "acme", &invoice{ID: "inv-2", Lines: lines})
			require.NoError(t, err)
			got, err = priced.Result(res)
			require.NoError(t, err)
			require.Empty(t, got)
			sum, err = total.Result(res)
			require.NoError(t, err)
			require.Equal(t, "inv-2:", sum)
		}

		// An item that fails for good fails the run, as with Map.
		res, err = wf.Run(ctx, e, "acme", &invoice{ID: "inv-3", Lines: []invoiceLine{{"pen", 1}, {"bad", -1}}})
		require.ErrorIs(t, err, durable.ErrRunFailed)
		var re *durable.RunError
		require.ErrorAs(t, err, &re)
		require.Equal(t, "price", re.Step)
		require.Contains(t, re.Message, "item 1: negative price of bad")

		// A nil invoice: the selector panics, and the step fails at once,
		// without retry, with an error that says where.
		before := selected.Load()
		res, err = wf.Run(ctx, e, "acme", nil)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		require.Equal(t, durabletype.RunFailed, res.Status)
		require.ErrorAs(t, err, &re)
		require.Equal(t, "price", re.Step)
		require.Contains(t, re.Message, `map step "price": selecting its items from the run's input: panic:`)
		require.Contains(t, re.Message, "nil pointer dereference")
		s, _ = res.Step("price")
		require.Equal(t, 1, s.Attempts, "a panicking selector is not retried")
		require.Equal(t, before+1, selected.Load())

		// The engine goes on serving runs.
		res, err = wf.Run(ctx, e, "acme", &invoice{ID: "inv-4", Lines: []invoiceLine{{"pen", 1}}})
		require.NoError(t, err)
		sum, err = total.Result(res)
		require.NoError(t, err)
		require.Equal(t, "inv-4:pen=1", sum)
	})
}

func TestMapInputAfterAndSkipIf(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[basket]("gated-map")
		gate := durable.Step(wf, "gate", func(ctx durable.Context, b basket) (bool, error) { return b.ID != "skip", nil })
		doubled := durable.MapInput(wf, "double", func(b basket) []int { return b.Lines },
			func(ctx durable.Context, x int) (int, error) { return 2 * x, nil },
			durable.After(gate), durable.SkipIf(gate, func(open bool) bool { return !open }))
		after := durable.Step(wf, "after", func(ctx durable.Context, b basket) (int, error) {
			d, ok := doubled.Output(ctx)
			if !ok {
				return -1, nil
			}
			return len(d), nil
		}, durable.After(gate, doubled))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)

		res, err := wf.Run(ctx, e, "acme", basket{ID: "go", Lines: []int{1, 2, 3}})
		require.NoError(t, err)
		got, err := doubled.Result(res)
		require.NoError(t, err)
		require.Equal(t, []int{2, 4, 6}, got)
		s, _ := res.Step("double")
		require.Equal(t, []string{"gate"}, s.Parents)

		res, err = wf.Run(ctx, e, "acme", basket{ID: "skip", Lines: []int{1, 2, 3}})
		require.NoError(t, err)
		s, _ = res.Step("double")
		require.Equal(t, durabletype.TaskSkipped, s.State)
		require.Empty(t, s.Items, "a skipped map selects nothing")
		n, err := after.Result(res)
		require.NoError(t, err)
		require.Equal(t, -1, n)

		var wi durable.WorkflowInfo
		for _, w := range e.Workflows() {
			if w.Name == "gated-map" {
				wi = w
			}
		}
		require.Len(t, wi.Steps, 3)
		require.Equal(t, durabletype.KindMap, wi.Steps[1].Kind)
		require.Empty(t, wi.Steps[1].MapOver, "it maps over the run's input")
	})
}

func TestMapInputReplayKeepsCompletedItems(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[[]int]("fix-and-replay-input")
		var broken atomic.Bool
		broken.Store(true)
		var ran counter
		sq := durable.MapInput(wf, "square", func(in []int) []int { return in }, func(ctx durable.Context, x int) (int, error) {
			ran.inc(fmt.Sprint(x))
			if x == 2 && broken.Load() {
				return 0, durable.Terminal(errors.New("bug"))
			}
			return x * x, nil
		})
		e := h.start(durable.Config{Concurrency: 1}, wf)
		ctx := h.ctx(time.Minute)
		res, err := wf.Run(ctx, e, "acme", []int{0, 1, 2, 3})
		require.Error(t, err)
		require.NoError(t, e.Stop(ctx)) // what still runs finishes: the counts are complete
		before := ran.snapshot()

		broken.Store(false)
		e = h.start(durable.Config{Concurrency: 1}, wf)
		require.NoError(t, e.Replay(ctx, res.ID, durable.ReplayOptions{}))
		res = h.wait(e, res.ID, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		got, err := sq.Result(res)
		require.NoError(t, err)
		require.Equal(t, []int{0, 1, 4, 9}, got)
		after := ran.snapshot()
		for _, k := range []string{"0", "1"} {
			require.Equal(t, 1, after[k], "item %s completed before the replay: it kept its output", k)
		}
		for _, k := range []string{"2", "3"} {
			require.Equal(t, before[k]+1, after[k], "item %s did not complete before the replay: it ran again", k)
		}
	})
}

// TestMapInputVersion: moving from a Map over a filler step to MapInput is
// a change of definition (a new fingerprint), and a map over the input is
// told apart from a map over its parent's list.
func TestMapInputVersion(t *testing.T) {
	t.Parallel()
	square := func(ctx durable.Context, x int) (int, error) { return x * x, nil }
	filler := durable.NewWorkflow[basket]("fp-map")
	lines := durable.Step(filler, "lines", func(ctx durable.Context, b basket) ([]int, error) { return b.Lines, nil })
	durable.Map(filler, "square", lines, square)

	input := func(after bool) string {
		wf := durable.NewWorkflow[basket]("fp-map")
		var opts []durable.StepOption
		if after {
			l := durable.Step(wf, "lines", func(ctx durable.Context, b basket) ([]int, error) { return b.Lines, nil })
			opts = append(opts, durable.After(l))
		}
		durable.MapInput(wf, "square", func(b basket) []int { return b.Lines }, square, opts...)
		return wf.Version()
	}
	require.Equal(t, input(false), input(false), "stable")
	require.NotEqual(t, filler.Version(), input(false), "the filler step is gone")
	require.NotEqual(t, filler.Version(), input(true), "same steps and parents, but the map takes its list from the input")
	require.NoError(t, newEngine(t).Register(filler))

	// The items' type counts, as a Map's list step's output does: a
	// MapInput over the same input whose items are objects is another
	// version.
	type priced struct {
		Lines []struct {
			Cents int `json:"cents"`
		} `json:"lines"`
	}
	objects := durable.NewWorkflow[priced]("fp-map")
	durable.MapInput(objects, "square", func(p priced) []struct {
		Cents int `json:"cents"`
	} {
		return p.Lines
	}, func(ctx durable.Context, l struct {
		Cents int `json:"cents"`
	}) (int, error) {
		return l.Cents, nil
	})
	ints := durable.NewWorkflow[priced]("fp-map")
	durable.MapInput(ints, "square", func(p priced) []int { return nil }, square)
	require.NotEqual(t, objects.Version(), ints.Version(), "the items' type is covered")
}

func stepStateOfItem(res *durable.RunResult, step string, k int) durabletype.TaskState {
	s, ok := res.Step(step)
	if !ok || k >= len(s.Items) {
		return ""
	}
	return s.Items[k].State
}

func TestWaitDefinitionErrors(t *testing.T) {
	child := durable.NewWorkflow[int]("c")
	cs := durable.Step(child, "s", func(ctx durable.Context, n int) (int, error) { return n, nil })
	other := durable.NewWorkflow[int]("other")
	os := durable.Step(other, "s", func(ctx durable.Context, n int) (int, error) { return n, nil })

	cases := map[string]func(wf *durable.Workflow[int]){
		"wait option on a step": func(wf *durable.Workflow[int]) {
			durable.Step(wf, "a", func(ctx durable.Context, n int) (int, error) { return n, nil }, durable.WithWaitTimeout(time.Second))
		},
		"skip without timeout": func(wf *durable.Workflow[int]) {
			durable.WaitForEvent[int](wf, "a", func(ctx durable.Context, n int) (string, error) { return "k", nil }, durable.SkipOnTimeout())
		},
		"lookback on a signal": func(wf *durable.Workflow[int]) {
			durable.WaitForSignal[int](wf, "a", "go", durable.WithLookback(time.Second))
		},
		"bad signal name": func(wf *durable.Workflow[int]) { durable.WaitForSignal[int](wf, "a", "") },
		"timeout on a wait": func(wf *durable.Workflow[int]) {
			durable.WaitForEvent[int](wf, "a", func(ctx durable.Context, n int) (string, error) { return "k", nil }, durable.WithTimeout(time.Second))
		},
		"result of another workflow": func(wf *durable.Workflow[int]) {
			durable.Child(wf, "a", child, os, func(ctx durable.Context, n int) (int, error) { return n, nil })
		},
		"nil key": func(wf *durable.Workflow[int]) { durable.WaitForEvent[int](wf, "a", nil) },
		"cap on a map": func(wf *durable.Workflow[int]) {
			l := durable.Step(wf, "l", func(ctx durable.Context, n int) ([]int, error) { return nil, nil })
			durable.Map(wf, "m", l, func(ctx durable.Context, x int) (int, error) { return x, nil },
				durable.WithConcurrency(func(n int) string { return "k" }, 1))
		},
		"nil map items": func(wf *durable.Workflow[int]) {
			durable.MapInput[int](wf, "m", nil, func(ctx durable.Context, x int) (int, error) { return x, nil })
		},
		"nil map function over the input": func(wf *durable.Workflow[int]) {
			durable.MapInput[int, int](wf, "m", func(n int) []int { return []int{n} }, nil)
		},
		"cap on a map over the input": func(wf *durable.Workflow[int]) {
			durable.MapInput(wf, "m", func(n int) []int { return []int{n} }, func(ctx durable.Context, x int) (int, error) { return x, nil },
				durable.WithConcurrency(func(n int) string { return "k" }, 1))
		},
		"map over another workflow's step": func(wf *durable.Workflow[int]) {
			l := durable.Step(other, "l", func(ctx durable.Context, n int) ([]int, error) { return nil, nil })
			durable.Map(wf, "m", l, func(ctx durable.Context, x int) (int, error) { return x, nil })
		},
	}
	_ = cs
	for name, declare := range cases {
		t.Run(name, func(t *testing.T) {
			wf := durable.NewWorkflow[int]("wf")
			declare(wf)
			e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
			require.NoError(t, err)
			err = e.Register(wf)
			var de *durable.DefinitionError
			require.ErrorAs(t, err, &de, "%v", err)
		})
	}
}
