package storetest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Tests of inputs a hostile or careless caller sends, and of rules that
// must hold identically in every store.

// maxText is the most bytes of a recorded text (dag.MaxTextLen), spelled
// out so that the test does not trust the code it checks.
const maxText = 8 << 10

// testTextsRecorded: error texts and skip reasons that PostgreSQL's text
// type refuses (NUL, invalid UTF-8) or that are too long are recorded as
// valid UTF-8 without NUL, cut on a character boundary, the same in every
// store: in the task, the run and the events.
func testTextsRecorded(t *testing.T, s store.Store) {
	const suffix = "… (truncated)"
	euros := strings.Repeat("€", (maxText-len(suffix))/len("€")) + suffix
	cases := []struct{ in, want string }{
		{"bad\x00byte", "bad\uFFFDbyte"},
		{"bad\xffbyte", "bad\uFFFDbyte"},
		{strings.Repeat("€", 3000), euros},
		{"fine, with\nnew lines\tand tabs", "fine, with\nnew lines\tand tabs"},
	}
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}, OnFailure: &durabletype.OnFailureSpec{Retry: once()}}
	for i, tc := range cases {
		r := newRun("wf", "t", sh)
		create(t, s, T0, r)
		c := claimOne(t, s, T0)
		mustApply(t, s, T0, failed(c, tc.in, true))
		tk := tasks(t, s, r.ID)["a"]
		require.Equal(t, tc.want, tk.Error, "case %d: the task's error", i)
		require.True(t, utf8.ValidString(tk.Error) && !strings.Contains(tk.Error, "\x00") && len(tk.Error) <= maxText, "case %d", i)
		require.Equal(t, tc.want, run(t, s, r.ID).Error, "case %d: the run's error", i)
		evs, err := s.ListEvents(ctx, r.ID)
		require.NoError(t, err)
		var found bool
		for _, e := range evs {
			if e.Type == durabletype.EventFailed {
				require.Equal(t, tc.want, e.Detail, "case %d: the FAILED event's detail", i)
				found = true
			}
		}
		require.True(t, found, "case %d: a FAILED event", i)
		h := claimOne(t, s, T0)
		require.Equal(t, durabletype.KindOnFailure, h.Kind)
		require.Equal(t, tc.want, h.Error, "case %d: what the on-failure handler is told", i)
		mustApply(t, s, T0, complete(h, `null`))
	}

	// A skip reason.
	r := newRun("wf", "t", shape(step("a")))
	create(t, s, T0, r)
	c := claimOne(t, s, T0)
	mustApply(t, s, T0, store.Outcome{Task: c.Ref(), Kind: store.OutcomeSkip, Reason: "nul\x00 and \xfe"})
	evs, err := s.ListEvents(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, "nul\uFFFD and \uFFFD", evs[len(evs)-1].Detail)
}

// testFairnessPerWorkflow: a claimer serving only one workflow serves a new
// tenant of that workflow within its first two claims, however far claimers
// of another workflow have moved on (the reproduction of a bug in the first
// frontier, which was shared by every workflow).
func testFairnessPerWorkflow(t *testing.T, s store.Store) {
	var runs []store.NewRun
	for range 100 {
		runs = append(runs, newRun("slow", "B", shape(step("a"))))
	}
	create(t, s, T0, runs...)
	runs = nil
	for range 1000 {
		runs = append(runs, newRun("fast", "F", shape(step("a"))))
	}
	create(t, s, T0, runs...)
	claimIn := func(n int, workflows ...string) []string {
		var out []string
		for range n {
			// One claimer per set of workflows, as engines would be.
			cs, err := s.ClaimTasks(ctx, &store.ClaimTasksParams{Now: T0, WorkerID: strings.Join(workflows, "+"), Limit: 1, Workflows: workflows})
			require.NoError(t, err)
			if len(cs) == 0 {
				break
			}
			out = append(out, cs[0].Tenant)
		}
		return out
	}
	require.Equal(t, slices.Repeat([]string{"B"}, 10), claimIn(10, "slow"))
	for len(claim(t, s, T0, 100, "fast")) > 0 {
	}
	create(t, s, T0, newRun("slow", "N", shape(step("a"))))
	seq := claimIn(2, "slow")
	require.Contains(t, seq, "N", "new tenant N is among the slow claimer's first two claims: %v", seq)

	// F, busy in fast until now, is a newcomer to slow: its lane in slow is
	// its own, so it too joins slow's current round.
	create(t, s, T0, newRun("slow", "F", shape(step("a"))))
	seq = claimIn(2, "slow")
	require.Contains(t, seq, "F", "F's first slow task is among the next two claims: %v", seq)

	// Claimers serving both workflows keep the rounds of both in step (a
	// claim moves the frontier of every workflow its claimer serves):
	// newcomers to either are served in the current round.
	runs = nil
	for range 100 {
		runs = append(runs, newRun("mixed-a", "B", shape(step("a"))), newRun("mixed-b", "F", shape(step("a"))))
	}
	create(t, s, T0, runs...)
	require.Len(t, claimIn(20, "mixed-a", "mixed-b"), 20)
	create(t, s, T0, newRun("mixed-a", "N", shape(step("a"))), newRun("mixed-b", "M", shape(step("a"))))
	seq = claimIn(4, "mixed-a", "mixed-b")
	require.Contains(t, seq, "N", "N is served in the mixed claimer's current round: %v", seq)
	require.Contains(t, seq, "M", "M is served in the mixed claimer's current round: %v", seq)
}

// testCancelledContext: a store refuses every call whose context is done
// before it starts, and changes nothing.
func testCancelledContext(t *testing.T, s store.Store) {
	done, cancel := context.WithCancel(ctx)
	cancel()
	r := newRun("wf", "t", shape(step("a")))
	_, err := s.CreateRuns(done, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{r}})
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.GetRun(ctx, r.ID)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound, "nothing was created")

	create(t, s, T0, r)
	_, err = s.ClaimTasks(done, &store.ClaimTasksParams{Now: T0, WorkerID: worker, Limit: 10, Workflows: []string{"wf"}})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, durabletype.TaskQueued, states(t, s, r.ID)["a"], "nothing was claimed")
	c := claimOne(t, s, T0)
	_, err = s.FinishTasks(done, &store.FinishTasksParams{Now: T0, Outcomes: []store.Outcome{complete(c, `1`)}})
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Heartbeat(done, &store.HeartbeatParams{Now: at(time.Minute), WorkerID: worker, Tasks: []store.TaskRef{c.Ref()}})
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.RescueTasks(done, &store.RescueTasksParams{Now: at(time.Hour), DeadAfter: time.Second, Limit: 10})
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.FireTimers(done, &store.FireTimersParams{Now: at(time.Hour), Limit: 10})
	require.ErrorIs(t, err, context.Canceled)
	tk := tasks(t, s, r.ID)["a"]
	require.Equal(t, durabletype.TaskRunning, tk.State, "nothing was finished or rescued")
	require.True(t, tk.HeartbeatAt.IsZero(), "no heartbeat was recorded")
	mustApply(t, s, T0, complete(c, `1`))
}

// testInvalidOutcome: an outcome of an unknown kind fails the whole call
// with ErrInvalidOutcome, and nothing of it is applied.
func testInvalidOutcome(t *testing.T, s store.Store) {
	r := newRun("wf", "t", shape(step("a"), step("b")))
	create(t, s, T0, r)
	cs := claim(t, s, T0, 2)
	require.Len(t, cs, 2)
	for _, kind := range []store.OutcomeKind{0, 99} {
		_, err := s.FinishTasks(ctx, &store.FinishTasksParams{Now: T0, Outcomes: []store.Outcome{
			complete(cs[0], `1`), {Task: cs[1].Ref(), Kind: kind},
		}})
		require.ErrorIs(t, err, durabletype.ErrInvalidOutcome, "kind %d", kind)
		require.Equal(t, map[string]durabletype.TaskState{"a": durabletype.TaskRunning, "b": durabletype.TaskRunning}, states(t, s, r.ID))
	}
	mustApply(t, s, T0, complete(cs[0], `1`), complete(cs[1], `2`))
}

// testInvalidNewRuns: runs a store cannot record are refused with typed
// errors, which quote at most a little of a huge value.
func testInvalidNewRuns(t *testing.T, s store.Store) {
	huge := strings.Repeat("x", 10_000)
	for _, tc := range []struct {
		workflow, tenant string
		want             error
	}{
		{"wf", "", durabletype.ErrInvalidTenant},
		{"wf", huge, durabletype.ErrInvalidTenant},
		{"wf", "nul\x00", durabletype.ErrInvalidTenant},
		{"wf", "\xff", durabletype.ErrInvalidTenant},
		{"", "t", durabletype.ErrInvalidRun},
		{"bad\x00name", "t", durabletype.ErrInvalidRun},
		{huge, "t", durabletype.ErrInvalidRun},
	} {
		_, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{newRun(tc.workflow, tc.tenant, shape(step("a")))}})
		require.ErrorIs(t, err, tc.want, "workflow %.20q tenant %.20q", tc.workflow, tc.tenant)
		require.Less(t, len(err.Error()), 300, "the error quotes a bounded part of the value: %.400s", err)
	}
	_, err := s.CreateRuns(ctx, &store.CreateRunsParams{Now: T0, Runs: []store.NewRun{newRun("wf", "t", shape(step("a"), step("a")))}})
	require.ErrorIs(t, err, durabletype.ErrInvalidRun, "an invalid shape")
	require.Empty(t, claim(t, s, T0, 10))
}

// testClaimMatchesCore: what a claim stores is exactly what the core's
// dag.Run.Claim makes of the task, whatever way the store claims (pgstore
// claims in one SQL statement).
func testClaimMatchesCore(t *testing.T, s store.Store) {
	sh := shape(durabletype.StepSpec{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 3, Factor: 1}})
	compiled, err := dag.Compile(sh)
	require.NoError(t, err)
	r := newRun("wf", "t", sh)
	create(t, s, T0, r)
	for attempt := 1; attempt <= 3; attempt++ {
		before, err := s.ListTasks(ctx, r.ID)
		require.NoError(t, err)
		rec := run(t, s, r.ID)
		now := at(time.Duration(attempt) * time.Second)
		c := claimOne(t, s, now)
		loaded := make([]store.Task, len(before))
		for i, tk := range before {
			loaded[i] = *tk
		}
		want, err := dag.Load(*rec, compiled, loaded)
		require.NoError(t, err)
		fx, ok := want.Claim(0, c.Token, worker, now)
		require.True(t, ok)
		got := tasks(t, s, r.ID)["a"]
		w := want.Tasks[0]
		require.Equal(t, w.State, got.State)
		require.Equal(t, w.Attempt, got.Attempt)
		require.Equal(t, w.Token, got.Token)
		require.Equal(t, w.Worker, got.Worker)
		requireTime(t, w.StartedAt, got.StartedAt)
		require.Equal(t, w.HeartbeatAt.IsZero(), got.HeartbeatAt.IsZero())
		require.Equal(t, w.FinishedAt.IsZero(), got.FinishedAt.IsZero())
		require.Equal(t, w.DueAt.IsZero(), got.DueAt.IsZero())
		evs, err := s.ListEvents(ctx, r.ID)
		require.NoError(t, err)
		last := evs[len(evs)-1]
		require.Len(t, fx.Events, 1)
		require.Equal(t, fx.Events[0].Type, last.Type)
		require.Equal(t, fx.Events[0].Attempt, last.Attempt)
		requireTime(t, fx.Events[0].At, last.At)
		mustApply(t, s, now, failed(c, "again", false))
	}
}
