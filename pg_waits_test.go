package durable_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// PostgreSQL races of the steps that wait: an event sent while the task
// that waits for it is being created, a child that settles while its
// parent is cancelled, events sent inside a caller's transaction. Several
// engines, each with a store of its own, as separate processes would have.

// TestPGEventSentWhileWaitBegins sends each run's event at the very moment
// its step computes the event's key, that is while the transaction that
// makes the task WAITING is about to run, from another engine, many times
// over. With a lookback every run receives its event exactly once,
// whichever commits first. Without one, the event is delivered if it was
// recorded at or after the wait began, else not: a run either completed
// with it or still waits, never received it twice, and a second event sent
// once it surely waits completes every run still waiting.
func TestPGEventSentWhileWaitBegins(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	const runs = 60
	for _, lookback := range []time.Duration{time.Minute, 0} {
		t.Run(fmt.Sprintf("lookback %s", lookback), func(t *testing.T) {
			name := "race-lookback"
			if lookback == 0 {
				name = "race-none"
			}
			computing := make(chan int, runs)
			release := make([]chan struct{}, runs)
			for n := range release {
				release[n] = make(chan struct{})
			}
			build := func() *durable.Workflow[int] {
				wf := durable.NewWorkflow[int](name)
				var opts []durable.StepOption
				if lookback > 0 {
					opts = append(opts, durable.WithLookback(lookback))
				}
				durable.WaitForEvent[string](wf, "wait", func(ctx durable.Context, n int) (string, error) {
					if ctx.Attempt() == 1 {
						computing <- n
						select {
						case <-release[n]:
						case <-ctx.Done():
							return "", ctx.Err()
						}
					}
					return fmt.Sprintf("%s-%d", name, n), nil
				}, opts...)
				return wf
			}
			var wfs []*durable.Workflow[int]
			var engines []*durable.Engine
			for range 3 {
				wf := build()
				wfs = append(wfs, wf)
				engines = append(engines, pgStart(t, env.newStore(t), durable.Config{Concurrency: runs}, wf))
			}
			sender := pgClient(t, env.newStore(t))
			ctx := pgCtx(t, 2*time.Minute)
			ids := make([]uuid.UUID, runs)
			for n := range runs {
				id, err := wfs[0].RunNoWait(ctx, sender, "acme", n)
				require.NoError(t, err)
				ids[n] = id
			}

			delivered := make([]int, runs)
			var wg sync.WaitGroup
			for range runs {
				n := <-computing
				wg.Go(func() {
					// The key is returned and the event sent at once, in
					// either order, a few milliseconds apart at most: jitter
					// that spreads the interleavings, not synchronisation.
					if rand.IntN(2) == 0 {
						close(release[n])
					}
					time.Sleep(time.Duration(rand.IntN(4_000)) * time.Microsecond)
					got, err := sender.SendEvent(ctx, "acme", fmt.Sprintf("%s-%d", name, n), "first")
					if err != nil {
						t.Errorf("run %d: %v", n, err)
					}
					delivered[n] = got
					select {
					case <-release[n]:
					default:
						close(release[n])
					}
				})
			}
			wg.Wait()

			var waiting []int
			pgEventually(t, time.Minute, func() bool {
				waiting = waiting[:0]
				for n, id := range ids {
					switch stepState(t, sender, id, "wait") {
					case durabletype.TaskCompleted:
					case durabletype.TaskWaiting:
						waiting = append(waiting, n)
					default:
						return false
					}
				}
				return true
			}, "every wait began")
			if lookback > 0 {
				require.Empty(t, waiting, "with a lookback every run receives the event sent as its wait began")
			}
			for _, n := range waiting {
				require.Zero(t, delivered[n], "run %d: SendEvent counted a delivery, yet it still waits", n)
				got, err := sender.SendEvent(ctx, "acme", fmt.Sprintf("%s-%d", name, n), "second")
				require.NoError(t, err)
				require.Equal(t, 1, got, "run %d waits: the second event is delivered", n)
			}
			t.Logf("lookback %s: %d of %d runs received the event sent as their wait began (%d delivered to a waiting step, the rest found by the wait), %d a later one",
				lookback, runs-len(waiting), runs, sum(delivered), len(waiting))
			for n, id := range ids {
				res := pgWait(t, engines[n%len(engines)], id, time.Minute)
				require.Equal(t, durabletype.RunCompleted, res.Status)
				s, _ := res.Step("wait")
				want := `"first"`
				if contains(waiting, n) {
					want = `"second"`
				}
				require.Equal(t, want, string(s.Output), "run %d", n)
				require.Len(t, eventsOfType(t, sender, id, "wait", durabletype.EventCompleted), 1, "run %d: one delivery", n)
			}
			requireInboxEmpty(t, env)
		})
	}
}

// TestPGChildSettlesWhileParentCancelled completes each child's last step
// at the moment its parent is cancelled, on other engines. Whichever wins,
// both settle and agree: a parent that completed used its completed
// child's result; a cancelled parent's child is settled (completed or
// cancelled); nothing waits and no message is left behind.
func TestPGChildSettlesWhileParentCancelled(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	const parents = 40
	var mu sync.Mutex
	release := map[int]chan struct{}{}
	for n := range parents {
		release[n] = make(chan struct{})
	}
	build := func() []durable.Definition {
		child := durable.NewWorkflow[int]("race-child")
		last := durable.Step(child, "last", func(ctx durable.Context, n int) (int, error) {
			mu.Lock()
			ch := release[n]
			mu.Unlock()
			select {
			case <-ch:
				return n * 10, nil
			case <-ctx.Done():
				return 0, context.Cause(ctx)
			}
		})
		parent := durable.NewWorkflow[int]("race-parent")
		durable.Child(parent, "c", child, last, func(ctx durable.Context, n int) (int, error) { return n, nil })
		return []durable.Definition{parent}
	}
	h := &harness{t: t, store: env.store, pg: env}
	engines := h.startMany(3, durable.Config{Concurrency: parents}, build)
	parent := build()[0].(*durable.Workflow[int])
	client := pgClient(t, env.newStore(t))
	ctx := pgCtx(t, 2*time.Minute)
	ids := make([]uuid.UUID, parents)
	for n := range parents {
		id, err := parent.RunNoWait(ctx, client, "acme", n)
		require.NoError(t, err)
		ids[n] = id
	}
	children := make([]uuid.UUID, parents)
	pgEventually(t, time.Minute, func() bool {
		for n, id := range ids {
			res, err := client.Get(ctx, id)
			require.NoError(t, err)
			s, _ := res.Step("c")
			if s.ChildRunID == uuid.Nil || stepState(t, client, s.ChildRunID, "last") != durabletype.TaskRunning {
				return false
			}
			children[n] = s.ChildRunID
		}
		return true
	}, "every child's step runs")

	cancelErrs := make([]error, parents)
	var wg sync.WaitGroup
	for n := range parents {
		wg.Go(func() { close(release[n]) })
		wg.Go(func() {
			// Jitter over the time the child's outcome takes to reach its
			// parent, so that either may win: not synchronisation.
			time.Sleep(time.Duration(rand.IntN(300_000)) * time.Microsecond)
			cancelErrs[n] = engines[n%3].Cancel(ctx, ids[n], "race")
		})
	}
	wg.Wait()
	var cancelled, completed int
	for n, id := range ids {
		p := pgWait(t, client, id, time.Minute)
		c := pgWait(t, client, children[n], time.Minute)
		switch p.Status {
		case durabletype.RunCancelled:
			cancelled++
			require.NoError(t, cancelErrs[n])
			require.Contains(t, []durabletype.RunStatus{durabletype.RunCompleted, durabletype.RunCancelled}, c.Status)
		case durabletype.RunCompleted:
			completed++
			require.ErrorIs(t, cancelErrs[n], durabletype.ErrRunSettled, "run %d completed first: cancel said %v", n, cancelErrs[n])
			require.Equal(t, durabletype.RunCompleted, c.Status)
			s, _ := p.Step("c")
			require.Equal(t, fmt.Sprint(n*10), string(s.Output))
		default:
			t.Fatalf("parent %d is %s", n, p.Status)
		}
	}
	t.Logf("%d parents cancelled, %d completed before the cancel", cancelled, completed)
	pgEventually(t, 30*time.Second, func() bool { return inboxCount(t, env) == 0 }, "messages left pending")
	var waiting int
	require.NoError(t, env.pool.QueryRow(ctx, `SELECT count(*) FROM `+env.schema+`.tasks WHERE state = 'WAITING'`).Scan(&waiting))
	require.Zero(t, waiting)
}

// TestPGSendEventTx sends events inside a caller's transaction: none is
// delivered before the commit, a rolled-back one never, a committed one
// right after, by the engines that hear the commit.
func TestPGSendEventTx(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	wf := durable.NewWorkflow[string]("tx-events")
	durable.WaitForEvent[int](wf, "wait", func(ctx durable.Context, k string) (string, error) { return k, nil })
	e := pgStart(t, env.store, durable.Config{}, wf)
	ctx := pgCtx(t, time.Minute)
	a, err := wf.RunNoWait(ctx, e, "acme", "a")
	require.NoError(t, err)
	b, err := wf.RunNoWait(ctx, e, "acme", "b")
	require.NoError(t, err)
	pgEventually(t, 30*time.Second, func() bool {
		return stepState(t, e, a, "wait") == durabletype.TaskWaiting && stepState(t, e, b, "wait") == durabletype.TaskWaiting
	}, "both wait")

	rolled, err := env.pool.Begin(ctx)
	require.NoError(t, err)
	n, err := e.SendEventTx(ctx, rolled, "acme", "a", 1)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one step waits for it")
	require.NoError(t, rolled.Rollback(ctx))

	tx, err := env.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = e.SendEventTx(ctx, tx, "acme", "b", 2)
	require.NoError(t, err)
	require.Equal(t, durabletype.TaskWaiting, stepState(t, e, b, "wait"), "not before the commit")
	require.NoError(t, tx.Commit(ctx))
	res := pgWait(t, e, b, 30*time.Second)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	require.Equal(t, durabletype.TaskWaiting, stepState(t, e, a, "wait"), "the rolled-back event was never sent")
	_, err = e.SendEventTx(ctx, "not a tx", "acme", "a", 1)
	require.Error(t, err)
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func eventsOfType(t *testing.T, e *durable.Engine, id uuid.UUID, step string, typ durabletype.EventType) []durabletype.Event {
	t.Helper()
	evs, err := e.Events(context.Background(), id)
	require.NoError(t, err)
	var out []durabletype.Event
	for _, ev := range evs {
		if ev.Step == step && ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func inboxCount(t *testing.T, env *pgEnv) int {
	t.Helper()
	var n int
	require.NoError(t, env.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+env.schema+`.inbox`).Scan(&n))
	return n
}

func requireInboxEmpty(t *testing.T, env *pgEnv) {
	t.Helper()
	require.Zero(t, inboxCount(t, env), "no message left pending")
}

var _ = errors.New
