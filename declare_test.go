package durable_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/cronslot"
	"github.com/effectivelabs/durable/memstore"
)

// declaredFlow returns a workflow "report" that declares the given
// schedules for tenant t1, each "name=cron" with input 7, as a process's
// code would: a fresh definition each call.
func declaredFlow(schedules ...string) *durable.Workflow[int] {
	wf := durable.NewWorkflow[int]("report")
	durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
	for _, s := range schedules {
		var name, cron string
		for i := range s {
			if s[i] == '=' {
				name, cron = s[:i], s[i+1:]
				break
			}
		}
		wf.DeclareSchedule("t1", name, 7, cron, durable.ScheduleOptions{})
	}
	return wf
}

// stopEngine stops an engine, failing the test if it cannot.
func stopEngine(t *testing.T, e *durable.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, e.Stop(ctx))
}

// TestDeclaredSchedules: an engine that starts creates the schedules its
// workflows declare; they fire; an engine started again with the same
// declarations writes nothing (the schedule keeps its ID, last slot and
// update time); one started with changed declarations updates the changed
// schedule (its next slot from now, its last slot kept) and deletes the one
// no longer declared. A schedule created through the API is never touched.
func TestDeclaredSchedules(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		tick := h.duration(5*time.Minute, time.Second)
		tickCron := map[bool]string{true: "*/5 * * * *", false: "* * * * * *"}[h.virtual]
		c := h.client()
		require.NoError(t, c.Register(declaredFlow()))
		api, err := c.CreateSchedule(ctx, durable.ScheduleSpec{Tenant: "t1", Name: "api", Workflow: "report",
			Input: []byte("1"), Cron: "0 0 1 1 *"})
		require.NoError(t, err)
		get := func(name string) *durabletype.Schedule {
			sc, err := c.GetSchedule(ctx, "t1", name)
			require.NoError(t, err)
			return sc
		}

		e1 := h.launchOn(h.another(), durable.Config{WorkerID: "declare-1"}, declaredFlow("tick="+tickCron, "yearly=0 0 1 1 *"))
		first := get("tick")
		require.True(t, first.Declared)
		require.Equal(t, tickCron, first.Cron)
		require.JSONEq(t, "7", string(first.Input))
		require.False(t, get("yearly").LastSlot.After(time.Time{}))
		h.eventually(3*tick+h.duration(0, 5*time.Second), func() bool { return !get("tick").LastSlot.IsZero() },
			"the declared schedule fires")
		stopEngine(t, e1)
		fired, yearly := get("tick"), get("yearly")

		// The same declarations, by another process: nothing is written.
		e2 := h.launchOn(h.another(), durable.Config{WorkerID: "declare-2"}, declaredFlow("tick="+tickCron, "yearly=0 0 1 1 *"))
		requireSame(t, yearly, get("yearly"))
		again := get("tick")
		require.Equal(t, fired.ID, again.ID)
		require.False(t, again.LastSlot.Before(fired.LastSlot), "the last slot is kept: %s, was %s", again.LastSlot, fired.LastSlot)
		stopEngine(t, e2)
		beforeChange := get("tick")

		// Changed declarations: tick's expression changes, yearly goes.
		e3 := h.launchOn(h.another(), durable.Config{WorkerID: "declare-3"}, declaredFlow("tick=0 12 * * *"))
		changed := get("tick")
		require.Equal(t, fired.ID, changed.ID)
		require.Equal(t, "0 12 * * *", changed.Cron)
		require.True(t, changed.LastSlot.Equal(beforeChange.LastSlot), "the last slot is kept")
		require.True(t, changed.NextAt.After(changed.UpdatedAt.Add(-time.Second)), "the next slot is taken from now")
		_, err = c.GetSchedule(ctx, "t1", "yearly")
		require.ErrorIs(t, err, durabletype.ErrScheduleNotFound)
		requireSame(t, api, get("api"))
		stopEngine(t, e3)
	})
}

// requireSame fails unless a schedule was not written between two reads.
func requireSame(t *testing.T, want, got *durabletype.Schedule) {
	t.Helper()
	require.Equal(t, want.ID, got.ID)
	require.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "%s updated at %s, was %s", want.Name, got.UpdatedAt, want.UpdatedAt)
	require.True(t, want.NextAt.Equal(got.NextAt), "%s next at %s, was %s", want.Name, got.NextAt, want.NextAt)
	require.True(t, want.LastSlot.Equal(got.LastSlot))
	require.Equal(t, want.Cron, got.Cron)
	require.Equal(t, want.Paused, got.Paused)
}

// TestDeclaredSchedulesConcurrentStart: eight engines, each its own
// process (store object) with the same declarations, start at once: they
// all start, one schedule row exists per declaration, and every run the
// schedule fires is one of its slots' (a second row would fire the same
// slots under other run IDs).
func TestDeclaredSchedulesConcurrentStart(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		const engines = 8
		tickCron := map[bool]string{true: "*/5 * * * *", false: "* * * * * *"}[h.virtual]
		var wg sync.WaitGroup
		started := make([]*durable.Engine, engines)
		errs := make([]error, engines)
		begin := time.Now()
		for i := range engines {
			e, err := durable.New(h.another(), h.config(durable.Config{WorkerID: fmt.Sprintf("start-%d", i)}))
			require.NoError(t, err)
			require.NoError(t, e.Register(declaredFlow("tick="+tickCron, "daily=0 3 * * *", "weekly=0 3 * * 1")))
			started[i] = e
		}
		gate := make(chan struct{})
		for i, e := range started {
			wg.Go(func() {
				<-gate
				errs[i] = e.Start(ctx)
			})
		}
		close(gate)
		wg.Wait()
		for i, e := range started {
			require.NoError(t, errs[i], "engine %d", i)
			t.Cleanup(func() { stopEngine(t, e) })
		}
		c := h.client()
		page, err := c.ListSchedules(ctx, durable.ScheduleListOptions{Tenant: "t1"})
		require.NoError(t, err)
		require.Len(t, page.Schedules, 3)
		var sc *durabletype.Schedule
		for _, s := range page.Schedules {
			require.True(t, s.Declared)
			if s.Name == "tick" {
				sc = s
			}
		}
		require.NotNil(t, sc)

		// Let it fire a few slots; every run is one of its slots'.
		h.eventually(h.duration(time.Hour, 10*time.Second), func() bool {
			runs, err := c.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Workflow: "report"}, Limit: 100})
			require.NoError(t, err)
			return len(runs.Runs) >= 3
		}, "three slots fired")
		end := time.Now()
		step := h.duration(5*time.Minute, time.Second)
		slots := map[uuid.UUID]bool{}
		for at := begin.Truncate(step); !at.After(end.Add(step)); at = at.Add(step) {
			slots[cronslot.RunID(sc.ID, at.UTC())] = true
		}
		runs, err := c.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Workflow: "report"}, Limit: 1000})
		require.NoError(t, err)
		for _, r := range runs.Runs {
			require.True(t, slots[r.ID], "run %s (created %s) is not a slot of the one tick schedule", r.ID, r.CreatedAt)
		}
	})
}

// TestDeclaredScheduleMistakes: a declaration that cannot work fails
// Register, naming the schedule, and registers nothing.
func TestDeclaredScheduleMistakes(t *testing.T) {
	type weird struct{ F func() }
	for name, tc := range map[string]struct {
		defs   func() []durable.Definition
		detail string
	}{
		"cron": {func() []durable.Definition { return []durable.Definition{declaredFlow("bad=* * *")} },
			`schedule "bad" of tenant "t1"`},
		"zone": {func() []durable.Definition {
			wf := declaredFlow()
			wf.DeclareSchedule("t1", "zoned", 1, "* * * * *", durable.ScheduleOptions{TimeZone: "Nowhere/Else"})
			return []durable.Definition{wf}
		}, `schedule "zoned" of tenant "t1"`},
		"tenant": {func() []durable.Definition {
			wf := declaredFlow()
			wf.DeclareSchedule("", "no-tenant", 1, "* * * * *", durable.ScheduleOptions{})
			return []durable.Definition{wf}
		}, `schedule "no-tenant"`},
		"twice": {func() []durable.Definition { return []durable.Definition{declaredFlow("x=* * * * *", "x=0 * * * *")} },
			`schedule "x" of tenant "t1": declared twice`},
		"two workflows": {func() []durable.Definition {
			other := durable.NewWorkflow[int]("other")
			durable.Step(other, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
			other.DeclareSchedule("t1", "x", 1, "* * * * *", durable.ScheduleOptions{})
			return []durable.Definition{declaredFlow("x=0 * * * *"), other}
		}, `declared by workflow`},
		"input": {func() []durable.Definition {
			wf := durable.NewWorkflow[weird]("weird")
			durable.Step(wf, "a", func(ctx durable.Context, in weird) (int, error) { return 1, nil })
			wf.DeclareSchedule("t1", "unencodable", weird{F: func() {}}, "* * * * *", durable.ScheduleOptions{})
			return []durable.Definition{wf}
		}, `schedule "unencodable" of tenant "t1": input does not encode`},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
			require.NoError(t, err)
			err = e.Register(tc.defs()...)
			require.ErrorIs(t, err, durabletype.ErrInvalidSchedule)
			var de *durable.DefinitionError
			require.ErrorAs(t, err, &de)
			require.ErrorContains(t, err, tc.detail)
			ws := e.Workflows()
			require.Empty(t, ws, "nothing registered")
		})
	}

	// Declared after the workflow was registered: the next registration
	// (on this engine or another) says so.
	wf := declaredFlow()
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, e.Register(wf))
	wf.DeclareSchedule("t1", "late", 1, "* * * * *", durable.ScheduleOptions{})
	e2, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
	require.NoError(t, err)
	require.ErrorIs(t, e2.Register(wf), durable.ErrWorkflowFrozen)
}

// TestDeclaredScheduleConflicts: Start fails, naming the schedule, when a
// declaration names a schedule created through the API (which
// declarations never touch), and on a store without declared schedules.
func TestDeclaredScheduleConflicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := memstore.New()
		c, err := durable.New(s, durable.Config{Logger: quiet})
		require.NoError(t, err)
		require.NoError(t, c.Register(declaredFlow()))
		_, err = c.CreateSchedule(ctx, durable.ScheduleSpec{Tenant: "t1", Name: "taken", Workflow: "report", Input: []byte("1"), Cron: "0 * * * *"})
		require.NoError(t, err)

		e, err := durable.New(s, durable.Config{Logger: quiet})
		require.NoError(t, err)
		require.NoError(t, e.Register(declaredFlow("taken=*/5 * * * *")))
		err = e.Start(ctx)
		require.ErrorIs(t, err, durabletype.ErrScheduleExists)
		require.ErrorContains(t, err, `declared schedule "taken" of tenant "t1"`)
		sc, err := c.GetSchedule(ctx, "t1", "taken")
		require.NoError(t, err)
		require.Equal(t, "0 * * * *", sc.Cron, "untouched")
		require.False(t, sc.Declared)

		// A store that keeps no declared schedules: Start says so when a
		// workflow declares some, and starts when none does.
		bare := &hookStore{Store: memstore.New()}
		e, err = durable.New(bare, durable.Config{Logger: quiet})
		require.NoError(t, err)
		require.NoError(t, e.Register(declaredFlow("x=* * * * *")))
		require.ErrorIs(t, e.Start(ctx), durable.ErrSchedulesUnsupported)
		e, err = durable.New(bare, durable.Config{Logger: quiet})
		require.NoError(t, err)
		require.NoError(t, e.Register(declaredFlow()))
		require.NoError(t, e.Start(ctx))
		require.NoError(t, e.Stop(ctx))
	})
}

// TestDeclaredScheduleRegisteredAfterStart: the declarations of a workflow
// registered after Start are applied when it is registered.
func TestDeclaredScheduleRegisteredAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
		require.NoError(t, err)
		require.NoError(t, e.Start(ctx))
		require.NoError(t, e.Register(declaredFlow("late=*/5 * * * *")))
		synctest.Wait()
		sc, err := e.GetSchedule(ctx, "t1", "late")
		require.NoError(t, err)
		require.True(t, sc.Declared)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		sc, err = e.GetSchedule(ctx, "t1", "late")
		require.NoError(t, err)
		require.False(t, sc.LastSlot.IsZero(), "it fires")
		require.NoError(t, e.Stop(ctx))
	})
}
