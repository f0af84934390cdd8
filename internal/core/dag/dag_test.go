package dag

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

func once() durabletype.RetryPolicy { return durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1} }

func st(name string, parents ...string) durabletype.StepSpec {
	return durabletype.StepSpec{Name: name, Parents: parents, Retry: once()}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		shape *durabletype.Shape
		want  error
		step  string
	}{
		{"nil", nil, ErrEmptyWorkflow, ""},
		{"empty", &durabletype.Shape{}, ErrEmptyWorkflow, ""},
		{"bad name", &durabletype.Shape{Steps: []durabletype.StepSpec{st("a b")}}, ErrInvalidName, "a b"},
		{"reserved name", &durabletype.Shape{Steps: []durabletype.StepSpec{st(durabletype.OnFailureTask)}}, ErrInvalidName, durabletype.OnFailureTask},
		{"duplicate", &durabletype.Shape{Steps: []durabletype.StepSpec{st("a"), st("a")}}, ErrDuplicateStep, "a"},
		{"unknown parent", &durabletype.Shape{Steps: []durabletype.StepSpec{st("a", "zz")}}, ErrUnknownParent, "a"},
		{"parent declared later (a cycle needs one)", &durabletype.Shape{Steps: []durabletype.StepSpec{st("a", "b"), st("b", "a")}}, ErrUnknownParent, "a"},
		{"self parent", &durabletype.Shape{Steps: []durabletype.StepSpec{st("a", "a")}}, ErrUnknownParent, "a"},
		{"duplicate parent", &durabletype.Shape{Steps: []durabletype.StepSpec{st("a"), st("b", "a", "a")}}, ErrDuplicateParent, "b"},
		{"negative sleep", &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "a", Sleep: -1, Retry: once()}}}, ErrInvalidSleep, "a"},
		{"zero attempts", &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "a", Retry: durabletype.RetryPolicy{Factor: 1}}}}, ErrInvalidRetry, "a"},
		{"factor below one", &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 2, Factor: 0.5}}}}, ErrInvalidRetry, "a"},
		{"NaN jitter", &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 2, Factor: 1, Jitter: math.NaN()}}}}, ErrInvalidRetry, "a"},
		{"bad on-failure retry", &durabletype.Shape{Steps: []durabletype.StepSpec{st("a")}, OnFailure: &durabletype.OnFailureSpec{}}, ErrInvalidRetry, durabletype.OnFailureTask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compile(tt.shape)
			require.ErrorIs(t, err, tt.want)
			var se *ShapeError
			require.True(t, errors.As(err, &se))
			require.Equal(t, tt.step, se.Step)
		})
	}
}

func TestCompileIndexes(t *testing.T) {
	t.Parallel()
	c, err := Compile(&durabletype.Shape{
		Steps:     []durabletype.StepSpec{st("a"), st("b", "a"), st("c", "a"), {Name: "nap", Parents: []string{"b"}, Sleep: time.Hour, Retry: once()}, st("d", "nap", "c")},
		OnFailure: &durabletype.OnFailureSpec{Retry: once()},
	})
	require.NoError(t, err)
	require.Equal(t, 5, c.Len())
	require.Equal(t, []int{1, 2}, c.Children(0))
	require.Equal(t, []int{3, 2}, c.Parents(4))
	require.Equal(t, durabletype.KindSleep, c.Kind(3))
	require.Equal(t, durabletype.KindStep, c.Kind(4))
	i, ok := c.Index(durabletype.OnFailureTask)
	require.True(t, ok)
	require.Equal(t, 5, i)
	require.Equal(t, durabletype.KindOnFailure, c.Kind(i))
	require.Equal(t, durabletype.OnFailureTask, c.Name(i))
	_, ok = c.Index("nope")
	require.False(t, ok)
}

func TestValidNames(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"a": true, "order-processing": true, "v2.charge:card/eu_1": true, "A1": true,
		"": false, "-a": false, "a b": false, "@x": false, "é": false, strings.Repeat("a", 129): false,
		strings.Repeat("a", 128): true,
	} {
		require.Equal(t, want, ValidName(name), "%q", name)
	}
	for tenant, want := range map[string]bool{
		"customer-123": true, "Ünïcode tenant": true, strings.Repeat("x", 200): true,
		"": false, strings.Repeat("x", 201): false, "a\nb": false, "\x7f": false, "\xff": false,
	} {
		require.Equal(t, want, ValidTenant(tenant), "%q", tenant)
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	p := durabletype.RetryPolicy{MaxAttempts: 10, InitialDelay: time.Second, Factor: 2, MaxDelay: 5 * time.Second}
	tests := []struct {
		attempt int
		want    time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 5 * time.Second}, {60, 5 * time.Second}}
	for _, tt := range tests {
		require.Equal(t, tt.want, RetryDelay(p, tt.attempt, 0.5), "attempt %d", tt.attempt)
	}
	noCap := durabletype.RetryPolicy{MaxAttempts: 10, InitialDelay: time.Second, Factor: 10}
	require.Positive(t, RetryDelay(noCap, 1000, 0), "a huge exponent saturates, it does not overflow")
	j := durabletype.RetryPolicy{MaxAttempts: 2, InitialDelay: 10 * time.Second, Factor: 1, Jitter: 0.5}
	require.Equal(t, 10*time.Second, RetryDelay(j, 1, 0))
	require.Equal(t, 7500*time.Millisecond, RetryDelay(j, 1, 0.5))
	require.Greater(t, RetryDelay(j, 1, 0.999999), 5*time.Second)
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func start(t *testing.T, shape *durabletype.Shape) *Run {
	t.Helper()
	c, err := Compile(shape)
	require.NoError(t, err)
	r, _ := Start(store.Run{ID: uuid.New(), Workflow: "wf", Tenant: "t"}, c, t0, time.Time{})
	return r
}

// claim claims task i, failing the test if it cannot be claimed.
func (r *Run) mustClaim(t *testing.T, i int, token int64) Effects {
	t.Helper()
	fx, ok := r.Claim(i, token, "w", t0)
	require.True(t, ok, "claim %d", i)
	return fx
}

func (r *Run) finishStatus(i int, o *store.Outcome, now time.Time) store.FinishStatus {
	_, st := r.Finish(i, o, now)
	return st
}

func (r *Run) stateOf(name string) durabletype.TaskState {
	i, _ := r.Shape.Index(name)
	return r.Tasks[i].State
}

func (r *Run) states() map[string]durabletype.TaskState {
	m := map[string]durabletype.TaskState{}
	for _, t := range r.Tasks {
		m[t.Name] = t.State
	}
	return m
}

// claimAndFinish claims a ready task and applies an outcome to it.
func claimAndFinish(t *testing.T, r *Run, name string, kind store.OutcomeKind, token int64) store.FinishStatus {
	t.Helper()
	i, _ := r.Shape.Index(name)
	r.mustClaim(t, i, token)
	return r.finishStatus(i, &store.Outcome{Task: store.TaskRef{RunID: r.Rec.ID, Step: name, Token: token}, Kind: kind, Output: []byte("1"), Error: "e"}, t0)
}

func TestReadinessAndCascade(t *testing.T) {
	t.Parallel()
	type step struct {
		name string
		kind store.OutcomeKind
	}
	diamond := &durabletype.Shape{Steps: []durabletype.StepSpec{st("a"), st("b", "a"), st("c", "a"), st("d", "b", "c")}}
	chain := &durabletype.Shape{Steps: []durabletype.StepSpec{st("a"), st("b", "a"), st("c", "b"), st("d", "c")}}
	tests := []struct {
		name  string
		shape *durabletype.Shape
		steps []step
		want  map[string]durabletype.TaskState
		run   durabletype.RunStatus
	}{
		{"roots are ready, the rest pending", diamond, nil,
			map[string]durabletype.TaskState{"a": durabletype.TaskQueued, "b": durabletype.TaskPending, "c": durabletype.TaskPending, "d": durabletype.TaskPending}, durabletype.RunRunning},
		{"fan-out after the root completes", diamond, []step{{"a", store.OutcomeComplete}},
			map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskQueued, "c": durabletype.TaskQueued, "d": durabletype.TaskPending}, durabletype.RunRunning},
		{"fan-in waits for every parent", diamond, []step{{"a", store.OutcomeComplete}, {"b", store.OutcomeComplete}},
			map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskCompleted, "c": durabletype.TaskQueued, "d": durabletype.TaskPending}, durabletype.RunRunning},
		{"a skipped parent counts as resolved at a merge", diamond, []step{{"a", store.OutcomeComplete}, {"b", store.OutcomeSkip}, {"c", store.OutcomeComplete}},
			map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskSkipped, "c": durabletype.TaskCompleted, "d": durabletype.TaskQueued}, durabletype.RunRunning},
		{"all parents skipped cascades", diamond, []step{{"a", store.OutcomeComplete}, {"b", store.OutcomeSkip}, {"c", store.OutcomeSkip}},
			map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskSkipped, "c": durabletype.TaskSkipped, "d": durabletype.TaskSkipped}, durabletype.RunCompleted},
		{"a chain cascades to the end", chain, []step{{"a", store.OutcomeSkip}},
			map[string]durabletype.TaskState{"a": durabletype.TaskSkipped, "b": durabletype.TaskSkipped, "c": durabletype.TaskSkipped, "d": durabletype.TaskSkipped}, durabletype.RunCompleted},
		{"permanent failure cancels the rest", diamond, []step{{"a", store.OutcomeComplete}, {"b", store.OutcomeFail}},
			map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskFailed, "c": durabletype.TaskCancelled, "d": durabletype.TaskCancelled}, durabletype.RunFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := start(t, tt.shape)
			for k, s := range tt.steps {
				require.Equal(t, store.FinishApplied, claimAndFinish(t, r, s.name, s.kind, int64(k+1)))
			}
			require.Equal(t, tt.want, r.states())
			require.Equal(t, tt.run, r.Rec.Status)
			require.Equal(t, tt.run != durabletype.RunRunning, r.Rec.Settled())
		})
	}
}

func TestFailureWithRunningSiblingAndOnFailure(t *testing.T) {
	t.Parallel()
	r := start(t, &durabletype.Shape{Steps: []durabletype.StepSpec{st("a"), st("b")}, OnFailure: &durabletype.OnFailureSpec{Retry: once()}})
	r.mustClaim(t, 0, 1)
	r.mustClaim(t, 1, 2)
	fx, status := r.Finish(0, &store.Outcome{Task: store.TaskRef{Step: "a", Token: 1}, Kind: store.OutcomeFail, Error: "x"}, t0)
	require.Equal(t, store.FinishApplied, status)
	require.Equal(t, durabletype.RunFailed, r.Rec.Status)
	require.Equal(t, "a", r.Rec.FailedStep)
	require.False(t, r.Rec.Settled(), "b is still running")
	require.True(t, fx.RunChanged)
	require.Equal(t, []int{2}, fx.NewTasks, "the on-failure task is new")
	require.Equal(t, []int{0, 2}, fx.Tasks)
	require.Equal(t, durabletype.TaskRunning, r.stateOf("b"))
	require.Equal(t, durabletype.TaskQueued, r.stateOf(durabletype.OnFailureTask))
	require.Equal(t, []int{2}, fx.Enqueued)
	require.False(t, fx.Settled)
	require.False(t, r.Current(1, 2), "b's claim is no longer wanted")
	r.mustClaim(t, 2, 3)
	require.True(t, r.Current(2, 3), "the handler runs in a failed run")

	// b fails after the run did: it is cancelled, and does not fail anything again.
	require.Equal(t, store.FinishApplied, r.finishStatus(1, &store.Outcome{Task: store.TaskRef{Step: "b", Token: 2}, Kind: store.OutcomeFail, Error: "late"}, t0))
	require.Equal(t, durabletype.TaskCancelled, r.stateOf("b"))
	require.Equal(t, "a", r.Rec.FailedStep)
	require.False(t, r.Rec.Settled())
	fx, status = r.Finish(2, &store.Outcome{Task: store.TaskRef{Step: durabletype.OnFailureTask, Token: 3}, Kind: store.OutcomeComplete}, t0.Add(time.Second))
	require.Equal(t, store.FinishApplied, status)
	require.True(t, fx.Settled)
	require.True(t, r.Rec.FinishedAt.Equal(t0.Add(time.Second)))
}

func TestClaimTokens(t *testing.T) {
	t.Parallel()
	r := start(t, &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Second, Factor: 2}}}})
	out := func(tok int64, kind store.OutcomeKind) *store.Outcome {
		return &store.Outcome{Task: store.TaskRef{Step: "a", Token: tok}, Kind: kind, Error: "e"}
	}
	claim := func(tok int64, at time.Time) bool { _, ok := r.Claim(0, tok, "w", at); return ok }
	wake := func(at time.Time) bool { _, ok := r.Wake(0, 0, at); return ok }
	require.Equal(t, store.FinishStale, r.finishStatus(0, out(0, store.OutcomeComplete), t0), "an unclaimed task accepts nothing")
	require.False(t, claim(0, t0), "0 is no token")
	require.True(t, claim(10, t0))
	require.False(t, claim(11, t0), "a running task is not claimed again")
	require.Equal(t, store.FinishStale, r.finishStatus(0, out(9, store.OutcomeComplete), t0))
	require.Equal(t, store.FinishApplied, r.finishStatus(0, out(10, store.OutcomeFail), t0))
	require.Equal(t, store.FinishDuplicate, r.finishStatus(0, out(10, store.OutcomeFail), t0), "a replayed outcome is a duplicate")
	require.True(t, r.Tasks[0].DueAt.Equal(t0.Add(time.Second)))
	require.False(t, claim(12, t0), "a backoff is not claimable")
	require.False(t, wake(t0.Add(999*time.Millisecond)))
	require.True(t, wake(t0.Add(time.Second)))
	require.True(t, claim(12, t0.Add(time.Second)))
	_, ok := r.Rescue(0, time.Minute, 0, t0.Add(time.Minute))
	require.False(t, ok, "a claim a minute old is not dead after a minute and a second")
	_, ok = r.Rescue(0, time.Minute, 0, t0.Add(time.Minute+time.Second))
	require.True(t, ok)
	require.Contains(t, r.Tasks[0].Error, "worker w lost: no heartbeat for 1m0s")
	require.Equal(t, store.FinishStale, r.finishStatus(0, out(12, store.OutcomeComplete), t0), "a rescued claim is stale")
	require.Equal(t, 1, r.Tasks[0].Attempt, "a lost attempt spends no retry")
	require.Equal(t, 1, r.Tasks[0].Lost)
	require.Equal(t, durabletype.TaskQueued, r.Tasks[0].State)
	rescued := t0.Add(time.Minute + time.Second)
	if due := r.Tasks[0].DueAt; !due.IsZero() { // else queued at once
		require.False(t, due.Before(rescued), "queued again from the rescue on")
		require.LessOrEqual(t, due.Sub(rescued), LostSpread(time.Minute), "within the spread of a lost step, not a backoff")
		require.True(t, wake(rescued.Add(LostSpread(time.Minute))))
	}
	require.True(t, claim(13, t0))
	require.Equal(t, store.FinishApplied, r.finishStatus(0, out(13, store.OutcomeRelease), t0))
	require.Equal(t, 1, r.Tasks[0].Attempt, "a release gives the attempt back")
	require.Equal(t, 1, r.Tasks[0].Lost, "a release does not end the lost attempts in a row")
	require.True(t, claim(14, t0))
	require.Equal(t, 2, r.Tasks[0].Attempt)
	require.Equal(t, store.FinishApplied, r.finishStatus(0, out(14, store.OutcomeFail), t0))
	require.Equal(t, 0, r.Tasks[0].Lost, "an attempt that failed ends the lost attempts in a row")
	require.True(t, wake(t0.Add(time.Hour)))
	require.True(t, claim(15, t0))
	require.Equal(t, 3, r.Tasks[0].Attempt)
	require.Equal(t, store.FinishApplied, r.finishStatus(0, out(15, store.OutcomeFail), t0))
	require.Equal(t, durabletype.TaskFailed, r.Tasks[0].State, "the third failure is the last")
	require.Equal(t, durabletype.RunFailed, r.Rec.Status)
}

func TestSleepWake(t *testing.T) {
	t.Parallel()
	c, err := Compile(&durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "nap", Sleep: 90 * time.Minute, Retry: once()}, st("b", "nap")}})
	require.NoError(t, err)
	r, fx := Start(store.Run{ID: uuid.New(), Workflow: "wf", Tenant: "t"}, c, t0, time.Time{})
	require.Equal(t, durabletype.TaskSleeping, r.stateOf("nap"))
	require.True(t, fx.Timer)
	require.True(t, fx.Created)
	require.Equal(t, []int{0, 1}, fx.NewTasks)
	require.True(t, r.Tasks[0].DueAt.Equal(t0.Add(90*time.Minute)))
	_, ok := r.Wake(0, 0, t0.Add(time.Hour))
	require.False(t, ok)
	fx, ok = r.Wake(0, 0, t0.Add(2*time.Hour))
	require.True(t, ok)
	require.Equal(t, []int{1}, fx.Enqueued)
	require.Equal(t, durabletype.TaskCompleted, r.stateOf("nap"))
	require.Equal(t, durabletype.TaskQueued, r.stateOf("b"))
	_, ok = r.Wake(0, 0, t0.Add(3*time.Hour))
	require.False(t, ok, "a timer fires once")
}

func TestLoadChecksTasks(t *testing.T) {
	t.Parallel()
	c, err := Compile(&durabletype.Shape{Steps: []durabletype.StepSpec{st("a"), st("b")}})
	require.NoError(t, err)
	_, err = Load(store.Run{}, c, []store.Task{{Name: "a"}})
	require.Error(t, err)
	_, err = Load(store.Run{}, c, []store.Task{{Name: "b"}, {Name: "a"}})
	require.Error(t, err)
	_, err = Load(store.Run{}, c, []store.Task{{Name: "a"}, {Name: "b"}})
	require.NoError(t, err)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	sh := &durabletype.Shape{
		Steps: []durabletype.StepSpec{st("a"), st("b"), {Name: "nap", Sleep: time.Hour, Retry: once()},
			{Name: "flaky", Retry: durabletype.RetryPolicy{MaxAttempts: 3, InitialDelay: time.Minute, Factor: 1}}, st("c", "a", "b")},
		OnFailure: &durabletype.OnFailureSpec{Retry: once()},
	}
	r := start(t, sh)
	r.mustClaim(t, 0, 1) // a runs
	flaky, _ := r.Shape.Index("flaky")
	r.mustClaim(t, flaky, 2)
	_, st0 := r.Finish(flaky, &store.Outcome{Task: store.TaskRef{Step: "flaky", Token: 2}, Kind: store.OutcomeFail, Error: "x"}, t0)
	require.Equal(t, store.FinishApplied, st0)
	require.False(t, r.Tasks[flaky].DueAt.IsZero(), "flaky waits out a backoff")

	fx, err := r.Cancel("operator said so", t0.Add(time.Second))
	require.NoError(t, err)
	require.True(t, fx.Cancelled)
	require.True(t, fx.Settled, "a cancelled run settles at once")
	require.Equal(t, durabletype.RunCancelled, r.Rec.Status)
	require.Equal(t, "operator said so", r.Rec.Error)
	for _, tk := range r.Tasks {
		require.Equal(t, durabletype.TaskCancelled, tk.State, tk.Name)
		require.True(t, tk.DueAt.IsZero(), "%s: no timer left", tk.Name)
	}
	require.Len(t, r.Tasks, r.Shape.Len(), "the on-failure handler does not run for a cancelled run")
	b, _ := r.Shape.Index("b")
	require.ElementsMatch(t, []int{b}, fx.Dequeued, "b's queue entry goes; a was claimed, flaky waits for a timer")
	require.False(t, r.Current(0, 1), "the running step's claim is no longer current")
	require.True(t, LostToCancel(&r.Tasks[0], r.Rec.Status))
	_, st1 := r.Finish(0, &store.Outcome{Task: store.TaskRef{Step: "a", Token: 1}, Kind: store.OutcomeComplete}, t0)
	require.Equal(t, store.FinishStale, st1, "its late outcome is not recorded")

	_, err = r.Cancel("again", t0)
	require.ErrorIs(t, err, durabletype.ErrRunSettled)
	_, ok := r.Wake(flaky, 0, t0.Add(2*time.Hour))
	require.False(t, ok, "a cancelled backoff never fires")
}

func TestReplay(t *testing.T) {
	t.Parallel()
	// a -> b -> c, a -> d; b fails.
	sh := &durabletype.Shape{
		Steps:     []durabletype.StepSpec{st("a"), st("b", "a"), st("c", "b"), st("d", "a")},
		OnFailure: &durabletype.OnFailureSpec{Retry: once()},
	}
	r := start(t, sh)
	require.Equal(t, store.FinishApplied, claimAndFinish(t, r, "a", store.OutcomeComplete, 1))
	require.Equal(t, store.FinishApplied, claimAndFinish(t, r, "d", store.OutcomeComplete, 2))
	require.Equal(t, store.FinishApplied, claimAndFinish(t, r, "b", store.OutcomeFail, 3))
	require.Equal(t, durabletype.RunFailed, r.Rec.Status)
	require.Equal(t, store.FinishApplied, claimAndFinish(t, r, durabletype.OnFailureTask, store.OutcomeComplete, 4))
	require.True(t, r.Rec.Settled())

	_, err := r.Replay("nope", t0)
	require.ErrorIs(t, err, durabletype.ErrStepNotFound)
	fx, err := r.Replay("", t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, durabletype.RunRunning, r.Rec.Status)
	require.Empty(t, r.Rec.Error)
	require.False(t, r.Rec.Settled())
	require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskQueued, "c": durabletype.TaskPending,
		"d": durabletype.TaskCompleted, durabletype.OnFailureTask: durabletype.TaskCompleted}, r.states())
	bi, _ := r.Shape.Index("b")
	require.Equal(t, []int{bi}, fx.Enqueued)
	require.Zero(t, r.Tasks[bi].Attempt, "a fresh attempt count")
	require.Zero(t, r.Tasks[bi].Token)
	var replayed []string
	for _, e := range fx.Events {
		if e.Type == durabletype.EventReplayed {
			replayed = append(replayed, e.Step)
		}
	}
	require.Equal(t, []string{"b", "c"}, replayed, "the failed step and its descendants")
	_, err = r.Replay("", t0)
	require.ErrorIs(t, err, durabletype.ErrRunNotSettled, "a second replay loses")

	// b fails again: the on-failure handler runs again, afresh.
	require.Equal(t, store.FinishApplied, claimAndFinish(t, r, "b", store.OutcomeFail, 5))
	require.Equal(t, durabletype.TaskQueued, r.stateOf(durabletype.OnFailureTask))
	require.Zero(t, r.Tasks[r.Shape.Len()].Attempt)
	require.Equal(t, store.FinishApplied, claimAndFinish(t, r, durabletype.OnFailureTask, store.OutcomeComplete, 6))

	// From a completed step: it and its descendants run again.
	_, err = r.Replay("a", t0)
	require.NoError(t, err)
	require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskQueued, "b": durabletype.TaskPending, "c": durabletype.TaskPending,
		"d": durabletype.TaskPending, durabletype.OnFailureTask: durabletype.TaskCompleted}, r.states())
	for _, name := range []string{"a", "b", "c", "d"} {
		require.Equal(t, store.FinishApplied, claimAndFinish(t, r, name, store.OutcomeComplete, int64(10+len(name)+int(name[0]))))
	}
	require.Equal(t, durabletype.RunCompleted, r.Rec.Status)
	require.True(t, r.Rec.Settled(), "a completed replay settles though its handler ran before")

	_, err = r.Replay("", t0)
	require.ErrorIs(t, err, durabletype.ErrNothingToReplay, "a completed run replays only from a step")
}

func TestReplayCancelledRunWithASkippedBranch(t *testing.T) {
	t.Parallel()
	// a -> (b, c) -> d; c was skipped by its condition; the run is cancelled while b runs.
	r := start(t, &durabletype.Shape{Steps: []durabletype.StepSpec{st("a"), st("b", "a"), st("c", "a"), st("d", "b", "c")}})
	require.Equal(t, store.FinishApplied, claimAndFinish(t, r, "a", store.OutcomeComplete, 1))
	require.Equal(t, store.FinishApplied, claimAndFinish(t, r, "c", store.OutcomeSkip, 2))
	bi, _ := r.Shape.Index("b")
	r.mustClaim(t, bi, 3)
	_, err := r.Cancel("", t0)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCancelled, r.Rec.Status)
	_, err = r.Replay("", t0)
	require.NoError(t, err)
	require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskQueued, "c": durabletype.TaskSkipped,
		"d": durabletype.TaskPending}, r.states(), "the skip stands: c is not downstream of what runs again")
	_, st := r.Finish(bi, &store.Outcome{Task: store.TaskRef{Step: "b", Token: 3}, Kind: store.OutcomeComplete}, t0)
	require.Equal(t, store.FinishStale, st, "the cancelled attempt's late outcome is rejected after the replay too")
}

func TestMatches(t *testing.T) {
	t.Parallel()
	run := &store.Run{Workflow: "wf", Tenant: "t", Status: durabletype.RunFailed, CreatedAt: t0, FinishedAt: t0.Add(time.Hour)}
	for _, tc := range []struct {
		f    store.RunFilter
		want bool
	}{
		{store.RunFilter{}, true},
		{store.RunFilter{Tenant: "t", Workflow: "wf", Statuses: []durabletype.RunStatus{durabletype.RunFailed, durabletype.RunCancelled}}, true},
		{store.RunFilter{Tenant: "u"}, false},
		{store.RunFilter{Workflow: "other"}, false},
		{store.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunCompleted}}, false},
		{store.RunFilter{CreatedAfter: t0, CreatedBefore: t0.Add(time.Nanosecond)}, true},
		{store.RunFilter{CreatedBefore: t0}, false},
		{store.RunFilter{FinishedAfter: t0.Add(time.Hour)}, true},
		{store.RunFilter{FinishedBefore: t0.Add(time.Hour)}, false},
	} {
		require.Equal(t, tc.want, Matches(&tc.f, run), "%+v", tc.f)
	}
	require.False(t, Matches(&store.RunFilter{FinishedBefore: t0.Add(time.Hour)}, &store.Run{CreatedAt: t0}), "a run in flight has not finished")
	require.True(t, Expired(run, t0.Add(2*time.Hour)))
	require.False(t, Expired(run, t0.Add(time.Hour)))
	require.False(t, Expired(&store.Run{CreatedAt: t0}, t0.Add(time.Hour)))
}

func TestValidTime(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want bool
	}{
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), true},
		{time.Date(0, 12, 31, 23, 59, 59, 0, time.UTC), false},
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.UnixMicro(-1 << 62), false},
		{time.Date(1, 1, 1, 0, 30, 0, 0, time.FixedZone("+1", 3600)), false}, // year 0 in UTC
	} {
		require.Equal(t, c.want, ValidTime(c.t), "%s", c.t)
	}
}

// TestLostSpread: the steps one rescue takes back are queued again at
// moments of their own within LostSpread, so that one worker does not claim
// them all together again (with a poison step among them).
func TestLostSpread(t *testing.T) {
	require.Equal(t, 250*time.Millisecond, LostSpread(time.Second))
	require.Equal(t, 5*time.Second, LostSpread(30*time.Second))
	require.Zero(t, LostSpread(-time.Minute))
	run := uuid.New()
	seen := map[int]bool{}
	for k := range 100 {
		f := spreadFraction(run, fmt.Sprintf("step-%d", k), 0.7)
		require.GreaterOrEqual(t, f, 0.0)
		require.Less(t, f, 1.0)
		seen[int(f*10)] = true
	}
	require.Len(t, seen, 10, "100 steps of one rescue fall in every tenth of the spread")
	require.Equal(t, spreadFraction(run, "a", 0.3), spreadFraction(run, "a", 0.3), "the same for every store")
}
