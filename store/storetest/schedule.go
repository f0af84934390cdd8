package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/cronslot"
	"github.com/effectivelabs/durable/store"
)

// scheduler returns s as a store.Scheduler, skipping the test for a store
// without schedules.
func scheduler(t *testing.T, s store.Store) store.Scheduler {
	t.Helper()
	sc, ok := s.(store.Scheduler)
	if !ok {
		t.Skip("store has no schedules")
	}
	return sc
}

func newSchedule(tenant, name, expr string) *store.CreateScheduleParams {
	return &store.CreateScheduleParams{
		Now: T0, ID: uuid.New(), Tenant: tenant, Name: name, Workflow: "wf",
		Input: []byte(`{"in":1}`), Cron: expr, Shape: shape(step("a")),
	}
}

func fireAt(t *testing.T, s store.Scheduler, now time.Time) *store.FireSchedulesResult {
	t.Helper()
	res, err := s.FireSchedules(ctx, &store.FireSchedulesParams{Now: now, Limit: 100})
	require.NoError(t, err)
	return res
}

func testScheduleCreate(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	p := newSchedule("t1", "every-5", "*/5 * * * *")
	p.TimeZone = "Europe/Paris"
	sc, err := s.CreateSchedule(ctx, p)
	require.NoError(t, err)
	// T0 is 03:04:05 UTC: the next slot is 03:05.
	require.Equal(t, T0.Truncate(time.Hour).Add(5*time.Minute), sc.NextAt.UTC())
	require.Equal(t, p.ID, sc.ID)
	require.Equal(t, "Europe/Paris", sc.TimeZone)
	require.False(t, sc.Paused)

	got, err := s.GetSchedule(ctx, &store.GetScheduleParams{Key: durabletype.ScheduleKey{Tenant: "t1", Name: "every-5"}})
	require.NoError(t, err)
	require.Equal(t, sc.ID, got.ID)
	require.Equal(t, "*/5 * * * *", got.Cron)
	require.JSONEq(t, `{"in":1}`, string(got.Input))
	require.Equal(t, "wf", got.Workflow)
	require.Equal(t, p.Shape.Steps[0].Name, got.Shape.Steps[0].Name)
	require.True(t, sc.NextAt.Equal(got.NextAt))

	_, err = s.CreateSchedule(ctx, newSchedule("t1", "every-5", "* * * * *"))
	require.ErrorIs(t, err, durabletype.ErrScheduleExists)
	_, err = s.GetSchedule(ctx, &store.GetScheduleParams{Key: durabletype.ScheduleKey{Tenant: "t2", Name: "every-5"}})
	require.ErrorIs(t, err, durabletype.ErrScheduleNotFound)

	for _, bad := range []*store.CreateScheduleParams{
		newSchedule("t1", "bad-cron", "* * *"),
		newSchedule("t1", "every", "@every 1m"),
		func() *store.CreateScheduleParams {
			p := newSchedule("t1", "bad-zone", "* * * * *")
			p.TimeZone = "Nowhere/Else"
			return p
		}(),
		newSchedule("t1", "", "* * * * *"),
		func() *store.CreateScheduleParams {
			p := newSchedule("t1", "bad-wf", "* * * * *")
			p.Workflow = ""
			return p
		}(),
		func() *store.CreateScheduleParams {
			p := newSchedule("t1", "no-shape", "* * * * *")
			p.Shape = nil
			return p
		}(),
	} {
		_, err := s.CreateSchedule(ctx, bad)
		require.ErrorIs(t, err, durabletype.ErrInvalidSchedule, "%+v", bad)
	}
	_, err = s.CreateSchedule(ctx, newSchedule("bad\x00tenant", "x", "* * * * *"))
	require.ErrorIs(t, err, durabletype.ErrInvalidTenant)

	// Lists: by tenant and name, paged, filtered by tenant.
	for _, k := range []durabletype.ScheduleKey{{Tenant: "t2", Name: "a"}, {Tenant: "t1", Name: "b"}, {Tenant: "t1", Name: "a"}} {
		_, err := s.CreateSchedule(ctx, newSchedule(k.Tenant, k.Name, "@daily"))
		require.NoError(t, err)
	}
	var keys []durabletype.ScheduleKey
	var after *durabletype.ScheduleKey
	for {
		page, err := s.ListSchedules(ctx, &store.ListSchedulesParams{After: after, Limit: 2})
		require.NoError(t, err)
		for _, sc := range page.Schedules {
			keys = append(keys, durabletype.ScheduleKey{Tenant: sc.Tenant, Name: sc.Name})
		}
		if !page.More {
			break
		}
		after = &keys[len(keys)-1]
	}
	require.Equal(t, []durabletype.ScheduleKey{{Tenant: "t1", Name: "a"}, {Tenant: "t1", Name: "b"}, {Tenant: "t1", Name: "every-5"}, {Tenant: "t2", Name: "a"}}, keys)
	page, err := s.ListSchedules(ctx, &store.ListSchedulesParams{Tenant: "t2", Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Schedules, 1)
	require.False(t, page.More)
}

func testScheduleFire(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	sc, err := s.CreateSchedule(ctx, newSchedule("t1", "five", "*/5 * * * *"))
	require.NoError(t, err)
	slot := T0.Truncate(time.Hour).Add(5 * time.Minute) // 03:05

	res := fireAt(t, s, slot.Add(-time.Second))
	require.Empty(t, res.Fired)
	require.True(t, res.HasNext)
	require.Equal(t, time.Second, res.Next)

	res = fireAt(t, s, slot)
	require.Len(t, res.Fired, 1)
	f := res.Fired[0]
	require.Equal(t, sc.ID, f.Schedule)
	require.True(t, slot.Equal(f.Slot))
	require.Equal(t, cronslot.RunID(sc.ID, slot), f.RunID)
	require.Equal(t, 0, f.Missed)
	require.Equal(t, 5*time.Minute, res.Next)

	run, err := st.GetRun(ctx, f.RunID)
	require.NoError(t, err)
	require.Equal(t, "wf", run.Workflow)
	require.Equal(t, "t1", run.Tenant)
	require.JSONEq(t, `{"in":1}`, string(run.Input))
	require.Equal(t, durabletype.RunRunning, run.Status)
	c := claimOne(t, st, slot.Add(time.Second))
	require.Equal(t, f.RunID, c.RunID)

	// The same instant again fires nothing.
	require.Empty(t, fireAt(t, s, slot).Fired)

	// Three hours late: one run, of the latest due slot.
	late := slot.Add(3*time.Hour + 2*time.Minute)
	res = fireAt(t, s, late)
	require.Len(t, res.Fired, 1)
	require.True(t, slot.Add(3*time.Hour).Equal(res.Fired[0].Slot))
	require.Equal(t, 35, res.Fired[0].Missed)
	require.Equal(t, 3*time.Minute, res.Next)
	got, err := s.GetSchedule(ctx, &store.GetScheduleParams{Key: durabletype.ScheduleKey{Tenant: "t1", Name: "five"}})
	require.NoError(t, err)
	require.True(t, slot.Add(3*time.Hour+5*time.Minute).Equal(got.NextAt))
	require.True(t, slot.Add(3*time.Hour).Equal(got.LastSlot))
	require.Equal(t, res.Fired[0].RunID, got.LastRunID)

	list, err := st.ListRuns(ctx, &store.ListRunsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list.Runs, 2)
}

func testScheduleFireExistingRun(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	sc, err := s.CreateSchedule(ctx, newSchedule("t1", "five", "*/5 * * * *"))
	require.NoError(t, err)
	slot := T0.Truncate(time.Hour).Add(5 * time.Minute)
	// The slot's run exists already (an attempt that created it, whose
	// schedule update was lost): firing finds it and creates nothing.
	nr := newRun("wf", "t1", shape(step("a")))
	nr.ID = cronslot.RunID(sc.ID, slot)
	create(t, st, slot, nr)
	res := fireAt(t, s, slot)
	require.Len(t, res.Fired, 1)
	require.Equal(t, nr.ID, res.Fired[0].RunID)
	list, err := st.ListRuns(ctx, &store.ListRunsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list.Runs, 1)
	require.Empty(t, fireAt(t, s, slot.Add(time.Minute)).Fired)
}

func testSchedulePause(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	key := durabletype.ScheduleKey{Tenant: "t1", Name: "five"}
	_, err := s.CreateSchedule(ctx, newSchedule(key.Tenant, key.Name, "*/5 * * * *"))
	require.NoError(t, err)
	slot := T0.Truncate(time.Hour).Add(5 * time.Minute)

	sc, err := s.PauseSchedule(ctx, &store.PauseScheduleParams{Now: T0, Key: key, Paused: true})
	require.NoError(t, err)
	require.True(t, sc.Paused)
	require.True(t, sc.NextAt.IsZero())
	res := fireAt(t, s, slot.Add(time.Hour))
	require.Empty(t, res.Fired)
	require.False(t, res.HasNext)

	// Resumed at 04:07:30: the slots passed while paused are skipped.
	resumeAt := slot.Add(time.Hour + 2*time.Minute + 30*time.Second)
	sc, err = s.PauseSchedule(ctx, &store.PauseScheduleParams{Now: resumeAt, Key: key, Paused: false})
	require.NoError(t, err)
	require.False(t, sc.Paused)
	require.True(t, slot.Add(time.Hour+5*time.Minute).Equal(sc.NextAt))
	require.Empty(t, fireAt(t, s, resumeAt).Fired)
	res = fireAt(t, s, sc.NextAt)
	require.Len(t, res.Fired, 1)
	require.Equal(t, 0, res.Fired[0].Missed)

	// Resuming a running schedule changes nothing.
	again, err := s.PauseSchedule(ctx, &store.PauseScheduleParams{Now: resumeAt.Add(time.Hour), Key: key, Paused: false})
	require.NoError(t, err)
	require.True(t, slot.Add(time.Hour+10*time.Minute).Equal(again.NextAt))

	_, err = s.PauseSchedule(ctx, &store.PauseScheduleParams{Now: T0, Key: durabletype.ScheduleKey{Tenant: "t1", Name: "nope"}, Paused: true})
	require.ErrorIs(t, err, durabletype.ErrScheduleNotFound)

	// Created paused: nothing due until resumed.
	p := newSchedule("t1", "paused", "* * * * *")
	p.Paused = true
	sc, err = s.CreateSchedule(ctx, p)
	require.NoError(t, err)
	require.True(t, sc.Paused)
	require.True(t, sc.NextAt.IsZero())
}

func testScheduleDelete(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	key := durabletype.ScheduleKey{Tenant: "t1", Name: "five"}
	_, err := s.CreateSchedule(ctx, newSchedule(key.Tenant, key.Name, "*/5 * * * *"))
	require.NoError(t, err)
	require.NoError(t, s.DeleteSchedule(ctx, &store.DeleteScheduleParams{Key: key}))
	require.ErrorIs(t, s.DeleteSchedule(ctx, &store.DeleteScheduleParams{Key: key}), durabletype.ErrScheduleNotFound)
	_, err = s.GetSchedule(ctx, &store.GetScheduleParams{Key: key})
	require.ErrorIs(t, err, durabletype.ErrScheduleNotFound)
	res := fireAt(t, s, T0.Add(time.Hour))
	require.Empty(t, res.Fired)
	require.False(t, res.HasNext)
	// The name is free again.
	_, err = s.CreateSchedule(ctx, newSchedule(key.Tenant, key.Name, "*/5 * * * *"))
	require.NoError(t, err)
}

// testScheduleConcurrentFire: callers firing at once fire each slot once.
func testScheduleConcurrentFire(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	const n = 20
	for i := range n {
		_, err := s.CreateSchedule(ctx, newSchedule("t1", string(rune('a'+i)), "*/5 * * * *"))
		require.NoError(t, err)
	}
	slot := T0.Truncate(time.Hour).Add(5 * time.Minute)
	var mu sync.Mutex
	fired := map[uuid.UUID]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				res, err := s.FireSchedules(ctx, &store.FireSchedulesParams{Now: slot, Limit: 3})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, f := range res.Fired {
					fired[f.RunID]++
				}
				mu.Unlock()
				if len(res.Fired) == 0 && !res.More {
					return
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, fired, n)
	for id, c := range fired {
		require.Equal(t, 1, c, "run %s", id)
	}
	list, err := st.ListRuns(ctx, &store.ListRunsParams{Limit: 100})
	require.NoError(t, err)
	require.Len(t, list.Runs, n)
}

// testScheduleShapes: the caller's current shape of a workflow wins over
// the one recorded with the schedule.
func testScheduleShapes(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	_, err := s.CreateSchedule(ctx, newSchedule("t1", "five", "*/5 * * * *"))
	require.NoError(t, err)
	slot := T0.Truncate(time.Hour).Add(5 * time.Minute)
	res, err := s.FireSchedules(ctx, &store.FireSchedulesParams{
		Now: slot, Limit: 10, Shapes: map[string]*durabletype.Shape{"wf": shape(step("a"), step("b", "a"))},
	})
	require.NoError(t, err)
	require.Len(t, res.Fired, 1)
	tasks, err := st.ListTasks(ctx, res.Fired[0].RunID)
	require.NoError(t, err)
	require.Len(t, tasks, 2)
}
