package dag

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

func TestValidVersion(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"1": true, "v2": true, "2024-06-01": true, "1.2.3+build.7": true, "a_b": true, "3fa9c2e81b07": true,
		"": false, "-1": false, "a@b": false, "a b": false, "é": false, "a\x00": false, "a/b": false,
		string(make([]byte, MaxVersionLen+1)): false,
	} {
		require.Equal(t, want, ValidVersion(v), "%q", v)
	}
}

func TestQueues(t *testing.T) {
	t.Parallel()
	require.Equal(t, "order@2", Queue("order", "2"))
	w, v, bare := SplitQueue("order@2")
	require.Equal(t, []any{"order", "2", false}, []any{w, v, bare})
	w, v, bare = SplitQueue("order")
	require.Equal(t, []any{"order", "", true}, []any{w, v, bare})

	require.True(t, ServesQueue(nil, "order", "9"), "nil serves every version")
	queues := []string{Queue("order", "2"), Queue("order", "")}
	require.True(t, ServesQueue(queues, "order", "2"))
	require.True(t, ServesQueue(queues, "order", ""))
	require.False(t, ServesQueue(queues, "order", "1"))
	require.False(t, ServesQueue(queues, "other", "2"))

	require.True(t, ServesVersion([]string{"order"}, "order", "7"), "a bare name serves every version")
	require.True(t, ServesVersion([]string{"order@2"}, "order", "2"))
	require.False(t, ServesVersion([]string{"order@2"}, "order", "1"))
	require.False(t, ServesVersion([]string{"orders@1"}, "order", "1"))
}

// typed returns a step with an output type.
func typed(name, out string, parents ...string) durabletype.StepSpec {
	s := st(name, parents...)
	s.Output = out
	return s
}

func shapeV(version string, steps ...durabletype.StepSpec) *durabletype.Shape {
	return &durabletype.Shape{Version: version, Input: "main.In", Steps: steps}
}

func TestCheckAccepts(t *testing.T) {
	t.Parallel()
	v1 := shapeV("1", typed("a", "int"), typed("b", "string", "a"))
	tests := []struct {
		name string
		to   *durabletype.Shape
		step string // "" when accepted
	}{
		{"a step added", shapeV("2", typed("a", "int"), typed("b", "string", "a"), typed("c", "int", "b")), ""},
		{"policies changed", shapeV("2", durabletype.StepSpec{Name: "a", Output: "int", Retry: durabletype.RetryPolicy{MaxAttempts: 5, Factor: 2}}, typed("b", "string", "a")), ""},
		{"a step removed", shapeV("2", typed("a", "int")), "b"},
		{"a parent added", shapeV("2", typed("a", "int"), typed("z", "int"), typed("b", "string", "a", "z")), "b"},
		{"an output type changed", shapeV("2", typed("a", "int"), typed("b", "[]byte", "a")), "b"},
		{"a kind changed", shapeV("2", typed("a", "int"), durabletype.StepSpec{Name: "b", Parents: []string{"a"}, Sleep: time.Hour, Retry: once()}), "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckAccepts(v1, tt.to)
			if tt.step == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, durabletype.ErrIncompatible)
			var ue *UpgradeError
			require.True(t, errors.As(err, &ue))
			require.Equal(t, tt.step, ue.Step)
			require.Contains(t, err.Error(), `step "`+tt.step+`"`)
		})
	}
	t.Run("input type", func(t *testing.T) {
		to := shapeV("2", typed("a", "int"), typed("b", "string", "a"))
		to.Input = "main.Other"
		require.ErrorIs(t, CheckAccepts(v1, to), durabletype.ErrIncompatible)
	})
}

// started starts a run of shape and returns it.
func started(t *testing.T, shape *durabletype.Shape) *Run {
	t.Helper()
	c, err := Compile(shape)
	require.NoError(t, err)
	r, _ := Start(store.Run{ID: uuid.New(), Workflow: "w", Version: shape.Version, Tenant: "t"}, c, t0, time.Time{})
	return r
}

// completeStep claims and completes step name of r.
func completeStep(t *testing.T, r *Run, name string, token int64) {
	t.Helper()
	i, ok := r.Shape.Index(name)
	require.True(t, ok)
	_, ok = r.Claim(i, token, "w1", t0)
	require.True(t, ok)
	_, st := r.Finish(i, &store.Outcome{Task: store.TaskRef{RunID: r.Rec.ID, Step: name, Token: token}, Kind: store.OutcomeComplete, Output: []byte("1")}, t0)
	require.Equal(t, store.FinishApplied, st)
}

func stateOf(r *Run) map[string]durabletype.TaskState {
	out := map[string]durabletype.TaskState{}
	for _, t := range r.Tasks {
		out[t.Name] = t.State
	}
	return out
}

func TestUpgradeAddsSteps(t *testing.T) {
	t.Parallel()
	r := started(t, shapeV("1", typed("a", "int"), typed("b", "int", "a")))
	completeStep(t, r, "a", 1)
	completeStep(t, r, "b", 2)
	// b completed but the run waits for nothing more: it completed.
	require.True(t, r.Rec.Settled())

	r = started(t, shapeV("1", typed("a", "int"), typed("b", "int", "a")))
	completeStep(t, r, "a", 1)
	to := shapeV("2", typed("a", "int"), typed("b", "int", "a"), typed("c", "int", "b"), typed("d", "int", "a"))
	fx, err := r.Upgrade(r.Rec.Version, to, t0.Add(time.Second))
	require.NoError(t, err)
	require.True(t, fx.Reshaped)
	require.True(t, fx.RunChanged)
	require.Equal(t, "2", r.Rec.Version)
	require.Equal(t, []string{"a", "b", "c", "d"}, []string{r.Shape.Name(0), r.Shape.Name(1), r.Shape.Name(2), r.Shape.Name(3)})
	require.Equal(t, []int{2, 3}, fx.NewTasks)
	require.Equal(t, []int{3}, fx.Enqueued, "d's parent a completed: d is ready at once; c waits for b")
	require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskQueued, "c": durabletype.TaskPending, "d": durabletype.TaskQueued}, stateOf(r))
	var upgraded []string
	for _, ev := range fx.Events {
		if ev.Type == durabletype.EventUpgraded {
			upgraded = append(upgraded, ev.Step)
			require.Equal(t, `upgraded from version "1" to "2"`, ev.Detail)
		}
	}
	require.Equal(t, []string{"b", "c", "d"}, upgraded)

	// The moved run goes on in the new shape: b, then c.
	completeStep(t, r, "b", 5)
	require.Equal(t, durabletype.TaskQueued, stateOf(r)["c"])
}

func TestUpgradeRefusesUnfinishedChanges(t *testing.T) {
	t.Parallel()
	v1 := shapeV("1", typed("a", "int"), typed("b", "int", "a"), typed("c", "int", "b"))
	tests := []struct {
		name string
		done []string // steps completed before the upgrade
		to   *durabletype.Shape
		step string // the step at fault; "" when it moves
	}{

		{"removed step pending", []string{"a"}, shapeV("2", typed("a", "int"), typed("c", "int", "a")), "b"},
		{"parent changed on a finished step", []string{"a", "b"}, shapeV("2", typed("a", "int"), typed("z", "int"), typed("b", "int", "z"), typed("c", "int", "b")), ""},
		{"parent changed on a pending step", []string{"a"}, shapeV("2", typed("a", "int"), typed("b", "int", "a"), typed("z", "int"), typed("c", "int", "z")), "c"},
		{"finished output read as another type", []string{"a"}, shapeV("2", typed("a", "string"), typed("b", "int", "a"), typed("c", "int", "b")), "b"},
		{"finished output type changed, nobody reads it", []string{"a", "b"}, shapeV("2", typed("a", "string"), typed("b", "int", "a"), typed("c", "int", "b")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := started(t, v1)
			for k, s := range tt.done {
				completeStep(t, r, s, int64(k+1))
			}
			before := len(r.Tasks)
			_, err := r.Upgrade(r.Rec.Version, tt.to, t0)
			if tt.step != "" {
				var ue *UpgradeError
				require.True(t, errors.As(err, &ue), "%v", err)
				require.Equal(t, tt.step, ue.Step)
				require.Equal(t, "1", r.Rec.Version, "a refused run stays")
				require.Len(t, r.Tasks, before)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "2", r.Rec.Version)
		})
	}
}

func TestUpgradeRetiresFinishedSteps(t *testing.T) {
	t.Parallel()
	// v1: a → b → c → d; v2 drops b, so c reads a. A run that finished
	// a, b and c moves: b (gone) and c (changed) are kept as recorded,
	// retired, and d, the same in both, runs in v2.
	v1 := shapeV("1", typed("a", "int"), typed("b", "int", "a"), typed("c", "int", "b"), typed("d", "int", "c"))
	v2 := shapeV("2", typed("a", "int"), typed("c", "int", "a"), typed("d", "int", "c"))
	r := started(t, v1)
	for k, s := range []string{"a", "b", "c"} {
		completeStep(t, r, s, int64(k+1))
	}
	_, err := r.Upgrade(r.Rec.Version, v2, t0)
	require.NoError(t, err)
	require.True(t, r.Shape.Spec(1).Retired, "b is kept for its record")
	require.True(t, r.Shape.Spec(2).Retired, "c is finished and differs in v2: kept as recorded")
	require.False(t, r.Shape.Spec(3).Retired)
	completeStep(t, r, "d", 9)
	require.Equal(t, durabletype.RunCompleted, r.Rec.Status)

	// A replay from a never runs a retired step again.
	_, err = r.Replay("b", t0)
	require.ErrorIs(t, err, durabletype.ErrStepNotFound)
	_, err = r.Replay("a", t0)
	require.NoError(t, err)
	st := stateOf(r)
	require.Equal(t, durabletype.TaskCompleted, st["b"])
	require.Equal(t, durabletype.TaskCompleted, st["c"])
	require.Equal(t, durabletype.TaskQueued, st["a"])
	require.Equal(t, durabletype.TaskQueued, st["d"], "a descendant of a runs again, at once: its parent c keeps its record")
}

func TestUpgradeRefusesSettledAndFailedRuns(t *testing.T) {
	t.Parallel()
	v1 := shapeV("1", typed("a", "int"))
	v2 := shapeV("2", typed("a", "int"), typed("b", "int", "a"))
	r := started(t, v1)
	completeStep(t, r, "a", 1)
	_, err := r.Upgrade(r.Rec.Version, v2, t0)
	require.ErrorIs(t, err, durabletype.ErrRunSettled)

	withHandler := shapeV("1", typed("a", "int"), typed("b", "int", "a"))
	withHandler.OnFailure = &durabletype.OnFailureSpec{Retry: once()}
	r = started(t, withHandler)
	_, ok := r.Claim(0, 1, "w", t0)
	require.True(t, ok)
	r.Finish(0, &store.Outcome{Task: store.TaskRef{RunID: r.Rec.ID, Step: "a", Token: 1}, Kind: store.OutcomeFail, Error: "boom", Terminal: true}, t0)
	require.Equal(t, durabletype.RunFailed, r.Rec.Status)
	require.False(t, r.Rec.Settled(), "its handler runs")
	_, err = r.Upgrade(r.Rec.Version, v2, t0)
	require.ErrorIs(t, err, durabletype.ErrIncompatible)
}

func TestUpgradeKeepsTheHandlerOfAReplayedRun(t *testing.T) {
	t.Parallel()
	v1 := shapeV("1", typed("a", "int"), typed("b", "int", "a"))
	v1.OnFailure = &durabletype.OnFailureSpec{Retry: once()}
	r := started(t, v1)
	completeStep(t, r, "a", 1)
	_, ok := r.Claim(1, 2, "w", t0)
	require.True(t, ok)
	r.Finish(1, &store.Outcome{Task: store.TaskRef{RunID: r.Rec.ID, Step: "b", Token: 2}, Kind: store.OutcomeFail, Error: "boom", Terminal: true}, t0)
	h, _ := r.Shape.Index(durabletype.OnFailureTask)
	_, ok = r.Claim(h, 3, "w", t0)
	require.True(t, ok)
	r.Finish(h, &store.Outcome{Task: store.TaskRef{RunID: r.Rec.ID, Step: durabletype.OnFailureTask, Token: 3}, Kind: store.OutcomeComplete}, t0)
	require.True(t, r.Rec.Settled())
	_, err := r.Replay("", t0)
	require.NoError(t, err)

	v2 := shapeV("2", typed("a", "int"), typed("b", "int", "a"), typed("c", "int", "b"))
	_, err = r.Upgrade(r.Rec.Version, v2, t0)
	require.ErrorIs(t, err, durabletype.ErrIncompatible, "v2 has no handler")

	v2.OnFailure = &durabletype.OnFailureSpec{Retry: once()}
	_, err = r.Upgrade(r.Rec.Version, v2, t0)
	require.NoError(t, err)
	require.Equal(t, 3, r.Shape.Len())
	require.Len(t, r.Tasks, 4)
	require.Equal(t, durabletype.OnFailureTask, r.Tasks[3].Name, "the handler's task follows the steps")
	require.Equal(t, "c", r.Tasks[2].Name)
}

func TestCompileChecksVersionAndTypes(t *testing.T) {
	t.Parallel()
	_, err := Compile(&durabletype.Shape{Version: "a@b", Steps: []durabletype.StepSpec{st("a")}})
	require.ErrorIs(t, err, ErrInvalidVersion)
	_, err = Compile(&durabletype.Shape{Version: "2", Input: "bad\x00type", Steps: []durabletype.StepSpec{st("a")}})
	require.ErrorIs(t, err, ErrInvalidType)
	bad := st("a")
	bad.Output = string(make([]byte, MaxTypeLen+1))
	_, err = Compile(&durabletype.Shape{Steps: []durabletype.StepSpec{bad}})
	require.ErrorIs(t, err, ErrInvalidType)
	_, err = Compile(&durabletype.Shape{Version: "2", Input: "map[string]main.Item", Steps: []durabletype.StepSpec{typed("a", "struct { A int }")}})
	require.NoError(t, err)
}

func TestUpgradeChecksTheVersionMovedFrom(t *testing.T) {
	t.Parallel()
	r := started(t, shapeV("1", typed("a", "int")))
	_, err := r.Upgrade("0", shapeV("2", typed("a", "int"), typed("b", "int", "a")), t0)
	require.ErrorIs(t, err, durabletype.ErrVersionMismatch)
	require.Equal(t, "1", r.Rec.Version)
}
