package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// testInFlightIsOneMeaning: "in flight" has one definition, dag.InFlight
// (the run's status is in flight, durabletype.RunStatus.InFlight, or its
// unsuccessful settlement is under way): the stats' in-flight counts and
// the runs list's in-flight filter (the statuses RunStatusesWhere(InFlight)
// names) count exactly those runs, for runs in every reachable status and
// every place a run in flight keeps its tasks (ready, running, sleeping,
// waiting for an event, delayed, parked behind a concurrency key, its
// handler queued). A status of durabletype.RunStatuses that no run here
// reaches fails the test: add the run that reaches it.
func testInFlightIsOneMeaning(t *testing.T, s store.Store) {
	now := at(time.Minute)
	made := map[string]uuid.UUID{} // by workflow: one run each
	add := func(wf string, r store.NewRun) store.NewRun {
		t.Helper()
		r.Workflow = wf
		create(t, s, now, r)
		made[wf] = r.ID
		return r
	}
	claimOf := func(wf string) *store.ClaimedTask {
		t.Helper()
		cs := claim(t, s, now, 1, wf)
		require.Len(t, cs, 1, wf)
		require.Equal(t, made[wf], cs[0].RunID, wf)
		return cs[0]
	}

	// RUNNING, its tasks in each place a run in flight keeps them.
	add("ready", newRun("", "t", shape(step("a"))))
	add("running", newRun("", "t", shape(step("a"))))
	claimOf("running")
	add("sleeping", newRun("", "t", shape(sleepStep("nap", time.Hour))))
	delayed := newRun("", "t", shape(step("a")))
	delayed.StartAt = now.Add(time.Hour)
	add("delayed", delayed)
	add("waiting", newRun("", "t", shape(eventStep("e"))))
	mustApply(t, s, now, waitFor(claimOf("waiting"), "key"))
	add("holding", keyedRun(shape(capped("a", 1)), "k", ""))
	claimOf("holding")
	add("parked", keyedRun(shape(capped("a", 1)), "k", ""))
	// FAILED while its handler is queued (settling), FAILED, COMPLETED,
	// CANCELLED.
	add("settling", newRun("", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}, OnFailure: &durabletype.OnFailureSpec{Retry: once()}}))
	mustApply(t, s, now, failed(claimOf("settling"), "boom", true))
	add("failed", newRun("", "t", shape(step("a"))))
	mustApply(t, s, now, failed(claimOf("failed"), "boom", true))
	add("completed", newRun("", "t", shape(step("a"))))
	mustApply(t, s, now, complete(claimOf("completed"), `1`))
	add("cancelled", newRun("", "t", shape(step("a"))))
	require.NoError(t, cancelOne(t, s, now, made["cancelled"], ""))

	type key struct {
		workflow string
		status   durabletype.RunStatus
	}
	want := map[key]int{}
	var listed []uuid.UUID
	reached := map[durabletype.RunStatus]bool{}
	for wf, id := range made {
		rec := run(t, s, id)
		reached[rec.Status] = true
		if dag.InFlight(rec) {
			want[key{wf, rec.Status}]++
		}
		if rec.Status.InFlight() {
			require.True(t, dag.InFlight(rec), "%s: a run whose status is in flight is in flight", wf)
			listed = append(listed, id)
		}
	}
	for _, st := range durabletype.RunStatuses {
		require.True(t, reached[st], "no run of this test reaches status %s: add one, so that its meaning is checked on every store", st)
	}
	require.Equal(t, 1, want[key{"settling", durabletype.RunFailed}], "a failed run whose handler is queued is in flight")
	require.Zero(t, want[key{"failed", durabletype.RunFailed}])

	for _, tenant := range []string{"", "t"} {
		st, err := s.Stats(ctx, &store.StatsParams{Now: now, Window: time.Hour, Tenant: tenant})
		require.NoError(t, err)
		got := map[key]int{}
		for _, c := range st.Runs {
			if !c.Settled {
				got[key{c.Workflow, c.Status}] += c.Count
			}
		}
		require.Equal(t, want, got, "the stats' runs in flight (tenant %q)", tenant)

		page := listAll(t, s, store.RunFilter{Tenant: tenant, Statuses: durabletype.RunStatusesWhere(durabletype.RunStatus.InFlight)}, 3)
		require.ElementsMatch(t, listed, ids(page), "the list of the runs in flight (tenant %q)", tenant)
		for _, r := range page {
			require.True(t, r.Status.InFlight(), "%s", r.Status)
		}
	}
	other, err := s.Stats(ctx, &store.StatsParams{Now: now, Window: time.Hour, Tenant: "another"})
	require.NoError(t, err)
	require.Empty(t, other.Runs, "another tenant has no run in flight")
	require.Empty(t, listAll(t, s, store.RunFilter{Tenant: "another", Statuses: durabletype.RunStatusesWhere(durabletype.RunStatus.InFlight)}, 3))
	require.True(t, slices.ContainsFunc(durabletype.RunStatuses, durabletype.RunStatus.InFlight), "some status is in flight")
}
