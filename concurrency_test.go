package durable_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// purchase is the input of the workflows of these tests.
type purchase struct {
	Customer string
	N        int
}

// inFlight counts the executions of a step per key, and the most seen at
// once.
type inFlight struct {
	mu   sync.Mutex
	now  map[string]int
	most map[string]int
	runs atomic.Int64
}

func newInFlight() *inFlight { return &inFlight{now: map[string]int{}, most: map[string]int{}} }

func (f *inFlight) enter(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now[key]++
	f.most[key] = max(f.most[key], f.now[key])
	f.runs.Add(1)
}

func (f *inFlight) leave(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now[key]--
}

// TestConcurrencyKeys: three engines (each with its own store object on
// PostgreSQL, as three processes would have) run 40 runs of 5 customers;
// the capped step never runs more than its cap per customer at once across
// the engines, the workflow-wide cap holds likewise, and every run
// completes.
func TestConcurrencyKeys(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		const customers, perCustomer, stepCap = 5, 8, 2
		work := newInFlight()
		all := newInFlight()
		pause := h.duration(time.Second, 5*time.Millisecond)
		wf := durable.NewWorkflow[purchase]("capped").
			WithConcurrency(func(o purchase) string { return o.Customer }, 3)
		a := durable.Step(wf, "work", func(ctx durable.Context, o purchase) (int, error) {
			work.enter(o.Customer)
			defer work.leave(o.Customer)
			time.Sleep(pause)
			return o.N, nil
		}, durable.WithConcurrency(func(o purchase) string { return o.Customer }, stepCap))
		for _, name := range []string{"x", "y"} {
			durable.Step(wf, name, func(ctx durable.Context, o purchase) (int, error) {
				all.enter(o.Customer)
				defer all.leave(o.Customer)
				time.Sleep(pause)
				return o.N, nil
			}, durable.After(a))
		}
		for range 3 {
			h.startOn(h.another(), durable.Config{Concurrency: 8, DeadAfter: h.duration(30*time.Second, 10*time.Second)}, wf)
		}
		client := h.client()
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		var trig []durable.Trigger[purchase]
		for i := range customers * perCustomer {
			trig = append(trig, durable.Trigger[purchase]{Tenant: "t", Input: purchase{Customer: fmt.Sprint("c", i%customers), N: i}})
		}
		ids, err := wf.RunManyNoWait(ctx, client, trig)
		require.NoError(t, err)
		for _, id := range ids {
			res, err := client.Wait(ctx, id)
			require.NoError(t, err)
			require.Equal(t, durabletype.RunCompleted, res.Status, "run %s", id)
		}
		require.EqualValues(t, customers*perCustomer, work.runs.Load())
		for c, n := range work.most {
			require.LessOrEqual(t, n, stepCap, "customer %s: step cap", c)
		}
		for c, n := range all.most {
			require.LessOrEqual(t, n, 3, "customer %s: workflow cap (x and y)", c)
		}
		t.Logf("most at once per customer: work %v, x+y %v", work.most, all.most)
	})
}

// TestRateLimitKeys: at most n admissions per window and key, across three
// engines; the step's starts follow them; every run completes.
func TestRateLimitKeys(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		const n, runs = 3, 14
		per := h.duration(time.Minute, 400*time.Millisecond)
		wf := durable.NewWorkflow[purchase]("limited")
		durable.Step(wf, "call", func(ctx durable.Context, o purchase) (int, error) { return o.N, nil },
			durable.WithRateLimit(func(o purchase) string { return o.Customer }, n, per))
		for range 3 {
			h.startOn(h.another(), durable.Config{Concurrency: 8, DeadAfter: h.duration(30*time.Second, 10*time.Second)}, wf)
		}
		client := h.client()
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		var trig []durable.Trigger[purchase]
		for i := range runs {
			trig = append(trig, durable.Trigger[purchase]{Tenant: "t", Input: purchase{Customer: fmt.Sprint("c", i%2), N: i}})
		}
		ids, err := wf.RunManyNoWait(ctx, client, trig)
		require.NoError(t, err)
		admitted := map[string]int{} // customer/window -> admissions
		started := map[string]int{}
		for i, id := range ids {
			res, err := client.Wait(ctx, id)
			require.NoError(t, err)
			require.Equal(t, durabletype.RunCompleted, res.Status)
			evs, err := client.Events(ctx, id)
			require.NoError(t, err)
			for _, e := range evs {
				w := fmt.Sprintf("c%d/%d", i%2, e.At.UnixNano()/int64(per))
				switch {
				case e.Type == durabletype.EventQueued && e.DueAt.IsZero():
					admitted[w]++
				case e.Type == durabletype.EventQueued:
					require.Contains(t, e.Detail, "rate limit")
				case e.Type == durabletype.EventStarted:
					started[w]++
				}
			}
		}
		for w, k := range admitted {
			require.LessOrEqual(t, k, n, "window %s", w)
		}
		if h.virtual { // claims follow admissions at once in virtual time
			for w, k := range started {
				require.LessOrEqual(t, k, n, "started in window %s", w)
			}
		}
		require.GreaterOrEqual(t, len(admitted), runs/2/n, "the runs spread over windows")
		t.Logf("admissions per window: %v; starts: %v", admitted, started)
	})
}

// TestConcurrencyBadInput: invalid caps are definition errors; a key
// function that panics or returns an invalid key fails the trigger with
// ErrInvalidKey and starts nothing, and the engine goes on.
func TestConcurrencyBadInput(t *testing.T) {
	t.Parallel()
	e := newEngine(t)
	key := func(o purchase) string { return o.Customer }

	bad := durable.NewWorkflow[purchase]("bad-cap")
	durable.Step(bad, "a", noop[purchase], durable.WithConcurrency(key, 0))
	requireDefErr(t, e.Register(bad), durable.ErrInvalidLimit, "bad-cap", "a")

	badRate := durable.NewWorkflow[purchase]("bad-rate")
	durable.Step(badRate, "a", noop[purchase], durable.WithRateLimit(key, 1, 0))
	requireDefErr(t, e.Register(badRate), durable.ErrInvalidLimit, "bad-rate", "a")

	wrongType := durable.NewWorkflow[purchase]("wrong-type")
	durable.Step(wrongType, "a", noop[purchase], durable.WithConcurrency(func(s string) string { return s }, 1))
	requireDefErr(t, e.Register(wrongType), durable.ErrInvalidOption, "wrong-type", "a")

	sleepy := durable.NewWorkflow[purchase]("sleepy-cap")
	durable.Sleep(sleepy, "nap", time.Second, durable.WithConcurrency(key, 1))
	requireDefErr(t, e.Register(sleepy), durable.ErrInvalidOption, "sleepy-cap", "nap")

	nilKey := durable.NewWorkflow[purchase]("nil-key").WithConcurrency(nil, 1)
	durable.Step(nilKey, "a", noop[purchase])
	requireDefErr(t, e.Register(nilKey), durable.ErrNilFunc, "nil-key", "")

	wf := durable.NewWorkflow[purchase]("keyed")
	durable.Step(wf, "a", noop[purchase], durable.WithConcurrency(func(o purchase) string {
		if o.N < 0 {
			panic("negative")
		}
		return o.Customer
	}, 1))
	require.NoError(t, e.Register(wf))
	ctx := context.Background()
	for _, in := range []purchase{{Customer: "c", N: -1}, {Customer: ""}, {Customer: strings.Repeat("x", 201)}, {Customer: "a\nb"}} {
		_, err := wf.RunManyNoWait(ctx, e, []durable.Trigger[purchase]{{Tenant: "t", Input: purchase{Customer: "ok"}}, {Tenant: "t", Input: in}})
		require.ErrorIs(t, err, durabletype.ErrInvalidKey, "%+v", in)
	}
	list, err := e.ListRuns(ctx, durable.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Runs, "nothing was created")
	id, err := wf.RunNoWait(ctx, e, "t", purchase{Customer: "ok"})
	require.NoError(t, err)
	require.NotEqual(t, uuid.Nil, id)
}
