package durable_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// DAG shapes: outputs flow to children, fan-out runs in parallel, fan-in
// waits for every parent. Each test runs on both stores (suite_test.go).

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// TestLinearOutputsFlow: a -> b -> c; every step gets the run's input,
// outputs flow to children, and each step is queued, started and completed
// once.
func TestLinearOutputsFlow(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var inputs counter
		wf := durable.NewWorkflow[order]("linear")
		a := durable.Step(wf, "a", func(ctx durable.Context, in order) (string, error) {
			inputs.inc(fmt.Sprint(in))
			return "A(" + in.ID + ")", nil
		})
		b := durable.Step(wf, "b", func(ctx durable.Context, in order) (string, error) {
			inputs.inc(fmt.Sprint(in))
			prev, ok := a.Output(ctx)
			if !ok {
				return "", fmt.Errorf("no output from a")
			}
			return prev + "->B", nil
		}, durable.After(a))
		c := durable.Step(wf, "c", func(ctx durable.Context, in order) (int, error) {
			inputs.inc(fmt.Sprint(in))
			prev, ok := b.Output(ctx)
			if !ok {
				return 0, fmt.Errorf("no output from b")
			}
			return len(prev) + in.Amount, nil
		}, durable.After(b))
		e := h.start(durable.Config{}, wf)

		in := order{ID: "o-1", Amount: 100}
		res, err := wf.Run(h.ctx(30*time.Second), e, "tenant-1", in)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.True(t, res.Done())
		require.Nil(t, res.Err)
		require.Equal(t, map[string]int{fmt.Sprint(in): 3}, inputs.snapshot(), "every step receives the run's input")
		outA, err := a.Result(res)
		require.NoError(t, err)
		require.Equal(t, "A(o-1)", outA)
		outB, err := b.Result(res)
		require.NoError(t, err)
		require.Equal(t, "A(o-1)->B", outB)
		outC, err := c.Result(res)
		require.NoError(t, err)
		require.Equal(t, len("A(o-1)->B")+100, outC)
		for _, s := range res.Steps {
			require.Equal(t, durabletype.TaskCompleted, s.State, s.Name)
			require.Equal(t, 1, s.Attempts, s.Name)
			require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, stepEvents(t, e, res.ID, s.Name), s.Name)
		}
	})
}

// TestRunNoWaitBeforeStart: runs triggered on an engine before its Start
// wait in the store, and the engine runs them once started.
func TestRunNoWaitBeforeStart(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("early")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in * 2, nil })
		e, err := durable.New(h.store, h.config(durable.Config{}))
		require.NoError(t, err)
		require.NoError(t, e.Register(wf))
		ctx := h.ctx(30 * time.Second)
		var ids []uuid.UUID
		for i := range 3 {
			id, err := wf.RunNoWait(ctx, e, "t", i)
			require.NoError(t, err)
			ids = append(ids, id)
		}
		res, err := e.Get(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, durabletype.RunRunning, res.Status, "recorded, waiting for a worker")
		require.NoError(t, e.Start(ctx))
		t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })
		for i, id := range ids {
			res := h.wait(e, id, h.duration(time.Minute, 30*time.Second))
			require.Equal(t, durabletype.RunCompleted, res.Status)
			v, err := a.Result(res)
			require.NoError(t, err)
			require.Equal(t, 2*i, v)
		}
	})
}

// TestRunNoWaitThenWaitAndGet: RunNoWait returns the run's ID at once; Get
// shows the run in progress, Wait its result; unknown IDs are
// ErrRunNotFound.
func TestRunNoWaitThenWaitAndGet(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		started := make(chan struct{})
		release := make(chan struct{})
		wf := durable.NewWorkflow[int]("nowait")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			return in * 2, nil
		})
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(30 * time.Second)
		id, err := wf.RunNoWait(ctx, e, "t", 21)
		require.NoError(t, err)
		require.NotEqual(t, uuid.Nil, id)
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the step never started")
		}
		res, err := e.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunRunning, res.Status)
		require.False(t, res.Done())
		s, ok := res.Step("a")
		require.True(t, ok)
		require.Equal(t, durabletype.TaskRunning, s.State)

		close(release)
		res, err = e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		v, err := a.Result(res)
		require.NoError(t, err)
		require.Equal(t, 42, v)

		_, err = e.Get(ctx, uuid.New())
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
		_, err = e.Wait(ctx, uuid.New())
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	})
}

// TestDiamond: a -> (b, c) -> d; d sees both outputs and is enqueued once,
// after its second parent.
func TestDiamond(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("diamond")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		b := durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) {
			v, _ := a.Output(ctx)
			return v + 1, nil
		}, durable.After(a))
		c := durable.Step(wf, "c", func(ctx durable.Context, in int) (int, error) {
			v, _ := a.Output(ctx)
			return v * 10, nil
		}, durable.After(a))
		d := durable.Step(wf, "d", func(ctx durable.Context, in int) ([2]int, error) {
			vb, okb := b.Output(ctx)
			vc, okc := c.Output(ctx)
			if !okb || !okc {
				return [2]int{}, fmt.Errorf("missing parent output")
			}
			return [2]int{vb, vc}, nil
		}, durable.After(b, c))
		e := h.start(durable.Config{}, wf)
		res, err := wf.Run(h.ctx(30*time.Second), e, "t", 5)
		require.NoError(t, err)
		out, err := d.Result(res)
		require.NoError(t, err)
		require.Equal(t, [2]int{6, 50}, out)
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, stepEvents(t, e, res.ID, "d"))
	})
}

// TestFanOutFanIn: a -> m0..m5 -> f. The middle steps run at the same time:
// each waits until all have started, which cannot happen if they ran one
// after another (the wait's timeout then passes, at once in virtual time,
// and fails the step). The join sees every output, and each step runs once.
func TestFanOutFanIn(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		const width = 6
		var ran counter
		var startedN atomic.Int32
		allStarted := make(chan struct{})
		wf := durable.NewWorkflow[int]("wide")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		var mids []durable.Parent
		var refs []*durable.StepRef[int]
		for i := range width {
			r := durable.Step(wf, fmt.Sprintf("m%d", i), func(ctx durable.Context, in int) (int, error) {
				if ran.inc(ctx.StepName()) == 1 && startedN.Add(1) == width {
					close(allStarted)
				}
				select {
				case <-allStarted:
				case <-ctx.Done():
					return 0, ctx.Err()
				case <-time.After(20 * time.Second):
					return 0, durable.Terminal(errors.New("the middle steps did not run in parallel"))
				}
				v, _ := a.Output(ctx)
				return v + i, nil
			}, durable.After(a))
			mids = append(mids, r)
			refs = append(refs, r)
		}
		f := durable.Step(wf, "f", func(ctx durable.Context, in int) (int, error) {
			return sumOutputs(ctx, refs)
		}, durable.After(mids...))
		e := h.start(durable.Config{}, wf)

		res, err := wf.Run(h.ctx(time.Minute), e, "t", 10)
		require.NoError(t, err)
		sum, err := f.Result(res)
		require.NoError(t, err)
		require.Equal(t, width*10+(width*(width-1))/2, sum)
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, stepEvents(t, e, res.ID, "f"))
		for i := range width {
			require.Equal(t, 1, ran.get(fmt.Sprintf("m%d", i)), "m%d ran more than once", i)
		}
	})
}

// TestTwoRoots: a workflow may have several roots; they start together,
// without waiting for each other, and a join sees both.
func TestTwoRoots(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		var running atomic.Int32
		together := make(chan struct{})
		root := func(ctx durable.Context, in int) (int, error) {
			if running.Add(1) == 2 {
				close(together)
			}
			select {
			case <-together: // both roots start without waiting for each other
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(20 * time.Second):
				return 0, durable.Terminal(errors.New("the roots did not run at the same time"))
			}
			return in, nil
		}
		wf := durable.NewWorkflow[int]("roots")
		a := durable.Step(wf, "a", root)
		b := durable.Step(wf, "b", root)
		j := durable.Step(wf, "join", func(ctx durable.Context, in int) (int, error) {
			va, _ := a.Output(ctx)
			vb, _ := b.Output(ctx)
			return va + vb, nil
		}, durable.After(a, b))
		e := h.start(durable.Config{}, wf)
		res, err := wf.Run(h.ctx(30*time.Second), e, "t", 7)
		require.NoError(t, err)
		v, err := j.Result(res)
		require.NoError(t, err)
		require.Equal(t, 14, v)
	})
}

// TestWaitWakesOnNotify: Run returns promptly after its run settles, woken
// by the store's notification (NOTIFY on PostgreSQL) rather than by Wait's
// polling. A one-step run returns within a bound of its trigger (at once in
// virtual time); and a run whose step takes 3s returns right after the
// step, well before Wait's polling would have noticed (its delay doubles
// from 10ms while the engine receives notifications: checks at about 2.55s
// and 5.11s).
func TestWaitWakesOnNotify(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		ctx := h.ctx(time.Minute)
		quick := durable.NewWorkflow[int]("quick")
		durable.Step(quick, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		var ended atomic.Int64
		slow := durable.NewWorkflow[int]("slow")
		durable.Step(slow, "a", func(ctx durable.Context, in int) (int, error) {
			select {
			case <-time.After(3 * time.Second): // the step's own work
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			ended.Store(time.Now().UnixNano())
			return in, nil
		})
		e := h.start(durable.Config{}, quick, slow)
		_, err := quick.Run(ctx, e, "t", 0) // warm up: listener connected, statements prepared
		require.NoError(t, err)

		var lat []time.Duration
		for i := range 5 {
			start := time.Now()
			res, err := quick.Run(ctx, e, "t", i)
			d := time.Since(start)
			require.NoError(t, err)
			require.Equal(t, durabletype.RunCompleted, res.Status)
			lat = append(lat, d)
		}
		slices.Sort(lat)
		t.Logf("one-step Run, trigger to return: %v (median %s)", lat, lat[len(lat)/2])
		if h.virtual {
			require.Zero(t, lat[len(lat)-1], "a one-step Run takes no virtual time")
		}
		// On PostgreSQL the bound leaves room for a loaded machine (-race,
		// other packages' tests); the latency itself is a benchmark's.
		require.Less(t, lat[len(lat)/2], h.duration(500*time.Millisecond, 2*time.Second), "median trigger→return latency")

		start := time.Now()
		res, err := slow.Run(ctx, e, "t", 1)
		require.NoError(t, err)
		returned := time.Now()
		require.Equal(t, durabletype.RunCompleted, res.Status)
		afterStep := returned.Sub(time.Unix(0, ended.Load()))
		t.Logf("3s step: Run returned %s after the step ended (%s after the trigger)", afterStep, returned.Sub(start))
		if h.virtual {
			require.Zero(t, afterStep, "Wait was not woken by the run's notification")
		}
		// Without the notification, Wait's next poll would come about 2 s
		// after the step ended.
		require.Less(t, afterStep, 1500*time.Millisecond, "Wait was not woken by the run's notification")
	})
}
