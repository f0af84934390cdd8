package durable

// The engine's services run alone against the in-memory store, in a
// testing/synctest bubble: each is started on a runtime of its own
// (newRuntime) without the others.

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/service/completer"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

var discard = slog.New(slog.DiscardHandler)

// serviceEngine returns an engine on s, not started, serving workflow
// "svc" (one step, "s"), and a runtime whose services are not started.
func serviceEngine(t *testing.T, s store.Store, cfg Config) (*Engine, *Workflow[int], *runtime) {
	t.Helper()
	cfg.Logger = discard
	e, err := New(s, cfg)
	require.NoError(t, err)
	wf := NewWorkflow[int]("svc")
	Step(wf, "s", func(ctx Context, n int) (int, error) { return n, nil })
	require.NoError(t, e.Register(wf))
	return e, wf, e.newRuntime(t.Context())
}

// claimOne claims one task of e's workflows for e, as its claim loop
// would, and records it as one of rt's flights; it returns the claim and
// the step's context.
func claimOne(t *testing.T, e *Engine, rt *runtime) (*store.ClaimedTask, context.Context) {
	t.Helper()
	names, queues := e.servedQueues()
	claimed, err := e.store.ClaimTasks(t.Context(), &store.ClaimTasksParams{
		WorkerID: e.cfg.WorkerID, Limit: 1, Workflows: names, Queues: queues,
	})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	ctx, cancel := context.WithCancelCause(rt.work)
	rt.steps.Add(claimed[0].Ref(), cancel)
	return claimed[0], ctx
}

// taskOf returns the task of run id named step.
func taskOf(t *testing.T, s store.Store, id uuid.UUID, step string) *store.Task {
	t.Helper()
	tasks, err := s.ListTasks(t.Context(), id)
	require.NoError(t, err)
	for _, task := range tasks {
		if task.Name == step {
			return task
		}
	}
	t.Fatalf("run %s has no step %s", id, step)
	return nil
}

// The heartbeat service stamps the claims of the running steps every
// HeartbeatInterval, so that no rescue takes them; once stopped, it stamps
// nothing, and the leader may rescue the step; started again, it finds the
// claim lost and cancels the step (ErrClaimLost).
func TestHeartbeatService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := memstore.New()
		e, wf, rt := serviceEngine(t, st, Config{WorkerID: "hb"})
		defer rt.cancel()
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		_, stepCtx := claimOne(t, e, rt)
		every, deadAfter := e.cfg.HeartbeatInterval, e.cfg.DeadAfter
		rescue := func() int {
			res, err := st.RescueTasks(ctx, &store.RescueTasksParams{DeadAfter: deadAfter, Limit: 10})
			require.NoError(t, err)
			return len(res.Rescued)
		}

		require.NoError(t, rt.heartbeat.Start(rt.ctx))
		<-rt.heartbeat.Started()
		time.Sleep(2*deadAfter + every/2)
		synctest.Wait()
		require.WithinDuration(t, time.Now().Add(-every/2), taskOf(t, st, id, "s").HeartbeatAt, 0, "stamped at the last beat")
		require.Zero(t, rescue(), "a step whose claim is vouched for is not rescued")

		rt.heartbeat.Stop()
		last := taskOf(t, st, id, "s").HeartbeatAt
		time.Sleep(deadAfter + every)
		require.WithinDuration(t, last, taskOf(t, st, id, "s").HeartbeatAt, 0, "no stamp once stopped")
		require.Equal(t, 1, rescue(), "the step of a worker that stopped vouching is rescued")
		require.NoError(t, stepCtx.Err(), "the step is told at the next heartbeat, not before")

		require.NoError(t, rt.heartbeat.Start(rt.ctx))
		time.Sleep(every)
		synctest.Wait()
		require.ErrorIs(t, context.Cause(stepCtx), ErrClaimLost)
		rt.heartbeat.Stop()
	})
}

// The heartbeat service tells a step whose run was cancelled: the store
// says so at the next heartbeat (ErrRunCancelled).
func TestHeartbeatServiceRunCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := memstore.New()
		e, wf, rt := serviceEngine(t, st, Config{WorkerID: "hb"})
		defer rt.cancel()
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		_, stepCtx := claimOne(t, e, rt)
		require.NoError(t, rt.heartbeat.Start(rt.ctx))
		defer rt.heartbeat.Stop()
		require.NoError(t, e.Cancel(ctx, id, "test"))
		synctest.Wait()
		require.NoError(t, stepCtx.Err(), "without a listener, the step learns it at the next heartbeat")
		time.Sleep(e.cfg.HeartbeatInterval)
		synctest.Wait()
		require.ErrorIs(t, context.Cause(stepCtx), ErrRunCancelled)
	})
}

// A cancel whose notification was missed (sent before the listener
// subscribed, or while it reconnected) reaches the step when the listener
// resyncs: the resync makes the heartbeat service vouch at once, not at the
// next beat.
func TestHeartbeatServiceResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := memstore.New()
		e, wf, rt := serviceEngine(t, st, Config{WorkerID: "hb"})
		defer rt.cancel()
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		_, stepCtx := claimOne(t, e, rt)
		require.NoError(t, rt.heartbeat.Start(rt.ctx))
		defer rt.heartbeat.Stop()
		require.NoError(t, e.Cancel(ctx, id, "test")) // no listener: missed
		synctest.Wait()
		require.NoError(t, stepCtx.Err())
		begin := time.Now()
		rt.listener.Deliver(store.Notification{Topic: store.TopicResync})
		synctest.Wait()
		require.ErrorIs(t, context.Cause(stepCtx), ErrRunCancelled)
		require.Zero(t, time.Since(begin), "at the resync, not at the next heartbeat")
	})
}

// The registrar registers the worker (Register, before Start), refreshes
// its record every dag.WorkerRefresh(DeadAfter) and at once when asked,
// and removes it last (Remove, after Stop).
func TestRegistrarService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := memstore.New()
		e, wf, rt := serviceEngine(t, st, Config{WorkerID: "reg"})
		defer rt.cancel()
		record := func() *store.Worker {
			res, err := st.ListWorkers(ctx, &store.ListWorkersParams{})
			require.NoError(t, err)
			for i := range res.Workers {
				if res.Workers[i].ID == "reg" {
					return &res.Workers[i]
				}
			}
			return nil
		}

		e.mu.Lock()
		rt.registrar.Register(ctx, e.recordOf(rt, e.reg.record()))
		e.mu.Unlock()
		w := record()
		require.NotNil(t, w, "listed once registered")
		require.Equal(t, []string{dag.Queue("svc", e.reg.newest("svc").shape.Version)}, w.Workflows)
		registeredAt := w.LastSeen

		require.NoError(t, rt.registrar.Start(rt.ctx))
		every := dag.WorkerRefresh(e.cfg.DeadAfter)
		time.Sleep(every)
		synctest.Wait()
		require.WithinDuration(t, registeredAt.Add(every), record().LastSeen, 0, "refreshed every %s", every)

		// Asked, it refreshes at once: a step began.
		_, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		claimOne(t, e, rt)
		rt.registrar.Refresh()
		synctest.Wait()
		require.Equal(t, 1, record().InFlight, "refreshed when asked")

		rt.registrar.Stop()
		time.Sleep(every)
		synctest.Wait()
		require.WithinDuration(t, registeredAt.Add(every), record().LastSeen, 0, "no refresh once stopped")
		rt.registrar.Remove(ctx)
		require.Nil(t, record(), "removed")
	})
}

// bare hides every optional interface of a store.
type bare struct{ store.Store }

// On a store without a registry of workers, the registrar does nothing;
// on one without notifications, neither does the listener.
func TestServicesWithoutCapabilities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, rt := serviceEngine(t, bare{memstore.New()}, Config{})
		defer rt.cancel()
		rt.registrar.Register(t.Context(), store.Worker{ID: "w"})
		require.NoError(t, rt.registrar.Start(rt.ctx))
		require.NoError(t, rt.listener.Start(rt.ctx))
		synctest.Wait()
		for _, c := range []<-chan struct{}{rt.registrar.Started(), rt.listener.Started()} {
			select {
			case <-c:
				t.Fatal("a service without its store's capability started a goroutine")
			default:
			}
		}
		rt.registrar.Stop()
		rt.listener.Stop()
		rt.registrar.Remove(t.Context())
	})
}

// The listener delivers the store's notifications: a run triggered wakes
// the claim loop, which claims its task at once rather than at its next
// poll.
func TestListenerService(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, wf, rt := serviceEngine(t, memstore.New(), Config{PollInterval: time.Minute, MaxPollInterval: time.Minute})
		defer rt.cancel()
		require.NoError(t, rt.claimer.Start(rt.ctx))
		synctest.Wait() // nothing to claim: it waits a minute, or for a wake-up
		require.NoError(t, rt.listener.Start(rt.ctx))
		synctest.Wait()
		begin := time.Now()
		id, err := wf.RunNoWait(t.Context(), e, "t", 1)
		require.NoError(t, err)
		synctest.Wait()
		require.Equal(t, durabletype.TaskRunning, taskOf(t, e.store, id, "s").State, "claimed (its outcome is not recorded: no completer)")
		require.Zero(t, time.Since(begin), "at once")
		rt.claimer.Stop()
		rt.listener.Stop()
		require.False(t, e.notifying.Load())
		rt.execs.Wait()
	})
}

// failingFinish is a memory store whose FinishTasks fails transiently
// while failing is set.
type failingFinish struct {
	*memstore.Store
	mu      sync.Mutex
	failing bool
}

func (s *failingFinish) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	s.mu.Lock()
	failing := s.failing
	s.mu.Unlock()
	if failing {
		return nil, durabletype.ErrTransient
	}
	return s.Store.FinishTasks(ctx, p)
}

// The completer records the outcomes queued before its queue closes
// (drain); while the store fails, it tries again until drain's deadline,
// then gives up and counts them lost.
func TestCompleterService(t *testing.T) {
	for _, failing := range []bool{false, true} {
		t.Run(map[bool]string{false: "recorded", true: "given up"}[failing], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				st := &failingFinish{Store: memstore.New(), failing: failing}
				e, wf, rt := serviceEngine(t, st, Config{})
				defer rt.cancel()
				var ids []uuid.UUID
				for i := range 3 {
					id, err := wf.RunNoWait(ctx, e, "t", i)
					require.NoError(t, err)
					ids = append(ids, id)
				}
				require.NoError(t, rt.completer.Start(rt.ctx))
				for range ids {
					c, _ := claimOne(t, e, rt)
					rt.completer.Send(completer.Message[outcomeMeta]{Outcome: store.Outcome{Task: c.Ref(), Kind: store.OutcomeComplete, Output: []byte("1")}})
				}
				deadline, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				begin := time.Now()
				rt.completer.Drain(deadline)
				rt.completer.Drain(deadline) // again: nothing
				if failing {
					require.Equal(t, time.Minute, time.Since(begin), "tried again until the deadline")
					lost, lostErr := rt.completer.Lost()
					require.Equal(t, 3, lost, "the outcomes are counted lost")
					require.ErrorIs(t, lostErr, durabletype.ErrTransient)
					return
				}
				require.Zero(t, time.Since(begin))
				lost, _ := rt.completer.Lost()
				require.Zero(t, lost)
				for _, id := range ids {
					require.Equal(t, durabletype.TaskCompleted, taskOf(t, st, id, "s").State)
				}
				require.Zero(t, rt.steps.Len(), "recorded outcomes are no longer in flight")
			})
		})
	}
}

// passes is a memory store that notes when the upgrade loop lists the
// runs of version "1".
type passes struct {
	*memstore.Store
	mu sync.Mutex
	at []time.Time
}

func (s *passes) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.ListRunsResult, error) {
	if p.Filter.Version == "1" {
		s.mu.Lock()
		s.at = append(s.at, time.Now())
		s.mu.Unlock()
	}
	return s.Store.ListRuns(ctx, p)
}

// gaps returns the time between the passes noted since the k-th.
func (s *passes) gaps(k int) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for i := k + 1; i < len(s.at); i++ {
		out = append(out, s.at[i].Sub(s.at[i-1]))
	}
	return out
}

func (s *passes) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

// The upgrade service moves the runs of accepted versions at once, then
// again after a pause that doubles from a second up to upgradeMaxPause
// while passes move nothing; a pass that moves runs, or a registration
// (rt.upgradeSig), brings the pause back to a second.
func TestUpgradeServiceBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := &passes{Store: memstore.New()}
		e, err := New(st, Config{Logger: discard})
		require.NoError(t, err)
		build := func(version string) *Workflow[int] {
			wf := NewWorkflow[int]("up").WithVersion(version)
			Step(wf, "s", func(ctx Context, n int) (int, error) { return n, nil })
			return wf
		}
		v1, v2 := build("1"), build("2").Accepts("1")
		require.NoError(t, e.Register(v1, v2))
		rt := e.newRuntime(ctx)
		defer rt.cancel()

		require.NoError(t, rt.upgrader.Start(rt.ctx))
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		s := time.Second
		require.Equal(t, []time.Duration{2 * s, 4 * s, 8 * s, 16 * s, 32 * s, time.Minute, time.Minute}, st.gaps(0),
			"a pass at once, then pauses doubling up to a minute")

		// A run of version 1 is moved at the next pass; the pause after a
		// pass that moved runs is a second.
		id, err := v1.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		k := st.count() - 1
		time.Sleep(time.Minute + 4*time.Second)
		synctest.Wait()
		require.Equal(t, []time.Duration{time.Minute, s, 2 * s}, st.gaps(k)[:3])
		run, err := st.GetRun(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "2", run.Version, "moved to the version that accepts it")

		// Asked (a registration), it passes at once and pauses from a
		// second again.
		time.Sleep(5 * time.Minute)
		k = st.count() - 1
		signal(rt.upgradeSig)
		synctest.Wait()
		time.Sleep(2 * s)
		synctest.Wait()
		require.Len(t, st.gaps(k), 2)
		require.Equal(t, 2*s, st.gaps(k)[1], "after the pass asked for, a pause of two seconds (doubled from one)")

		rt.upgrader.Stop()
		n := st.count()
		time.Sleep(time.Hour)
		require.Equal(t, n, st.count(), "no pass once stopped")
	})
}

// journal is a memory store that notes, once told to, the calls a
// stopping engine makes; its FinishTasks takes finishTakes.
type journal struct {
	*memstore.Store
	finishTakes time.Duration
	mu          sync.Mutex
	on          bool
	calls       []string
}

func (s *journal) note(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on {
		s.calls = append(s.calls, call)
	}
}

func (s *journal) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = true
}

func (s *journal) taken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *journal) ClaimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	s.note("claim")
	return s.Store.ClaimTasks(ctx, p)
}

func (s *journal) Heartbeat(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	s.note("heartbeat")
	return s.Store.Heartbeat(ctx, p)
}

func (s *journal) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	s.note("finish")
	time.Sleep(s.finishTakes)
	defer s.note("finished")
	return s.Store.FinishTasks(ctx, p)
}

func (s *journal) RemoveWorker(ctx context.Context, p *store.RemoveWorkerParams) error {
	s.note("remove")
	return s.Store.RemoveWorker(ctx, p)
}

// Stop stops the services in the order the graceful stop needs: no claim
// once it began; the running step finishes; heartbeats vouch for its claim
// while its outcome is being recorded, and stop then; the worker's record
// is removed last.
func TestStopOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := &journal{Store: memstore.New(), finishTakes: 12 * time.Second}
		e, err := New(st, Config{Logger: discard, WorkerID: "stopping"})
		require.NoError(t, err)
		release := make(chan struct{})
		wf := NewWorkflow[int]("order")
		Step(wf, "s", func(ctx Context, n int) (int, error) { <-release; return n, nil })
		require.NoError(t, e.Register(wf))
		require.NoError(t, e.Start(ctx))
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		synctest.Wait() // the step runs

		st.start()
		stopped := make(chan error, 1)
		go func() { stopped <- e.Stop(ctx) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.NotContains(t, st.taken(), "finish", "Stop waits for the running step")
		close(release)
		require.NoError(t, <-stopped)

		calls := st.taken()
		require.NotContains(t, calls, "claim", "claiming stops first")
		finish, finished := slices.Index(calls, "finish"), slices.Index(calls, "finished")
		require.Positive(t, finish, "heartbeats while the step drains: %v", calls)
		require.Contains(t, calls[finish:finished], "heartbeat", "and while its outcome is recorded: %v", calls)
		require.NotContains(t, calls[finished:], "heartbeat", "not after: %v", calls)
		require.Equal(t, "remove", calls[len(calls)-1], "the record goes last: %v", calls)
		require.Equal(t, durabletype.TaskCompleted, taskOf(t, st, id, "s").State)
	})
}
