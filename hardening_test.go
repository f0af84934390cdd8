package durable_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Inputs and interleavings that once wedged or misled the engine, each on
// both stores.

// logRecorder is a slog handler keeping every message, with its level.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) logger() *slog.Logger { return slog.New(l) }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Level.String()+" "+r.Message)
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// count returns how many messages contain s.
func (l *logRecorder) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

// TestHostileErrorTexts: step errors PostgreSQL's text type refuses (NUL,
// invalid UTF-8) or that a byte cut would split inside a character are
// recorded readably, and never hold back the outcomes of other runs: 100
// healthy runs complete, each hostile run fails with its error sanitised,
// and nothing is retried over and over.
func TestHostileErrorTexts(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		hostile := []string{"bad\x00byte", "bad\xffbyte", strings.Repeat("€", 3000)}
		want := []string{"bad\uFFFDbyte", "bad\uFFFDbyte",
			strings.Repeat("€", (8192-len("… (truncated)"))/3) + "… (truncated)"}
		wf := durable.NewWorkflow[int]("hostile")
		durable.Step(wf, "a", func(ctx durable.Context, n int) (int, error) {
			if n < 0 {
				return 0, durable.Terminal(errors.New(hostile[-n-1]))
			}
			return n, nil
		})
		var logs logRecorder
		e := h.start(durable.Config{Logger: logs.logger()}, wf)
		ctx := h.ctx(time.Minute)
		triggers := make([]durable.Trigger[int], 0, 103)
		for i := range 100 {
			triggers = append(triggers, durable.Trigger[int]{Tenant: "t", Input: i})
			if i%34 == 0 {
				triggers = append(triggers, durable.Trigger[int]{Tenant: "t", Input: -(i/34 + 1)})
			}
		}
		ids, err := wf.RunManyNoWait(ctx, e, triggers)
		require.NoError(t, err)
		completed := 0
		for k, id := range ids {
			res, err := e.Wait(ctx, id)
			require.NoError(t, err)
			if n := triggers[k].Input; n < 0 {
				require.Equal(t, durabletype.RunFailed, res.Status)
				var re *durable.RunError
				require.ErrorAs(t, res.Err, &re)
				require.Equal(t, want[-n-1], re.Message, "hostile text %d", -n-1)
				require.True(t, utf8.ValidString(re.Message))
				continue
			}
			require.Equal(t, durabletype.RunCompleted, res.Status)
			completed++
		}
		require.Equal(t, 100, completed)
		require.Zero(t, logs.count("recording outcomes failed"), "no outcome was retried")
		require.Zero(t, logs.count("giving up"), "no outcome was given up")
	})
}

// TestRefusedOutcomeIsIsolated: an outcome the store refuses for good (not
// a transient error) is isolated from its batch; the others are recorded,
// and its step is recorded as failed, naming the store's error. An outcome
// that even its replacement cannot record is given up, its step left to a
// rescue, and Stop says so. Transient errors are retried until they pass.
func TestRefusedOutcomeIsIsolated(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		release := make(chan struct{})
		wf := durable.NewWorkflow[string]("refused")
		durable.Step(wf, "a", func(ctx durable.Context, in string) (string, error) {
			<-release // let the outcomes pile up into one batch
			return in, nil
		})
		refuse := func(o store.Outcome) bool {
			return strings.Contains(string(o.Output), "poison") || strings.Contains(o.Error, "even-the-failure")
		}
		var transient atomic.Int32
		transient.Store(3)
		hs := &hookStore{Store: h.store}
		hs.setFinish(func(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
			if transient.Add(-1) >= 0 {
				return nil, durabletype.Transient(errors.New("injected: connection reset"))
			}
			for _, o := range p.Outcomes {
				if refuse(o) {
					return nil, errors.New("injected: value too long for the column")
				}
			}
			return h.store.FinishTasks(ctx, p)
		})
		e := h.launchOn(hs, durable.Config{Concurrency: 30}, wf)
		ctx := h.ctx(time.Minute)
		inputs := []string{"poison"}
		for i := range 20 {
			inputs = append(inputs, fmt.Sprintf("fine-%d", i))
		}
		triggers := make([]durable.Trigger[string], len(inputs))
		for i, in := range inputs {
			triggers[i] = durable.Trigger[string]{Tenant: "t", Input: in}
		}
		ids, err := wf.RunManyNoWait(ctx, e, triggers)
		require.NoError(t, err)
		h.eventually(time.Minute, func() bool {
			n := 0
			for _, id := range ids {
				if res, err := e.Get(ctx, id); err == nil && res.Steps[0].State == durabletype.TaskRunning {
					n++
				}
			}
			return n == len(ids)
		}, "every step running")
		close(release)
		for k, id := range ids {
			res, err := e.Wait(ctx, id)
			require.NoError(t, err)
			if k == 0 {
				require.Equal(t, durabletype.RunFailed, res.Status)
				require.Contains(t, res.Err.Error(), "the store refused this step's outcome: injected: value too long")
				continue
			}
			require.Equal(t, durabletype.RunCompleted, res.Status, inputs[k])
		}
		require.NoError(t, e.Stop(ctx), "every outcome was recorded in the end")
		require.Less(t, transient.Load(), int32(0), "the transient errors were met and retried")
	})
}

// TestOutcomeNobodyCanRecord: when even the failure that replaces a refused
// outcome is refused, the outcome is given up (the step will be rescued),
// the other outcomes are recorded, and Stop reports ErrNotRecorded.
func TestOutcomeNobodyCanRecord(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[string]("unrecordable")
		durable.Step(wf, "a", func(ctx durable.Context, in string) (string, error) { return in, nil })
		var poison uuid.UUID
		var mu sync.Mutex
		hs := &hookStore{Store: h.store}
		hs.setFinish(func(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, o := range p.Outcomes {
				if o.Task.RunID == poison {
					return nil, errors.New("injected: this run cannot be written")
				}
			}
			return h.store.FinishTasks(ctx, p)
		})
		// Nothing here waits for a rescue: one of the poisoned step while
		// the fine run is slow would record a second outcome given up.
		e := h.launchOn(hs, durable.Config{DeadAfter: time.Hour}, wf)
		ctx := h.ctx(time.Minute)
		mu.Lock()
		id, err := wf.RunNoWait(ctx, e, "t", "poison")
		poison = id
		mu.Unlock()
		require.NoError(t, err)
		res, err := wf.Run(ctx, e, "t", "fine")
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		err = e.Stop(ctx)
		require.ErrorIs(t, err, durable.ErrNotRecorded)
		require.Contains(t, err.Error(), "1 step outcomes")
		res, err = e.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.TaskRunning, res.Steps[0].State, "left for a rescue")
	})
}

// TestReclaimWhileTheOldAttemptRuns: an engine whose heartbeats do not get
// through has its step rescued and claims it again while the old attempt
// still runs. Both attempts are tracked by their own claims: the old one is
// told its claim is lost (its context is cancelled with ErrClaimLost) and
// its late outcome is rejected, while the new one keeps being heartbeated,
// is not rescued, and completes.
func TestReclaimWhileTheOldAttemptRuns(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		// On PostgreSQL a DeadAfter of some seconds: the new attempt's
		// heartbeats must each get through within it on a loaded machine.
		dead := h.duration(h.deadAfter(), 3*time.Second)
		var blocked atomic.Bool
		blocked.Store(true)
		var attempts atomic.Int32
		oldCause := make(chan error, 1)
		secondStarted := make(chan struct{})
		wf := durable.NewWorkflow[int]("reclaim")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (string, error) {
			switch attempts.Add(1) {
			case 1:
				select {
				case <-ctx.Done():
					oldCause <- context.Cause(ctx)
				case <-time.After(6 * dead):
					oldCause <- nil // never told
				}
				return "old", nil
			case 2:
				blocked.Store(false) // from its claim on, nothing stands between its heartbeats and the store
				close(secondStarted)
				time.Sleep(2 * dead) // outlives DeadAfter: only heartbeats keep it
				return "new", nil
			}
			return "", durable.Terminal(errors.New("a third attempt: the second one was rescued while alive"))
		}) // no retries: a lost attempt spends none

		hs := &hookStore{Store: h.store}
		hs.setHeartbeat(func(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
			if blocked.Load() {
				return nil, durabletype.Transient(errors.New("injected: heartbeat lost"))
			}
			return h.store.Heartbeat(ctx, p)
		})
		e := h.startOn(hs, durable.Config{Concurrency: 4, DeadAfter: dead}, wf)
		ctx := h.ctx(20 * dead)
		id, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		select {
		case <-secondStarted:
		case <-ctx.Done():
			t.Fatal("the rescued step was not claimed again")
		}
		require.ErrorIs(t, <-oldCause, durable.ErrClaimLost, "the old attempt learns its claim is lost")
		res, err := e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.Equal(t, 1, res.Steps[0].Attempts, "the lost attempt is not counted")
		out, err := a.Result(res)
		require.NoError(t, err)
		require.Equal(t, "new", out)
		require.EqualValues(t, 2, attempts.Load())
	})
}

// TestStoppedEngineStartsNothing: after Stop, triggering and registering
// return ErrEngineStopped and create nothing.
func TestStoppedEngineStartsNothing(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("stopped")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		hs := &hookStore{Store: h.store}
		var created atomic.Int32
		hs.setOnCreate(func(p *store.CreateRunsParams) { created.Add(int32(len(p.Runs))) })
		e := h.launchOn(hs, durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		require.NoError(t, e.Stop(ctx))

		_, err := wf.Run(ctx, e, "t", 1)
		require.ErrorIs(t, err, durable.ErrEngineStopped)
		_, err = wf.RunNoWait(ctx, e, "t", 1)
		require.ErrorIs(t, err, durable.ErrEngineStopped)
		_, err = wf.RunManyNoWait(ctx, e, []durable.Trigger[int]{{Tenant: "t", Input: 1}})
		require.ErrorIs(t, err, durable.ErrEngineStopped)
		tx, _ := h.tx()
		_, err = wf.RunNoWaitTx(ctx, e, tx, "t", 1)
		require.ErrorIs(t, err, durable.ErrEngineStopped)
		other := durable.NewWorkflow[int]("late")
		durable.Step(other, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		require.ErrorIs(t, e.Register(other), durable.ErrEngineStopped)
		require.Zero(t, created.Load(), "no run was created")
		require.ErrorIs(t, e.Start(ctx), durable.ErrEngineStopped)
	})
}

// TestGoexitFailsTheAttempt: a step that ends its goroutine with
// runtime.Goexit (what t.FailNow does) fails its attempt with a clear error
// and gives its slot back: with one slot, the retry and a second run still
// run.
func TestGoexitFailsTheAttempt(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("goexit")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			if in == 1 && ctx.Attempt() == 1 {
				runtime.Goexit()
			}
			return in, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Millisecond}))
		e := h.start(durable.Config{Concurrency: 1}, wf)
		ctx := h.ctx(time.Minute)
		res, err := wf.Run(ctx, e, "t", 1)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.Equal(t, 2, res.Steps[0].Attempts)
		evs, err := e.Events(ctx, res.ID)
		require.NoError(t, err)
		var retrying string
		for _, ev := range evs {
			if ev.Type == durabletype.EventRetrying {
				retrying = ev.Detail
			}
		}
		require.Contains(t, retrying, "runtime.Goexit")
		res, err = wf.Run(ctx, e, "t", 2)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status, "the slot was given back")
	})
}

// TestWaitErrorCarriesTheRunID: when the context of Run ends while it
// waits, the caller gets the run's ID in a *WaitError, and can wait for the
// run again later.
func TestWaitErrorCarriesTheRunID(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		release := make(chan struct{})
		waiting, stopWaiting := context.WithCancel(context.Background())
		defer stopWaiting()
		wf := durable.NewWorkflow[int]("slow-wait")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			stopWaiting() // the run exists and runs: Run is waiting now
			select {
			case <-release:
			case <-ctx.Done():
			}
			return in, nil
		})
		e := h.start(durable.Config{}, wf)
		_, err := wf.Run(waiting, e, "t", 7)
		var we *durable.WaitError
		require.ErrorAs(t, err, &we)
		require.ErrorIs(t, err, context.Canceled)
		require.NotEqual(t, uuid.Nil, we.RunID)
		require.Contains(t, err.Error(), we.RunID.String())
		close(release)
		res, err := e.Wait(h.ctx(time.Minute), we.RunID)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
	})
}

// TestReadingANonParentFailsTheStep: a step reading the output of a step
// that is not one of its parents fails at once, without retries, with an
// error naming the fix, instead of completing with a zero value.
func TestReadingANonParentFailsTheStep(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		var cause atomic.Value
		wf := durable.NewWorkflow[int]("forgot-after")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		b := durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) { return in + 1, nil }, durable.After(a))
		durable.Step(wf, "c", func(ctx durable.Context, in int) (int, error) {
			v, ok := a.Output(ctx) // a is b's parent, not c's
			if ok || v != 0 {
				return 0, errors.New("a non-parent's output was visible")
			}
			cause.Store(context.Cause(ctx))
			w, _ := b.Output(ctx)
			return w, nil
		}, durable.After(b), durable.WithRetry(durable.RetryPolicy{MaxRetries: 3}))
		e := h.start(durable.Config{}, wf)
		res, err := wf.Run(h.ctx(time.Minute), e, "t", 1)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		c, _ := res.Step("c")
		require.Equal(t, durabletype.TaskFailed, c.State)
		require.Equal(t, 1, c.Attempts, "not retried")
		require.Contains(t, c.Error, `step "c" reads the output of step "a", which is not one of its parents: add durable.After(a) to step "c"`)
		require.ErrorIs(t, cause.Load().(error), durable.ErrNotParent, "the step's context was cancelled with the misuse")
	})
}

// TestHugeTenantIsNotEchoed: an error quotes a bounded part of a huge
// tenant ID.
func TestHugeTenantIsNotEchoed(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("tenants")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		e := h.client()
		_, err := wf.RunNoWait(h.ctx(time.Minute), e, strings.Repeat("x", 10_000), 1)
		require.ErrorIs(t, err, durabletype.ErrInvalidTenant)
		require.Less(t, len(err.Error()), 200, "%.300s", err)

		// Names of workflows and steps, likewise.
		huge := durable.NewWorkflow[int](strings.Repeat("w", 10_000))
		durable.Step(huge, strings.Repeat("s", 10_000), func(ctx durable.Context, in int) (int, error) { return in, nil })
		err = e.Register(huge)
		require.ErrorIs(t, err, durable.ErrInvalidName)
		require.Less(t, len(err.Error()), 1000, "%.1200s", err)
	})
}

// TestRegisterNilWorkflows: a nil or zero Workflow is a definition error,
// not a panic, and so is declaring steps on one.
func TestRegisterNilWorkflows(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		e := h.client()
		var typedNil *durable.Workflow[int]
		require.NotPanics(t, func() {
			durable.Step(typedNil, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		})
		err := e.Register(typedNil)
		var de *durable.DefinitionError
		require.ErrorAs(t, err, &de)
		require.ErrorIs(t, err, durable.ErrNilFunc)
		zero := &durable.Workflow[int]{}
		require.NotPanics(t, func() {
			durable.Step(zero, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		})
		require.ErrorAs(t, e.Register(zero), &de)
		require.ErrorAs(t, e.Register(nil), &de)
	})
}

// TestClockAndWorkerIDChecked: a store that keeps its own clock (PostgreSQL)
// refuses an engine clock, since every time it compares must come from one
// clock (an engine 60 s ahead once rescued another engine's live step 0.75 s
// into it, and fired sleeps a minute early); the in-memory store takes one.
// A worker ID a store could not record is refused too.
func TestClockAndWorkerIDChecked(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		for _, skew := range []time.Duration{time.Minute, -time.Minute, 5 * time.Second} {
			_, err := durable.New(h.store, h.config(durable.Config{Clock: func() time.Time { return time.Now().Add(skew) }}))
			if h.pg != nil {
				require.ErrorIs(t, err, durable.ErrInvalidConfig, "skew %s", skew)
				require.Contains(t, err.Error(), "keeps its own clock")
			} else {
				require.NoError(t, err, "skew %s", skew)
			}
		}
		for _, id := range []string{"nul\x00worker", "\xffworker", "new\nline", strings.Repeat("w", 201)} {
			_, err := durable.New(h.store, h.config(durable.Config{WorkerID: id}))
			require.ErrorIs(t, err, durable.ErrInvalidConfig, "%.20q", id)
		}
	})
}

// TestTxRunWithASleepingRoot: a run started inside a caller's transaction,
// for a tenant the store has never seen, whose root is a sleep, has no task
// to promote to the queue: its first tasks are queued when the sleep ends,
// and its tenant's lane is created then.
func TestTxRunWithASleepingRoot(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("nap-first")
		nap := durable.Sleep(wf, "nap", 100*time.Millisecond)
		durable.Step(wf, "after", func(ctx durable.Context, in int) (int, error) { return in + 1, nil }, durable.After(nap))
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		tx, commit := h.tx()
		id, err := wf.RunNoWaitTx(ctx, e, tx, "brand-new-tenant", 41)
		require.NoError(t, err)
		require.NoError(t, commit())
		res, err := e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
	})
}

// TestStopDuringAnOutage: Stop keeps its deadline while the store cannot
// record anything, even when more outcomes wait than the outcome queue
// holds (the steps that produced them block on it, holding their slots):
// recording gives up shortly after the deadline, and Stop reports the
// outcomes it could not record. (Found by TestSimulation: Stop waited for
// the blocked steps, which waited for the completer, which retried until
// Stop gave up, which it did only once the steps had returned.)
func TestStopDuringAnOutage(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("outage")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		hs := &hookStore{Store: h.store}
		var calls atomic.Int32
		hs.setFinish(func(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
			calls.Add(1)
			return nil, durabletype.Transient(errors.New("injected: the database is down"))
		})
		e := h.launchOn(hs, durable.Config{Concurrency: 1}, wf)
		client := h.client()
		triggers := make([]durable.Trigger[int], 6)
		for i := range triggers {
			triggers[i] = durable.Trigger[int]{Tenant: "t", Input: i}
		}
		_, err := wf.RunManyNoWait(h.ctx(time.Minute), client, triggers)
		require.NoError(t, err)
		h.eventually(time.Minute, func() bool { return calls.Load() >= 3 }, "recording fails and is retried")
		stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		begin := time.Now()
		err = e.Stop(stopCtx)
		require.Less(t, time.Since(begin), 30*time.Second, "Stop kept its deadline (plus the grace to record)")
		require.ErrorIs(t, err, durable.ErrNotRecorded)
	})
}

// TestTimedOutAttemptLateOutcomeNotWarned: the outcome of an attempt that
// returned after its own timeout ended it, when the store had recorded the
// timeout first (the leader's timer), is stale as expected: logged at
// debug level, not warned about as a claim lost. Heartbeats are too rare
// here to tell the step first: the engine knows from the step's own timer.
func TestTimedOutAttemptLateOutcomeNotWarned(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		logs := &logRecorder{}
		release := make(chan struct{})
		var calls atomic.Int32
		wf := durable.NewWorkflow[string]("late")
		durable.Step(wf, "call", func(ctx durable.Context, in string) (string, error) {
			if calls.Add(1) == 1 {
				<-release // ignores its context past the timeout
				return "late", nil
			}
			return "retried", nil
		}, durable.WithTimeout(h.duration(time.Minute, 300*time.Millisecond)),
			durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Millisecond}))
		e := h.start(durable.Config{Concurrency: 2, Logger: logs.logger(), HeartbeatInterval: time.Hour, DeadAfter: 3 * time.Hour}, wf)
		ctx := h.ctx(time.Minute)
		id, err := wf.RunNoWait(ctx, e, "t", "x")
		require.NoError(t, err)
		res := h.wait(e, id, h.duration(time.Hour, 30*time.Second))
		require.Equal(t, durabletype.RunCompleted, res.Status, "the timeout was recorded and the step retried")
		close(release)
		h.eventually(h.duration(time.Minute, 10*time.Second), func() bool {
			return logs.count("durable: outcome") > 0
		}, "the late outcome is logged")
		require.Equal(t, 1, logs.count("DEBUG durable: outcome not recorded, the attempt timed out"), "%q", logs.msgs)
		require.Zero(t, logs.count("WARN durable: outcome rejected"))
	})
}
