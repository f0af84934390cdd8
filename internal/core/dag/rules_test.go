package dag

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

func TestKindOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		spec durabletype.StepSpec
		want durabletype.TaskKind
	}{
		{durabletype.StepSpec{Name: "code"}, durabletype.KindStep},
		{durabletype.StepSpec{Name: "nap", Sleep: time.Hour}, durabletype.KindSleep},
		{durabletype.StepSpec{Name: "event", Wait: &durabletype.WaitSpec{}}, durabletype.KindEvent},
		{durabletype.StepSpec{Name: "signal", Wait: &durabletype.WaitSpec{Signal: "go"}}, durabletype.KindEvent},
		{durabletype.StepSpec{Name: "child", Child: &durabletype.ChildSpec{Workflow: "w", Result: "r"}}, durabletype.KindChild},
		{durabletype.StepSpec{Name: "map", Map: &durabletype.MapSpec{Over: "list"}}, durabletype.KindMap},
		// Invalid specs (checkKind refuses them) still get one kind.
		{durabletype.StepSpec{Name: "both", Sleep: time.Hour, Wait: &durabletype.WaitSpec{}}, durabletype.KindSleep},
		{durabletype.StepSpec{Name: "negative", Sleep: -time.Hour}, durabletype.KindStep},
	} {
		require.Equal(t, tt.want, KindOf(&tt.spec), tt.spec.Name)
	}

	// A compiled shape's tasks have the kinds of their specs; the task
	// after the steps is the on-failure handler.
	c, err := Compile(&durabletype.Shape{
		Steps: []durabletype.StepSpec{
			st("list"), {Name: "nap", Sleep: time.Hour, Retry: once()},
			{Name: "m", Parents: []string{"list"}, Map: &durabletype.MapSpec{Over: "list"}, Retry: once()},
		},
		OnFailure: &durabletype.OnFailureSpec{Retry: once()},
	})
	require.NoError(t, err)
	for i := range c.Len() {
		require.Equal(t, KindOf(c.Spec(i)), c.Kind(i))
	}
	require.Equal(t, durabletype.KindOnFailure, c.Kind(c.Len()))
}

func TestGaugeOf(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		task   store.Task
		parked bool
		want   Gauge
	}{
		{"pending", store.Task{State: durabletype.TaskPending}, false, Uncounted},
		{"ready", store.Task{State: durabletype.TaskQueued}, false, GaugeReady},
		{"ready with a queue timeout", store.Task{State: durabletype.TaskQueued, TimeoutAt: due}, false, GaugeReady},
		{"parked behind a concurrency key", store.Task{State: durabletype.TaskQueued, ConcurrencyKey: "k"}, true, GaugeWaiting},
		{"retry backoff, delayed start or next rate window", store.Task{State: durabletype.TaskQueued, DueAt: due}, false, GaugeWaiting},
		{"running", store.Task{State: durabletype.TaskRunning, Token: 7}, false, GaugeRunning},
		{"running with a timeout", store.Task{State: durabletype.TaskRunning, Token: 7, TimeoutAt: due}, false, GaugeRunning},
		{"sleeping", store.Task{Kind: durabletype.KindSleep, State: durabletype.TaskSleeping, DueAt: due}, false, GaugeWaiting},
		{"waiting for an event", store.Task{Kind: durabletype.KindEvent, State: durabletype.TaskWaiting, WaitKey: "k"}, false, GaugeWaiting},
		{"waiting for an event until a timeout", store.Task{Kind: durabletype.KindEvent, State: durabletype.TaskWaiting, DueAt: due}, false, GaugeWaiting},
		{"waiting for a child run", store.Task{Kind: durabletype.KindChild, State: durabletype.TaskWaiting}, false, GaugeWaiting},
		{"waiting for items", store.Task{Kind: durabletype.KindMap, State: durabletype.TaskWaiting, Items: 3, Left: 2}, false, GaugeWaiting},
	}
	for _, s := range []durabletype.TaskState{durabletype.TaskCompleted, durabletype.TaskFailed, durabletype.TaskSkipped, durabletype.TaskCancelled} {
		tests = append(tests, struct {
			name   string
			task   store.Task
			parked bool
			want   Gauge
		}{string(s), store.Task{State: s}, false, Uncounted})
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, GaugeOf(&tt.task, tt.parked), tt.name)
	}
}

func TestCountTask(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var q durabletype.QueueStats
	CountTask(&q, &store.Task{State: durabletype.TaskQueued}, false, t0.Add(time.Minute))
	CountTask(&q, &store.Task{State: durabletype.TaskQueued}, false, t0)
	CountTask(&q, &store.Task{State: durabletype.TaskQueued}, false, t0.Add(time.Hour))
	CountTask(&q, &store.Task{State: durabletype.TaskQueued}, true, t0.Add(-time.Hour)) // parked: not ready
	CountTask(&q, &store.Task{State: durabletype.TaskRunning}, false, time.Time{})
	CountTask(&q, &store.Task{State: durabletype.TaskWaiting}, false, time.Time{})
	CountTask(&q, &store.Task{State: durabletype.TaskPending}, false, time.Time{})
	CountTask(&q, &store.Task{State: durabletype.TaskCompleted}, false, time.Time{})
	require.Equal(t, durabletype.QueueStats{Ready: 3, Waiting: 2, Running: 1, OldestReady: t0}, q)
}

func TestExpired(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cutoff := t0.Add(time.Hour)
	for _, tt := range []struct {
		name string
		rec  store.Run
		want bool
	}{
		{"in flight", store.Run{Status: durabletype.RunRunning, CreatedAt: t0}, false},
		{"settled before the cutoff", store.Run{Status: durabletype.RunCompleted, CreatedAt: t0, FinishedAt: t0.Add(time.Minute)}, true},
		{"failed before the cutoff", store.Run{Status: durabletype.RunFailed, CreatedAt: t0, FinishedAt: t0}, true},
		{"cancelled before the cutoff", store.Run{Status: durabletype.RunCancelled, CreatedAt: t0, FinishedAt: t0}, true},
		{"settled at the cutoff", store.Run{Status: durabletype.RunCompleted, CreatedAt: t0, FinishedAt: cutoff}, false},
		{"settled a microsecond before the cutoff", store.Run{Status: durabletype.RunCompleted, CreatedAt: t0, FinishedAt: cutoff.Add(-time.Microsecond)}, true},
		{"settled after the cutoff", store.Run{Status: durabletype.RunCompleted, CreatedAt: t0, FinishedAt: cutoff.Add(time.Second)}, false},
		{"settled before the cutoff, created after it", store.Run{Status: durabletype.RunCancelled, CreatedAt: cutoff.Add(time.Hour), FinishedAt: t0}, false},
		{"settled before the cutoff, created at it", store.Run{Status: durabletype.RunCancelled, CreatedAt: cutoff, FinishedAt: t0}, false},
	} {
		require.Equal(t, tt.want, Expired(&tt.rec, cutoff), tt.name)
	}

	require.Equal(t, cutoff, PruneCutoff(cutoff.Add(time.Hour), time.Hour))
	require.Equal(t, cutoff, PruneCutoff(cutoff.Add(time.Hour), time.Hour+999*time.Nanosecond), "whole microseconds")
	require.Equal(t, cutoff, PruneCutoff(cutoff, -999*time.Nanosecond), "whole microseconds, toward zero")
	require.Equal(t, cutoff, PruneCutoff(cutoff, 0))
}

func TestPruneOrder(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	low := store.Run{ID: uuid.MustParse("0190a000-0000-7000-8000-000000000000"), CreatedAt: t0}
	high := store.Run{ID: uuid.MustParse("f190a000-0000-7000-8000-000000000000"), CreatedAt: t0}
	older := store.Run{ID: uuid.MustParse("ff90a000-0000-7000-8000-000000000000"), CreatedAt: t0.Add(-time.Second)}
	runs := []*store.Run{&high, &low, &older}
	slices.SortFunc(runs, PruneOrder)
	require.Equal(t, []*store.Run{&older, &low, &high}, runs, "the runs created first, then by ID")
	require.Zero(t, PruneOrder(&low, &low))
}

func TestBeats(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		task    store.Task
		token   int64
		status  durabletype.RunStatus
		beats   bool
		current bool
	}{
		{"running under the claim", store.Task{State: durabletype.TaskRunning, Token: 7}, 7, durabletype.RunRunning, true, true},
		{"running under another claim", store.Task{State: durabletype.TaskRunning, Token: 8}, 7, durabletype.RunRunning, false, false},
		{"queued again", store.Task{State: durabletype.TaskQueued, Token: 7}, 7, durabletype.RunRunning, false, false},
		{"waiting after the claim", store.Task{Kind: durabletype.KindEvent, State: durabletype.TaskWaiting, Token: 7}, 7, durabletype.RunRunning, false, false},
		{"completed", store.Task{State: durabletype.TaskCompleted, Token: 7}, 7, durabletype.RunRunning, false, false},
		{"cancelled", store.Task{State: durabletype.TaskCancelled, Token: 7}, 7, durabletype.RunCancelled, false, false},
		{"a sibling of the step that failed the run", store.Task{State: durabletype.TaskRunning, Token: 7}, 7, durabletype.RunFailed, true, false},
		{"the on-failure handler of a failed run", store.Task{Kind: durabletype.KindOnFailure, State: durabletype.TaskRunning, Token: 7}, 7, durabletype.RunFailed, true, true},
		{"no claim", store.Task{State: durabletype.TaskRunning}, 0, durabletype.RunRunning, true, false},
	} {
		require.Equal(t, tt.beats, Beats(&tt.task, tt.token), "beats: %s", tt.name)
		require.Equal(t, tt.current, Current(&tt.task, tt.token, tt.status), "current: %s", tt.name)
	}
}

func TestClaimServes(t *testing.T) {
	t.Parallel()
	all := &store.ClaimTasksParams{Workflows: []string{"order", "mail"}}
	require.True(t, ClaimServes(all, "order", "1"))
	require.True(t, ClaimServes(all, "mail", ""))
	require.False(t, ClaimServes(all, "other", "1"), "a workflow the claim does not name")
	require.False(t, ClaimServes(&store.ClaimTasksParams{}, "order", "1"), "no workflow")

	pinned := &store.ClaimTasksParams{Workflows: []string{"order", "mail"}, Queues: []string{Queue("order", "2"), Queue("mail", "")}}
	require.True(t, ClaimServes(pinned, "order", "2"))
	require.False(t, ClaimServes(pinned, "order", "1"), "a version it does not serve")
	require.True(t, ClaimServes(pinned, "mail", ""), "runs recorded before versions")
	require.False(t, ClaimServes(pinned, "mail", "1"))
	require.False(t, ClaimServes(&store.ClaimTasksParams{Workflows: []string{"order"}, Queues: []string{Queue("other", "2")}}, "other", "2"),
		"a queue of a workflow it does not name")
	require.False(t, ClaimServes(&store.ClaimTasksParams{Workflows: []string{"order"}, Queues: []string{}}, "order", "1"),
		"no queue: no version")
}

func TestUnderTenantLimit(t *testing.T) {
	t.Parallel()
	require.True(t, UnderTenantLimit(0, 1000), "no cap")
	require.True(t, UnderTenantLimit(-1, 1000), "no cap")
	require.True(t, UnderTenantLimit(2, 0))
	require.True(t, UnderTenantLimit(2, 1))
	require.False(t, UnderTenantLimit(2, 2))
	require.False(t, UnderTenantLimit(2, 3), "over the cap (lowered since)")

	require.Equal(t, 2, TenantRoom(2, 0))
	require.Equal(t, 1, TenantRoom(2, 1))
	require.Zero(t, TenantRoom(2, 2))
	require.Zero(t, TenantRoom(2, 5), "over the cap (lowered since)")
}
