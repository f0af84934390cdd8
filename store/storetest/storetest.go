// Package storetest is the conformance suite every durable store must pass.
// The in-memory store and the PostgreSQL store run the same tests; a behaviour
// one has and the other lacks is a bug. The driver suite (Driver, driver.go)
// tests each store's side of the core's runner (dag.Tx) on its own.
//
// Tests pass explicit times (Now) so that results are deterministic; times
// are microsecond-aligned because that is what PostgreSQL stores.
package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Factory returns a new, empty store for one test. It registers its own
// cleanup with t.
type Factory func(t *testing.T) store.Store

// T0 is the start of time in the suite's tests.
var T0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Run runs the conformance suite against the stores made by newStore.
func Run(t *testing.T, newStore Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateRuns", testCreateRuns},
		{"CreateRunsAtomic", testCreateRunsAtomic},
		{"CreateRunsInvalid", testCreateRunsInvalid},
		{"NotFound", testNotFound},
		{"ClaimBasics", testClaimBasics},
		{"ClaimWorkflowFilter", testClaimWorkflowFilter},
		{"LinearFlow", testLinearFlow},
		{"DiamondFanIn", testDiamondFanIn},
		{"FanInSameBatch", testFanInSameBatch},
		{"StaleAndDuplicate", testStaleAndDuplicate},
		{"RetryBackoff", testRetryBackoff},
		{"RetryWithoutDelay", testRetryWithoutDelay},
		{"TerminalFailure", testTerminalFailure},
		{"FailureCancelsAndOnFailure", testFailureCancelsAndOnFailure},
		{"FailureCancelsQueued", testFailureCancelsQueued},
		{"OnFailureRetries", testOnFailureRetries},
		{"SkipCascade", testSkipCascade},
		{"SkipMerge", testSkipMerge},
		{"Sleep", testSleep},
		{"SleepRoot", testSleepRoot},
		{"Release", testRelease},
		{"HeartbeatAndRescue", testHeartbeatAndRescue},
		{"RescueLostLimit", testRescueLostLimit},
		{"HeartbeatVouchesOnlyForListedClaims", testHeartbeatVouchesOnlyForListedClaims},
		{"FairnessSmall", testFairnessSmall},
		{"FairnessBacklog", testFairnessBacklog},
		{"FairnessReturningAndNewTenant", testFairnessReturningAndNewTenant},
		{"TenantLimit", testTenantLimit},
		{"ConcurrentClaims", testConcurrentClaims},
		{"ConcurrentFanIn", testConcurrentFanIn},
		{"FireTimersLimit", testFireTimersLimit},
		{"TextsRecorded", testTextsRecorded},
		{"FairnessPerWorkflow", testFairnessPerWorkflow},
		{"CancelledContext", testCancelledContext},
		{"InvalidOutcome", testInvalidOutcome},
		{"InvalidNewRuns", testInvalidNewRuns},
		{"ClaimMatchesCore", testClaimMatchesCore},
		{"ListRuns", testListRuns},
		{"ListTopLevel", testListTopLevel},
		{"ListWhileSettling", testListWhileSettling},
		{"FindRuns", testFindRuns},
		{"ActionRefused", testActionRefused},
		{"ActionAtomic", testActionAtomic},
		{"Cancel", testCancel},
		{"CancelRacesLastStep", testCancelRacesLastStep},
		{"Replay", testReplay},
		{"ReplaysRace", testReplaysRace},
		{"ReplayWithLateOutcome", testReplayWithLateOutcome},
		{"IdempotencyKey", testIdempotencyKey},
		{"RunIDDuplicate", testRunIDDuplicate},
		{"DelayedStart", testDelayedStart},
		{"StepTimeout", testStepTimeout},
		{"StepTimeoutLateOutcome", testStepTimeoutLateOutcome},
		{"QueueTimeout", testQueueTimeout},
		{"RunDeadline", testRunDeadline},
		{"Priority", testPriority},
		{"PriorityKeepsFairness", testPriorityKeepsFairness},
		{"PriorityOrder", testPriorityOrder},
		{"FlowWithConcurrencyKeys", testFlowWithConcurrencyKeys},
		{"Prune", testPrune},
		{"PruneRacesReplay", testPruneRacesReplay},
		{"PruneFinishedBeforeCreated", testPruneFinishedBeforeCreated},
		{"PruneLazy", testPruneLazy},
		{"Stats", testStats},
		{"StatsCounts", testStatsCounts},
		{"InFlightIsOneMeaning", testInFlightIsOneMeaning},
		{"ConcurrencyCap", testConcurrencyCap},
		{"ConcurrencyFIFOAcrossSteps", testConcurrencyFIFOAcrossSteps},
		{"ConcurrencyReleasePaths", testConcurrencyReleasePaths},
		{"ConcurrencyKeysInvalid", testConcurrencyKeysInvalid},
		{"RateLimit", testRateLimit},
		{"RateLimitStarts", testRateLimitStarts},
		{"ScheduleCreate", testScheduleCreate},
		{"ScheduleFire", testScheduleFire},
		{"ScheduleFireExistingRun", testScheduleFireExistingRun},
		{"SchedulePause", testSchedulePause},
		{"ScheduleDelete", testScheduleDelete},
		{"ScheduleConcurrentFire", testScheduleConcurrentFire},
		{"ScheduleShapes", testScheduleShapes},
		{"DeclareSchedules", testDeclareSchedules},
		{"DeclarePaused", testDeclarePaused},
		{"DeclareInvalid", testDeclareInvalid},
		{"DeclareConcurrent", testDeclareConcurrent},
		{"EventWait", testEventWait},
		{"EventBroadcast", testEventBroadcast},
		{"EventLookback", testEventLookback},
		{"EventTimeout", testEventTimeout},
		{"EventWaitCancelled", testEventWaitCancelled},
		{"EventInvalid", testEventInvalid},
		{"Signal", testSignal},
		{"EventPayloadRefused", testEventPayloadRefused},
		{"EventPayloadLookback", testEventPayloadLookback},
		{"SignalPayloadRefused", testSignalPayloadRefused},
		{"ChildRun", testChildRun},
		{"ChildFailureRetries", testChildFailureRetries},
		{"ChildResultSkipped", testChildResultSkipped},
		{"CancelParentCancelsChildren", testCancelParentCancelsChildren},
		{"ChildSettlesAfterParentCancelled", testChildSettlesAfterParentCancelled},
		{"MapStep", testMapStep},
		{"MapEmpty", testMapEmpty},
		{"MapOverInput", testMapOverInput},
		{"MapItemFailure", testMapItemFailure},
		{"MapCancel", testMapCancel},
		{"MapFairness", testMapFairness},
		{"WaitingStats", testWaitingStats},
		{"TelemetryFields", testTelemetryFields},
		{"WorkerRegistry", testWorkerRegistry},
		{"WorkerRegistryInvalid", testWorkerRegistryInvalid},
		{"WorkerPrune", testWorkerPrune},
		{"WorkerLeaderHoldsLead", testWorkerLeaderHoldsLead},
		{"Fencing", testFencing},
		{"SettledReports", testSettledReports},
		{"ClaimPinnedToVersion", testClaimPinnedToVersion},
		{"VersionsListedAndCounted", testVersionsListedAndCounted},
		{"UpgradeRuns", testUpgradeRuns},
		{"UpgradeRefused", testUpgradeRefused},
		{"UpgradeMovesQueueRows", testUpgradeMovesQueueRows},
		{"UpgradeReplayedRunWithHandler", testUpgradeReplayedRunWithHandler},
		{"PriorityWithinVersion", testPriorityWithinVersion},
		{"UpgradeMidMapAndChild", testUpgradeMidMapAndChild},
		{"ListWaits", testListWaits},
		{"FuncCheckpoint", testFuncCheckpoint},
		{"FuncSleep", testFuncSleep},
		{"FuncEventWait", testFuncEventWait},
		{"FuncRetry", testFuncRetry},
		{"FuncChildren", testFuncChildren},
		{"FuncCancel", testFuncCancel},
		{"FuncReplay", testFuncReplay},
		{"FuncRescue", testFuncRescue},
		{"FuncRecordsInvalid", testFuncRecordsInvalid},
		{"ReleaseLater", testReleaseLater},
		{"Storage", testStorage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newStore(t))
		})
	}
}

// ---- helpers ----------------------------------------------------------------

var ctx = context.Background()

const worker = "worker-1"

func at(d time.Duration) time.Time { return T0.Add(d) }

func once() durabletype.RetryPolicy { return durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1} }

func step(name string, parents ...string) durabletype.StepSpec {
	return durabletype.StepSpec{Name: name, Parents: parents, Retry: once()}
}

func sleepStep(name string, d time.Duration, parents ...string) durabletype.StepSpec {
	return durabletype.StepSpec{Name: name, Parents: parents, Sleep: d, Retry: once()}
}

func shape(steps ...durabletype.StepSpec) *durabletype.Shape { return &durabletype.Shape{Steps: steps} }

func newRun(wf, tenant string, sh *durabletype.Shape) store.NewRun {
	return store.NewRun{ID: uuid.New(), Workflow: wf, Tenant: tenant, Input: []byte(`{"in":1}`), Shape: sh}
}

func create(t *testing.T, s store.Store, now time.Time, runs ...store.NewRun) {
	t.Helper()
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Now: now, Runs: runs})))
}

func claim(t *testing.T, s store.Store, now time.Time, limit int, workflows ...string) []*store.ClaimedTask {
	t.Helper()
	if len(workflows) == 0 {
		workflows = []string{"wf"}
	}
	c, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: now, WorkerID: worker, Limit: limit, Workflows: workflows})
	require.NoError(t, err)
	return c
}

func claimOne(t *testing.T, s store.Store, now time.Time) *store.ClaimedTask {
	t.Helper()
	c := claim(t, s, now, 1)
	require.Len(t, c, 1, "expected one claimable task")
	return c[0]
}

func finish(t *testing.T, s store.Store, now time.Time, outcomes ...store.Outcome) []store.FinishStatus {
	t.Helper()
	res, err := s.FinishTasks(ctx, &store.FinishTasksParams{Now: now, Outcomes: outcomes})
	require.NoError(t, err)
	require.Len(t, res, len(outcomes))
	out := make([]store.FinishStatus, len(res))
	for i, r := range res {
		out[i] = r.Status
	}
	return out
}

func complete(c *store.ClaimedTask, output string) store.Outcome {
	return store.Outcome{Task: c.Ref(), Kind: store.OutcomeComplete, Output: []byte(output)}
}

func failed(c *store.ClaimedTask, msg string, terminal bool) store.Outcome {
	return store.Outcome{Task: c.Ref(), Kind: store.OutcomeFail, Error: msg, Terminal: terminal}
}

func mustApply(t *testing.T, s store.Store, now time.Time, outcomes ...store.Outcome) {
	t.Helper()
	for i, st := range finish(t, s, now, outcomes...) {
		require.Equal(t, store.FinishApplied, st, "outcome %d", i)
	}
}

func run(t *testing.T, s store.Store, id uuid.UUID) *store.Run {
	t.Helper()
	r, err := s.GetRun(ctx, id)
	require.NoError(t, err)
	return r
}

func tasks(t *testing.T, s store.Store, id uuid.UUID) map[string]*store.Task {
	t.Helper()
	ts, err := s.ListTasks(ctx, id)
	require.NoError(t, err)
	m := make(map[string]*store.Task, len(ts))
	for _, tk := range ts {
		m[tk.Name] = tk
	}
	return m
}

func states(t *testing.T, s store.Store, id uuid.UUID) map[string]durabletype.TaskState {
	t.Helper()
	m := map[string]durabletype.TaskState{}
	for name, tk := range tasks(t, s, id) {
		m[name] = tk.State
	}
	return m
}

// events returns "step:TYPE:attempt" strings of a run's log, in order.
func events(t *testing.T, s store.Store, id uuid.UUID) []string {
	t.Helper()
	evs, err := s.ListEvents(ctx, id)
	require.NoError(t, err)
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%s:%s:%d", e.Step, e.Type, e.Attempt)
	}
	return out
}

func stepEvents(t *testing.T, s store.Store, id uuid.UUID, step string) []string {
	t.Helper()
	evs, err := s.ListEvents(ctx, id)
	require.NoError(t, err)
	var out []string
	for _, e := range evs {
		if e.Step == step {
			out = append(out, fmt.Sprintf("%s:%d", e.Type, e.Attempt))
		}
	}
	return out
}

func requireTime(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.True(t, want.Equal(got), append([]any{"want %s, got %s", want, got}, msgAndArgs...)...)
}

// ---- tests ------------------------------------------------------------------

func testCreateRuns(t *testing.T, s store.Store) {
	sh := shape(step("a"), step("b", "a"), sleepStep("nap", time.Hour), step("c", "b", "nap"))
	r := newRun("wf", "tenant-1", sh)
	create(t, s, T0, r)

	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunRunning, got.Status)
	require.Equal(t, "wf", got.Workflow)
	require.Equal(t, "tenant-1", got.Tenant)
	require.Equal(t, `{"in":1}`, string(got.Input))
	requireTime(t, T0, got.CreatedAt)
	require.False(t, got.Settled())

	ts, err := s.ListTasks(ctx, r.ID)
	require.NoError(t, err)
	require.Len(t, ts, 4)
	require.Equal(t, []string{"a", "b", "nap", "c"}, []string{ts[0].Name, ts[1].Name, ts[2].Name, ts[3].Name})
	require.Equal(t, durabletype.TaskQueued, ts[0].State)
	require.Equal(t, durabletype.TaskPending, ts[1].State)
	require.Equal(t, durabletype.TaskSleeping, ts[2].State)
	require.Equal(t, durabletype.KindSleep, ts[2].Kind)
	require.Equal(t, durabletype.KindStep, ts[0].Kind)
	requireTime(t, at(time.Hour), ts[2].DueAt)
	require.Equal(t, durabletype.TaskPending, ts[3].State)
	require.Equal(t, []string{"a:QUEUED:0", "nap:SLEEPING:0"}, events(t, s, r.ID))
}

func testCreateRunsAtomic(t *testing.T, s store.Store) {
	existing := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, existing)
	fresh := newRun("wf", "t", shape(step("a")))
	clash := existing
	clash.Tenant = "other" // the ID of a run of another tenant
	_, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{fresh, clash}})
	require.ErrorIs(t, err, durabletype.ErrRunExists)
	_, err = s.GetRun(ctx, fresh.ID)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound, "a failed batch must create nothing")
	// Only the first run's task is claimable.
	require.Len(t, claim(t, s, T0, 10), 1)
}

func testCreateRunsInvalid(t *testing.T, s store.Store) {
	bad := []*durabletype.Shape{
		shape(),
		shape(step("a"), step("a")),
		shape(step("b", "a"), step("a")),
		shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 0, Factor: 1}}),
		shape(durabletype.StepSpec{Name: "bad name!", Retry: once()}),
	}
	for i, sh := range bad {
		_, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{newRun("wf", "t", sh)}})
		require.Error(t, err, "shape %d", i)
	}
	_, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{newRun("wf", "", shape(step("a")))}})
	require.Error(t, err, "empty tenant")
	require.Empty(t, claim(t, s, T0, 10))
}

func testNotFound(t *testing.T, s store.Store) {
	id := uuid.New()
	_, err := s.GetRun(ctx, id)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	_, err = s.ListTasks(ctx, id)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	_, err = s.ListEvents(ctx, id)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	// Outcomes and heartbeats for unknown runs are stale, not errors.
	ref := store.TaskRef{RunID: id, Step: "a", Token: 1}
	require.Equal(t, []store.FinishStatus{store.FinishStale},
		finish(t, s, T0, store.Outcome{Task: ref, Kind: store.OutcomeComplete}))
	hb, err := s.Heartbeat(ctx, &store.HeartbeatParams{Now: T0, WorkerID: worker, Tasks: []store.TaskRef{ref}})
	require.NoError(t, err)
	require.Equal(t, []store.TaskRef{ref}, hb.Lost)
}

func testClaimBasics(t *testing.T, s store.Store) {
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, r)
	c := claimOne(t, s, at(time.Second))
	require.Equal(t, r.ID, c.RunID)
	require.Equal(t, "wf", c.Workflow)
	require.Equal(t, "t", c.Tenant)
	require.Equal(t, "a", c.Step)
	require.Equal(t, durabletype.KindStep, c.Kind)
	require.Equal(t, 1, c.Attempt)
	require.NotZero(t, c.Token)
	require.Equal(t, `{"in":1}`, string(c.Input))
	require.Equal(t, 1, c.Retry.MaxAttempts)
	require.Empty(t, c.ParentOutputs)
	require.Empty(t, claim(t, s, at(time.Second), 10), "a claimed task is not claimed twice")

	tk := tasks(t, s, r.ID)["a"]
	require.Equal(t, durabletype.TaskRunning, tk.State)
	require.Equal(t, 1, tk.Attempt)
	require.Equal(t, c.Token, tk.Token)
	require.Equal(t, worker, tk.Worker)
	requireTime(t, at(time.Second), tk.StartedAt)
	require.Equal(t, []string{"QUEUED:0", "STARTED:1"}, stepEvents(t, s, r.ID, "a"))

	// Limit is honoured.
	for range 5 {
		create(t, s, T0, newRun("wf", "t", shape(step("a"))))
	}
	require.Len(t, claim(t, s, T0, 3), 3)
	require.Len(t, claim(t, s, T0, 3), 2)
}

func testClaimWorkflowFilter(t *testing.T, s store.Store) {
	a := newRun("alpha", "t", shape(step("a")))
	b := newRun("beta", "t", shape(step("a")))
	create(t, s, T0, a, b)
	c := claim(t, s, T0, 10, "beta")
	require.Len(t, c, 1)
	require.Equal(t, b.ID, c[0].RunID)
	require.Empty(t, claim(t, s, T0, 10, "gamma"))
	c = claim(t, s, T0, 10, "alpha", "beta")
	require.Len(t, c, 1)
	require.Equal(t, a.ID, c[0].RunID)
}

func testLinearFlow(t *testing.T, s store.Store) {
	r := newRun("wf", "t", shape(step("a"), step("b", "a"), step("c", "b")))
	create(t, s, T0, r)

	ca := claimOne(t, s, at(1*time.Second))
	mustApply(t, s, at(2*time.Second), complete(ca, `"A"`))
	require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskCompleted, "b": durabletype.TaskQueued, "c": durabletype.TaskPending}, states(t, s, r.ID))

	cb := claimOne(t, s, at(3*time.Second))
	require.Equal(t, "b", cb.Step)
	require.Equal(t, map[string][]byte{"a": []byte(`"A"`)}, cb.ParentOutputs)
	mustApply(t, s, at(4*time.Second), complete(cb, `"B"`))

	cc := claimOne(t, s, at(5*time.Second))
	require.Equal(t, map[string][]byte{"b": []byte(`"B"`)}, cc.ParentOutputs)
	require.False(t, run(t, s, r.ID).Settled())
	mustApply(t, s, at(6*time.Second), complete(cc, `"C"`))

	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunCompleted, got.Status)
	requireTime(t, at(6*time.Second), got.FinishedAt)
	ts := tasks(t, s, r.ID)
	require.Equal(t, `"C"`, string(ts["c"].Output))
	requireTime(t, at(5*time.Second), ts["c"].StartedAt)
	requireTime(t, at(6*time.Second), ts["c"].FinishedAt)
	require.Equal(t, []string{
		"a:QUEUED:0", "a:STARTED:1", "a:COMPLETED:1", "b:QUEUED:0",
		"b:STARTED:1", "b:COMPLETED:1", "c:QUEUED:0",
		"c:STARTED:1", "c:COMPLETED:1",
	}, events(t, s, r.ID))
	evs, err := s.ListEvents(ctx, r.ID)
	require.NoError(t, err)
	for i := 1; i < len(evs); i++ {
		require.Less(t, evs[i-1].ID, evs[i].ID, "event ids increase")
		require.False(t, evs[i].At.Before(evs[i-1].At), "event times do not go back")
	}
}

func diamond() *durabletype.Shape {
	return shape(step("a"), step("b", "a"), step("c", "a"), step("d", "b", "c"))
}

func testDiamondFanIn(t *testing.T, s store.Store) {
	r := newRun("wf", "t", diamond())
	create(t, s, T0, r)
	mustApply(t, s, T0, complete(claimOne(t, s, T0), `1`))
	cs := claim(t, s, T0, 10)
	require.Len(t, cs, 2)
	mustApply(t, s, T0, complete(cs[0], `2`))
	require.Equal(t, durabletype.TaskPending, states(t, s, r.ID)["d"], "d waits for its second parent")
	require.Empty(t, claim(t, s, T0, 10))
	mustApply(t, s, T0, complete(cs[1], `3`))
	cd := claimOne(t, s, T0)
	require.Equal(t, "d", cd.Step)
	require.Len(t, cd.ParentOutputs, 2)
	mustApply(t, s, T0, complete(cd, `4`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
	require.Equal(t, []string{"QUEUED:0", "STARTED:1", "COMPLETED:1"}, stepEvents(t, s, r.ID, "d"))
}

func testFanInSameBatch(t *testing.T, s store.Store) {
	r := newRun("wf", "t", diamond())
	create(t, s, T0, r)
	mustApply(t, s, T0, complete(claimOne(t, s, T0), `1`))
	cs := claim(t, s, T0, 10)
	require.Len(t, cs, 2)
	mustApply(t, s, T0, complete(cs[0], `2`), complete(cs[1], `3`))
	cd := claim(t, s, T0, 10)
	require.Len(t, cd, 1)
	require.Equal(t, "d", cd[0].Step)
}

func testStaleAndDuplicate(t *testing.T, s store.Store) {
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	wrong := complete(c, `"x"`)
	wrong.Task.Token++
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, T0, wrong))
	require.Equal(t, durabletype.TaskRunning, states(t, s, r.ID)["a"], "a stale outcome changes nothing")
	unknownStep := complete(c, `"x"`)
	unknownStep.Task.Step = "nope"
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, T0, unknownStep))

	require.Equal(t, []store.FinishStatus{store.FinishApplied, store.FinishDuplicate},
		finish(t, s, T0, complete(c, `"ok"`), complete(c, `"again"`)))
	require.Equal(t, []store.FinishStatus{store.FinishDuplicate}, finish(t, s, T0, complete(c, `"again"`)))
	require.Equal(t, `"ok"`, string(tasks(t, s, r.ID)["a"].Output), "the first recording wins")
	require.Equal(t, []string{"QUEUED:0", "STARTED:1", "COMPLETED:1"}, stepEvents(t, s, r.ID, "a"))
}

func testRetryBackoff(t *testing.T, s store.Store) {
	sh := shape(durabletype.StepSpec{Name: "flaky", Retry: durabletype.RetryPolicy{
		MaxAttempts: 3, InitialDelay: time.Second, Factor: 2, MaxDelay: time.Minute,
	}})
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)

	c1 := claimOne(t, s, T0)
	mustApply(t, s, T0, failed(c1, "boom 1", false))
	tk := tasks(t, s, r.ID)["flaky"]
	require.Equal(t, durabletype.TaskQueued, tk.State)
	requireTime(t, at(time.Second), tk.DueAt)
	require.Equal(t, "boom 1", tk.Error)
	require.Empty(t, claim(t, s, at(time.Second), 10), "a backoff is not claimable until its timer fires")

	fr, err := s.FireTimers(ctx, &store.FireTimersParams{Now: at(999 * time.Millisecond), Limit: 10})
	require.NoError(t, err)
	require.Zero(t, fr.Fired)
	require.True(t, fr.HasNext)
	require.Equal(t, time.Millisecond, fr.Next)

	fr, err = s.FireTimers(ctx, &store.FireTimersParams{Now: at(time.Second), Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, fr.Fired)
	require.False(t, fr.HasNext)

	c2 := claimOne(t, s, at(time.Second))
	require.Equal(t, 2, c2.Attempt)
	require.NotEqual(t, c1.Token, c2.Token)
	mustApply(t, s, at(time.Second), failed(c2, "boom 2", false))
	requireTime(t, at(3*time.Second), tasks(t, s, r.ID)["flaky"].DueAt, "second delay is doubled")

	fireAll(t, s, at(3*time.Second))
	c3 := claimOne(t, s, at(3*time.Second))
	require.Equal(t, 3, c3.Attempt)
	mustApply(t, s, at(4*time.Second), failed(c3, "boom 3", false))

	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunFailed, got.Status)
	require.Equal(t, "flaky", got.FailedStep)
	require.Equal(t, "boom 3", got.Error)
	requireTime(t, at(4*time.Second), got.FinishedAt)
	require.Equal(t, []string{
		"QUEUED:0", "STARTED:1", "RETRYING:1", "QUEUED:1", "STARTED:2", "RETRYING:2",
		"QUEUED:2", "STARTED:3", "FAILED:3",
	}, stepEvents(t, s, r.ID, "flaky"))
	evs, err := s.ListEvents(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, "boom 1", evs[2].Detail)
	requireTime(t, at(time.Second), evs[2].DueAt)
}

func fireAll(t *testing.T, s store.Store, now time.Time) int {
	t.Helper()
	fr, err := s.FireTimers(ctx, &store.FireTimersParams{Now: now, Limit: 1000})
	require.NoError(t, err)
	return fr.Fired
}

func testRetryWithoutDelay(t *testing.T, s store.Store) {
	sh := shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 2, Factor: 1}})
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	mustApply(t, s, T0, failed(claimOne(t, s, T0), "once", false))
	c := claimOne(t, s, T0)
	require.Equal(t, 2, c.Attempt, "a zero delay requeues at once")
	mustApply(t, s, T0, complete(c, `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
}

func testTerminalFailure(t *testing.T, s store.Store) {
	sh := shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 5, InitialDelay: time.Second, Factor: 2}}, step("b", "a"))
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	mustApply(t, s, T0, failed(claimOne(t, s, T0), "bad input", true))
	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunFailed, got.Status)
	require.Equal(t, "bad input", got.Error)
	require.True(t, got.Settled())
	require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskFailed, "b": durabletype.TaskCancelled}, states(t, s, r.ID))
	require.Equal(t, []string{"QUEUED:0", "STARTED:1", "FAILED:1"}, stepEvents(t, s, r.ID, "a"))
	require.Equal(t, []string{"CANCELLED:0"}, stepEvents(t, s, r.ID, "b"))
}

func testFailureCancelsAndOnFailure(t *testing.T, s store.Store) {
	sh := shape(step("a"), step("slow", "a"), step("bad", "a"), sleepStep("nap", time.Hour, "a"), step("after", "slow", "bad"))
	sh.OnFailure = &durabletype.OnFailureSpec{Retry: once()}
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	mustApply(t, s, T0, complete(claimOne(t, s, T0), `1`))
	cs := claim(t, s, T0, 10)
	require.Len(t, cs, 2)
	byStep := map[string]*store.ClaimedTask{cs[0].Step: cs[0], cs[1].Step: cs[1]}
	mustApply(t, s, at(time.Second), failed(byStep["bad"], "kaput", false))

	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunFailed, got.Status)
	require.Equal(t, "bad", got.FailedStep)
	require.False(t, got.Settled(), "a running step and the on-failure handler are still to finish")
	require.Equal(t, map[string]durabletype.TaskState{
		"a": durabletype.TaskCompleted, "slow": durabletype.TaskRunning, "bad": durabletype.TaskFailed,
		"nap": durabletype.TaskCancelled, "after": durabletype.TaskCancelled, durabletype.OnFailureTask: durabletype.TaskQueued,
	}, states(t, s, r.ID))
	require.Zero(t, fireAll(t, s, at(2*time.Hour)), "a cancelled sleep never fires")

	hb, err := s.Heartbeat(ctx, &store.HeartbeatParams{Now: at(time.Second), WorkerID: worker,
		Tasks: []store.TaskRef{byStep["slow"].Ref()}})
	require.NoError(t, err)
	require.Equal(t, []store.TaskRef{byStep["slow"].Ref()}, hb.Lost, "workers learn that the run failed")

	of := claimOne(t, s, at(2*time.Second))
	require.Equal(t, durabletype.OnFailureTask, of.Step)
	require.Equal(t, durabletype.KindOnFailure, of.Kind)
	require.Equal(t, "bad", of.FailedStep)
	require.Equal(t, "kaput", of.Error)
	require.Equal(t, `{"in":1}`, string(of.Input))
	hb, err = s.Heartbeat(ctx, &store.HeartbeatParams{Now: at(time.Second), WorkerID: worker, Tasks: []store.TaskRef{of.Ref()}})
	require.NoError(t, err)
	require.Empty(t, hb.Lost, "the on-failure handler runs in a failed run")
	mustApply(t, s, at(3*time.Second), complete(of, `"notified"`))
	require.False(t, run(t, s, r.ID).Settled())

	// The in-flight step finishes after the failure: its output is recorded,
	// nothing downstream moves, and the run settles.
	mustApply(t, s, at(4*time.Second), complete(byStep["slow"], `"late"`))
	got = run(t, s, r.ID)
	require.Equal(t, durabletype.RunFailed, got.Status)
	requireTime(t, at(4*time.Second), got.FinishedAt)
	ts := tasks(t, s, r.ID)
	require.Equal(t, durabletype.TaskCompleted, ts["slow"].State)
	require.Equal(t, durabletype.TaskCancelled, ts["after"].State)
	require.Equal(t, durabletype.TaskCompleted, ts[durabletype.OnFailureTask].State)
	list, err := s.ListTasks(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, durabletype.OnFailureTask, list[len(list)-1].Name, "the on-failure task is listed last")
	require.Empty(t, claim(t, s, at(5*time.Second), 10))
}

func testFailureCancelsQueued(t *testing.T, s store.Store) {
	sh := shape(step("a"), step("b"), step("c"))
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	require.Equal(t, "a", c.Step)
	mustApply(t, s, T0, failed(c, "no", true))
	require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskFailed, "b": durabletype.TaskCancelled, "c": durabletype.TaskCancelled}, states(t, s, r.ID))
	require.Empty(t, claim(t, s, T0, 10), "cancelled tasks leave the queue")
	require.True(t, run(t, s, r.ID).Settled())
}

func testOnFailureRetries(t *testing.T, s store.Store) {
	sh := shape(step("a"))
	sh.OnFailure = &durabletype.OnFailureSpec{Retry: durabletype.RetryPolicy{MaxAttempts: 2, Factor: 1}}
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	mustApply(t, s, T0, failed(claimOne(t, s, T0), "x", false))
	of := claimOne(t, s, T0)
	mustApply(t, s, T0, failed(of, "handler broke", false))
	of2 := claimOne(t, s, T0)
	require.Equal(t, 2, of2.Attempt)
	mustApply(t, s, T0, failed(of2, "handler broke again", false))
	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunFailed, got.Status)
	require.Equal(t, "x", got.Error, "the run keeps the error of the step that failed it")
	require.True(t, got.Settled())
	require.Equal(t, durabletype.TaskFailed, states(t, s, r.ID)[durabletype.OnFailureTask])
}

func testSkipCascade(t *testing.T, s store.Store) {
	sh := shape(step("a"), step("b", "a"), step("c", "b"), step("d", "c"), step("e", "a"))
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	mustApply(t, s, T0, complete(claimOne(t, s, T0), `1`))
	cs := claim(t, s, T0, 10)
	require.Len(t, cs, 2)
	for _, c := range cs {
		if c.Step == "b" {
			mustApply(t, s, T0, store.Outcome{Task: c.Ref(), Kind: store.OutcomeSkip, Reason: "condition on a"})
		} else {
			mustApply(t, s, T0, complete(c, `2`))
		}
	}
	require.Equal(t, map[string]durabletype.TaskState{
		"a": durabletype.TaskCompleted, "b": durabletype.TaskSkipped, "c": durabletype.TaskSkipped, "d": durabletype.TaskSkipped, "e": durabletype.TaskCompleted,
	}, states(t, s, r.ID))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
	require.Equal(t, []string{"SKIPPED:0"}, stepEvents(t, s, r.ID, "d"))
	evs, err := s.ListEvents(ctx, r.ID)
	require.NoError(t, err)
	for _, e := range evs {
		if e.Step == "b" && e.Type == durabletype.EventSkipped {
			require.Equal(t, "condition on a", e.Detail)
		}
	}
}

func testSkipMerge(t *testing.T, s store.Store) {
	// validate -> charge | reject -> finalize(charge, reject)
	sh := shape(step("validate"), step("charge", "validate"), step("reject", "validate"), step("finalize", "charge", "reject"))
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	mustApply(t, s, T0, complete(claimOne(t, s, T0), `{"valid":false}`))
	cs := claim(t, s, T0, 10)
	require.Len(t, cs, 2)
	for _, c := range cs {
		if c.Step == "charge" {
			mustApply(t, s, T0, store.Outcome{Task: c.Ref(), Kind: store.OutcomeSkip})
			require.Equal(t, durabletype.TaskPending, states(t, s, r.ID)["finalize"])
		}
	}
	for _, c := range cs {
		if c.Step == "reject" {
			mustApply(t, s, T0, complete(c, `"rejected"`))
		}
	}
	fin := claimOne(t, s, T0)
	require.Equal(t, "finalize", fin.Step)
	require.Equal(t, map[string][]byte{"reject": []byte(`"rejected"`)}, fin.ParentOutputs, "a skipped parent has no output")
	mustApply(t, s, T0, complete(fin, `"done"`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
}

func testSleep(t *testing.T, s store.Store) {
	sh := shape(step("a"), sleepStep("nap", 24*time.Hour, "a"), step("b", "nap"))
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	mustApply(t, s, at(time.Minute), complete(claimOne(t, s, T0), `1`))
	tk := tasks(t, s, r.ID)["nap"]
	require.Equal(t, durabletype.TaskSleeping, tk.State)
	requireTime(t, at(time.Minute+24*time.Hour), tk.DueAt)

	fr, err := s.FireTimers(ctx, &store.FireTimersParams{Now: at(time.Hour), Limit: 10})
	require.NoError(t, err)
	require.Zero(t, fr.Fired)
	require.True(t, fr.HasNext)
	require.Equal(t, 23*time.Hour+time.Minute, fr.Next)
	require.Empty(t, claim(t, s, at(time.Hour), 10))

	require.Equal(t, 1, fireAll(t, s, at(25*time.Hour)))
	require.Equal(t, durabletype.TaskCompleted, states(t, s, r.ID)["nap"])
	c := claimOne(t, s, at(25*time.Hour))
	require.Equal(t, "b", c.Step)
	require.Empty(t, c.ParentOutputs["nap"], "a sleep has no output")
	mustApply(t, s, at(25*time.Hour), complete(c, `2`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
	require.Equal(t, []string{"SLEEPING:0", "WOKEN:0"}, stepEvents(t, s, r.ID, "nap"))
}

func testSleepRoot(t *testing.T, s store.Store) {
	sh := shape(sleepStep("a", time.Second), sleepStep("b", 2*time.Second))
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	fr, err := s.FireTimers(ctx, &store.FireTimersParams{Now: T0, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, time.Second, fr.Next)
	require.Equal(t, 1, fireAll(t, s, at(time.Second)))
	require.False(t, run(t, s, r.ID).Settled())
	require.Equal(t, 1, fireAll(t, s, at(5*time.Second)))
	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunCompleted, got.Status)
	requireTime(t, at(5*time.Second), got.FinishedAt)
}

func testRelease(t *testing.T, s store.Store) {
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	mustApply(t, s, T0, store.Outcome{Task: c.Ref(), Kind: store.OutcomeRelease})
	tk := tasks(t, s, r.ID)["a"]
	require.Equal(t, durabletype.TaskQueued, tk.State)
	require.Equal(t, 0, tk.Attempt, "a released attempt does not count")
	c2 := claimOne(t, s, T0)
	require.Equal(t, 1, c2.Attempt)
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, T0, complete(c, `1`)), "the released claim is stale")
	mustApply(t, s, T0, complete(c2, `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
}

func testHeartbeatAndRescue(t *testing.T, s store.Store) {
	sh := shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 2, InitialDelay: time.Second, Factor: 2}})
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	dead := 30 * time.Second

	res, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: at(29 * time.Second), DeadAfter: dead, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, res.Rescued, "a fresh claim is alive")

	hb, err := s.Heartbeat(ctx, &store.HeartbeatParams{Now: at(20 * time.Second), WorkerID: worker, Tasks: []store.TaskRef{c.Ref()}})
	require.NoError(t, err)
	require.Empty(t, hb.Lost)
	res, err = s.RescueTasks(ctx, &store.RescueTasksParams{Now: at(49 * time.Second), DeadAfter: dead, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, res.Rescued, "a heartbeat keeps the worker's tasks alive")

	res, err = s.RescueTasks(ctx, &store.RescueTasksParams{Now: at(50 * time.Second), DeadAfter: dead, Limit: 10})
	require.NoError(t, err)
	require.Len(t, res.Rescued, 1)
	require.Equal(t, r.ID, res.Rescued[0].RunID)
	require.Equal(t, "a", res.Rescued[0].Step)

	tk := tasks(t, s, r.ID)["a"]
	require.Equal(t, durabletype.TaskQueued, tk.State)
	if !tk.DueAt.IsZero() { // else queued at once
		require.LessOrEqual(t, tk.DueAt.Sub(at(50*time.Second)), dag.LostSpread(dead),
			"a lost attempt is no failure: it waits no backoff, only its share of the spread of a rescue")
	}
	require.Equal(t, 0, tk.Attempt, "a lost attempt spends no retry")
	require.Contains(t, tk.Error, worker)

	// The old claimant's late outcome and heartbeat are rejected.
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, at(51*time.Second), complete(c, `"late"`)))
	hb, err = s.Heartbeat(ctx, &store.HeartbeatParams{Now: at(51 * time.Second), WorkerID: worker, Tasks: []store.TaskRef{c.Ref()}})
	require.NoError(t, err)
	require.Len(t, hb.Lost, 1)

	fireAll(t, s, at(50*time.Second).Add(dag.LostSpread(dead)))
	c2 := claimOne(t, s, at(51*time.Second))
	require.Equal(t, 1, c2.Attempt)
	mustApply(t, s, at(52*time.Second), complete(c2, `"fresh"`))
	require.Equal(t, []store.FinishStatus{store.FinishStale}, finish(t, s, at(53*time.Second), complete(c, `"late"`)))
	require.Equal(t, `"fresh"`, string(tasks(t, s, r.ID)["a"].Output))
	require.Equal(t, durabletype.RunCompleted, run(t, s, r.ID).Status)
	require.Equal(t, []string{"QUEUED:0", "STARTED:1", "LOST:1", "QUEUED:0", "STARTED:1", "COMPLETED:1"}, stepEvents(t, s, r.ID, "a"))
}

// testHeartbeatVouchesOnlyForListedClaims: a worker killed mid-step and
// restarted under the same ID heartbeats for its new claims only; the claim
// its predecessor left behind still goes stale and is rescued.
func testHeartbeatVouchesOnlyForListedClaims(t *testing.T, s store.Store) {
	old := newRun("wf", "t", shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 2, Factor: 1}}))
	create(t, s, T0, old)
	orphan := claimOne(t, s, T0) // then the process dies
	fresh := newRun("wf", "t", shape(step("a")))
	create(t, s, at(time.Second), fresh)
	current := claimOne(t, s, at(time.Second)) // same worker ID, new process
	for _, sec := range []int{10, 20, 30} {
		hb, err := s.Heartbeat(ctx, &store.HeartbeatParams{Now: at(time.Duration(sec) * time.Second), WorkerID: worker,
			Tasks: []store.TaskRef{current.Ref()}})
		require.NoError(t, err)
		require.Empty(t, hb.Lost)
	}
	requireTime(t, at(30*time.Second), tasks(t, s, fresh.ID)["a"].HeartbeatAt)
	require.True(t, tasks(t, s, old.ID)["a"].HeartbeatAt.IsZero())
	res, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: at(31 * time.Second), DeadAfter: 30 * time.Second, Limit: 10})
	require.NoError(t, err)
	require.Len(t, res.Rescued, 1, "only the claim nobody vouches for is dead")
	require.Equal(t, orphan.RunID, res.Rescued[0].RunID)
	require.Equal(t, durabletype.TaskRunning, states(t, s, fresh.ID)["a"])
}

// testRescueLostLimit: lost attempts spend no retry, even on a step
// without retries, until LostLimit of them in a row fail the step (a
// poison step); an attempt that ends otherwise resets the count.
func testRescueLostLimit(t *testing.T, s store.Store) {
	rescue := func(now time.Time) {
		t.Helper()
		res, err := s.RescueTasks(ctx, &store.RescueTasksParams{Now: now, DeadAfter: time.Second, Limit: 10})
		require.NoError(t, err)
		require.Len(t, res.Rescued, 1)
		fireAll(t, s, now.Add(dag.LostSpread(time.Second))) // queued again within the spread
	}
	r := newRun("wf", "t", shape(step("a"), step("b", "a")))
	create(t, s, T0, r)
	for k := 1; k < durabletype.DefaultLostLimit; k++ {
		claimOne(t, s, at(time.Duration(k)*time.Minute))
		rescue(at(time.Duration(k)*time.Minute + 2*time.Second))
		require.Equal(t, durabletype.RunRunning, run(t, s, r.ID).Status, "lost attempt %d of a step without retries", k)
		require.Equal(t, durabletype.TaskQueued, states(t, s, r.ID)["a"])
	}
	c := claimOne(t, s, at(time.Hour))
	require.Equal(t, 1, c.Attempt, "lost attempts are not counted")
	rescue(at(time.Hour + 2*time.Second))
	got := run(t, s, r.ID)
	require.Equal(t, durabletype.RunFailed, got.Status)
	require.Equal(t, "a", got.FailedStep)
	require.True(t, strings.HasPrefix(got.Error, dag.PoisonText), got.Error)
	require.Contains(t, got.Error, worker)
	require.True(t, got.Settled())
	require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskFailed, "b": durabletype.TaskCancelled}, states(t, s, r.ID))
	evs := stepEvents(t, s, r.ID, "a")
	require.Equal(t, durabletype.DefaultLostLimit, strings.Count(strings.Join(evs, " "), "LOST:1"), evs)
	require.Equal(t, "FAILED:1", evs[len(evs)-1])

	// LostLimit 1: the first lost attempt fails the step.
	one := newRun("wf", "t", shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 3, Factor: 1}, LostLimit: 1}))
	create(t, s, at(2*time.Hour), one)
	claimOne(t, s, at(2*time.Hour))
	rescue(at(2*time.Hour + 2*time.Second))
	require.Equal(t, durabletype.RunFailed, run(t, s, one.ID).Status, "retries do not apply to a poison step")

	// An attempt that fails in between resets the count; so the second
	// lost attempt of a limit of 2 is not the second in a row.
	reset := newRun("wf", "t", shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 2, Factor: 1}, LostLimit: 2}))
	create(t, s, at(3*time.Hour), reset)
	claimOne(t, s, at(3*time.Hour))
	rescue(at(3*time.Hour + 2*time.Second))
	mustApply(t, s, at(3*time.Hour+3*time.Second), failed(claimOne(t, s, at(3*time.Hour+3*time.Second)), "boom", false))
	claimOne(t, s, at(3*time.Hour+4*time.Second))
	rescue(at(3*time.Hour + 6*time.Second))
	require.Equal(t, durabletype.RunRunning, run(t, s, reset.ID).Status, "the count restarted after the failed attempt")
	c = claimOne(t, s, at(3*time.Hour+7*time.Second))
	require.Equal(t, 2, c.Attempt, "one failed attempt counted, two lost ones not")
	mustApply(t, s, at(3*time.Hour+8*time.Second), complete(c, `1`))
	require.Equal(t, durabletype.RunCompleted, run(t, s, reset.ID).Status)
}

func tenantsOf(cs []*store.ClaimedTask) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Tenant
	}
	return out
}

func claimSequence(t *testing.T, s store.Store, n int) []string {
	t.Helper()
	var out []string
	for range n {
		cs := claim(t, s, T0, 1)
		if len(cs) == 0 {
			break
		}
		out = append(out, cs[0].Tenant)
	}
	return out
}

func testFairnessSmall(t *testing.T, s store.Store) {
	for range 5 {
		create(t, s, T0, newRun("wf", "B", shape(step("a"))))
	}
	create(t, s, T0, newRun("wf", "A", shape(step("a"))))
	seq := claimSequence(t, s, 6)
	require.Len(t, seq, 6)
	require.Contains(t, seq[:2], "A", "A is served within the first two claims: %v", seq)
}

func testFairnessBacklog(t *testing.T, s store.Store) {
	const backlog = 10_000
	runs := make([]store.NewRun, backlog)
	for i := range runs {
		runs[i] = newRun("wf", "B", shape(step("a")))
	}
	create(t, s, T0, runs...)
	create(t, s, T0, newRun("wf", "A", shape(step("a"))))
	require.Contains(t, claimSequence(t, s, 2), "A", "A is served within the first two claims behind a backlog of %d", backlog)

	// Ten more tenants arrive with skewed backlogs (20 to 200 tasks): while
	// all eleven are backlogged, each gets the same share of claims.
	var more []store.NewRun
	for k := range 10 {
		for range 20 * (k + 1) {
			more = append(more, newRun("wf", fmt.Sprintf("T%d", k), shape(step("a"))))
		}
	}
	create(t, s, T0, more...)
	counts := map[string]int{}
	for range 11 {
		for _, c := range claim(t, s, T0, 10) {
			counts[c.Tenant]++
		}
	}
	require.Len(t, counts, 11, "%v", counts)
	for ten, n := range counts {
		require.InDelta(t, 10, n, 1, "tenant %s: %v", ten, counts)
	}
}

func testFairnessReturningAndNewTenant(t *testing.T, s store.Store) {
	// A enqueues once early, then goes idle while B builds a backlog.
	create(t, s, T0, newRun("wf", "A", shape(step("a"))))
	require.Equal(t, []string{"A"}, claimSequence(t, s, 1))
	var runs []store.NewRun
	for range 100 {
		runs = append(runs, newRun("wf", "B", shape(step("a"))))
	}
	create(t, s, T0, runs...)
	require.Equal(t, slices.Repeat([]string{"B"}, 50), claimSequence(t, s, 50))

	// A returns with three tasks and C arrives with three: each joins the
	// current round, one task per round, interleaved with B; neither waits
	// behind B's remaining 50 nor takes all its tasks at once.
	runs = nil
	for range 3 {
		runs = append(runs, newRun("wf", "A", shape(step("a"))))
	}
	for range 3 {
		runs = append(runs, newRun("wf", "C", shape(step("a"))))
	}
	create(t, s, T0, runs...)
	seq := claimSequence(t, s, 12)
	pos := map[string][]int{}
	for i, ten := range seq {
		pos[ten] = append(pos[ten], i)
	}
	require.Len(t, pos["A"], 3, "sequence %v", seq)
	require.Len(t, pos["C"], 3, "sequence %v", seq)
	require.Less(t, pos["A"][0], 3, "returning A is served in the current round: %v", seq)
	require.Less(t, pos["C"][0], 3, "new C is served in the current round: %v", seq)
	require.GreaterOrEqual(t, len(pos["B"]), 3, "B keeps its share: %v", seq)
	for _, ten := range []string{"A", "C"} {
		for i := 1; i < len(pos[ten]); i++ {
			require.Greater(t, pos[ten][i]-pos[ten][i-1], 1, "%s gets one task per round: %v", ten, seq)
		}
	}
}

func testTenantLimit(t *testing.T, s store.Store) {
	for range 3 {
		create(t, s, T0, newRun("wf", "B", shape(step("a"))))
	}
	create(t, s, T0, newRun("wf", "A", shape(step("a"))))
	p := &store.ClaimTasksParams{Now: T0, WorkerID: worker, Limit: 10, Workflows: []string{"wf"}, TenantLimit: 1}
	cs, err := s.ClaimTasks(ctx, p)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"A", "B"}, tenantsOf(cs), "one task per tenant at a cap of 1")
	cs2, err := s.ClaimTasks(ctx, p)
	require.NoError(t, err)
	require.Empty(t, cs2, "both tenants are at their cap")
	for _, c := range cs {
		if c.Tenant == "B" {
			mustApply(t, s, T0, complete(c, `1`))
		}
	}
	cs2, err = s.ClaimTasks(ctx, p)
	require.NoError(t, err)
	require.Equal(t, []string{"B"}, tenantsOf(cs2), "a finished task frees its tenant's slot")
}

func testConcurrentClaims(t *testing.T, s store.Store) {
	// 8 claimers with random batch sizes over 1,000 tasks of 17 tenants:
	// every task is claimed exactly once, under a token no other claim has.
	const n = 1000
	runs := make([]store.NewRun, n)
	for i := range runs {
		runs[i] = newRun("wf", fmt.Sprintf("t%d", i%17), shape(step("a")))
	}
	create(t, s, T0, runs...)
	var mu sync.Mutex
	seen := map[uuid.UUID]int{}
	tokens := map[int64]bool{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: T0, WorkerID: fmt.Sprintf("w%d", w),
					Limit: 1 + rng.IntN(40), Workflows: []string{"wf"}})
				if err != nil {
					t.Error(err)
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, c := range cs {
					seen[c.RunID]++
					if tokens[c.Token] {
						t.Errorf("token %d claimed twice", c.Token)
					}
					tokens[c.Token] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, n, "every task is claimed")
	for id, k := range seen {
		require.Equal(t, 1, k, "run %s claimed %d times", id, k)
	}
}

func testConcurrentFanIn(t *testing.T, s store.Store) {
	// Many parents of one child complete concurrently, in separate calls
	// (on a database, separate connections) released at once in random
	// order: the child is enqueued exactly once, and only after the last
	// parent.
	const parents = 8
	const runsN = 50
	steps := []durabletype.StepSpec{step("root")}
	var names []string
	for i := range parents {
		name := fmt.Sprintf("p%d", i)
		names = append(names, name)
		steps = append(steps, step(name, "root"))
	}
	steps = append(steps, step("join", names...))
	var ids []uuid.UUID
	for range runsN {
		r := newRun("wf", fmt.Sprintf("t%d", len(ids)%3), shape(steps...))
		ids = append(ids, r.ID)
		create(t, s, T0, r)
	}
	for _, c := range claim(t, s, T0, runsN) {
		mustApply(t, s, T0, complete(c, `0`))
	}
	cs := claim(t, s, T0, runsN*parents)
	require.Len(t, cs, runsN*parents)
	rand.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, c := range cs {
		wg.Go(func() {
			<-start
			res, err := s.FinishTasks(ctx, &store.FinishTasksParams{Now: T0, Outcomes: []store.Outcome{complete(c, `1`)}})
			if err != nil {
				t.Error(err)
				return
			}
			if res[0].Status != store.FinishApplied {
				t.Errorf("outcome %v", res[0].Status)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, []string{"QUEUED:0"}, stepEvents(t, s, id, "join"), "join enqueued once in run %s", id)
	}
	joins := claim(t, s, T0, runsN*2)
	require.Len(t, joins, runsN)
	for _, c := range joins {
		require.Equal(t, "join", c.Step)
		require.Len(t, c.ParentOutputs, parents)
		mustApply(t, s, T0, complete(c, `2`))
	}
	for _, id := range ids {
		require.Equal(t, durabletype.RunCompleted, run(t, s, id).Status)
	}
}

func testFireTimersLimit(t *testing.T, s store.Store) {
	var ids []uuid.UUID
	for i := range 5 {
		r := newRun("wf", "t", shape(sleepStep("nap", time.Duration(i+1)*time.Second)))
		ids = append(ids, r.ID)
		create(t, s, T0, r)
	}
	fr, err := s.FireTimers(ctx, &store.FireTimersParams{Now: at(time.Minute), Limit: 2})
	require.NoError(t, err)
	require.Equal(t, 2, fr.Fired)
	require.True(t, fr.HasNext)
	require.Zero(t, fr.Next, "more timers are already due")
	// The earliest timers fire first.
	require.Equal(t, durabletype.RunCompleted, run(t, s, ids[0]).Status)
	require.Equal(t, durabletype.RunCompleted, run(t, s, ids[1]).Status)
	require.Equal(t, durabletype.RunRunning, run(t, s, ids[2]).Status)
	require.Equal(t, 3, fireAll(t, s, at(time.Minute)))
}

// created drops the result of CreateRuns.
func created(_ *store.CreateRunsResult, err error) error { return err }
