package durable_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

// firedLog wraps a store and records every slot its FireSchedules fired.
type firedLog struct {
	*memstore.Store
	mu    sync.Mutex
	fired []store.FiredSlot
}

func (f *firedLog) FireSchedules(ctx context.Context, p *store.FireSchedulesParams) (*store.FireSchedulesResult, error) {
	res, err := f.Store.FireSchedules(ctx, p)
	if err == nil {
		f.mu.Lock()
		f.fired = append(f.fired, res.Fired...)
		f.mu.Unlock()
	}
	return res, err
}

// noClaims wraps a store whose tasks are never claimed: the year test
// measures firing, not executing (covered by the other tests).
type noClaims struct{ *firedLog }

func (noClaims) ClaimTasks(context.Context, *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	return nil, nil
}

func (f *firedLog) slots() []store.FiredSlot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.FiredSlot(nil), f.fired...)
}

// quietConfig keeps the engine's other periodic work rare, so that a year
// of virtual time is mostly the schedule's.
func quietConfig() durable.Config {
	return durable.Config{
		PollInterval: time.Hour, MaxPollInterval: time.Hour,
		HeartbeatInterval: time.Hour, DeadAfter: 24 * time.Hour,
		Retention: durable.KeepForever,
	}
}

// scheduled returns a workflow for schedules, counting its executions, and
// a client engine on s that registers it.
func scheduled(t *testing.T, s store.Store, runs *atomic.Int64) (*durable.Workflow[int], *durable.Engine) {
	wf := durable.NewWorkflow[int]("tick")
	durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
		runs.Add(1)
		return in, nil
	})
	client, err := durable.New(s, durable.Config{WorkerID: "client"})
	require.NoError(t, err)
	require.NoError(t, client.Register(wf))
	return wf, client
}

// requireEvery checks that slots are every step apart, each once, none
// missed, each fired exactly at its time.
func requireEvery(t *testing.T, fired []store.FiredSlot, step time.Duration) {
	t.Helper()
	seen := map[uuid.UUID]bool{}
	for i, f := range fired {
		require.False(t, seen[f.RunID], "slot %s fired twice", f.Slot)
		seen[f.RunID] = true
		require.Zero(t, f.Missed)
		require.True(t, f.At.Equal(f.Slot), "slot %s fired at %s", f.Slot, f.At)
		if i > 0 {
			require.Equal(t, step, f.Slot.Sub(fired[i-1].Slot), "after slot %s", fired[i-1].Slot)
		}
	}
}

// TestScheduleYearVirtualTime: a year of "*/5 * * * *" on the real engine in
// virtual time fires 365×24×12 = 105,120 slots, each once and on time, and
// each slot's run is created (queued: nothing claims in this test).
func TestScheduleYearVirtualTime(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// Start in 2001, a year of 365 days.
		time.Sleep(time.Until(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)))
		s := &firedLog{Store: memstore.New()}
		var runs atomic.Int64
		wf, client := scheduled(t, s, &runs)
		ctx := context.Background()
		leader, err := durable.New(noClaims{s}, quietConfig())
		require.NoError(t, err)
		require.NoError(t, leader.Register(wf))
		require.NoError(t, leader.Start(ctx))

		start := time.Now()
		sc, err := wf.Schedule(ctx, client, "t1", "every-5", 7, "*/5 * * * *", durable.ScheduleOptions{TimeZone: "Europe/Paris"})
		require.NoError(t, err)
		require.True(t, sc.NextAt.After(start))
		year := sc.NextAt.AddDate(1, 0, 0)
		time.Sleep(year.Sub(start) - time.Second) // the last slot is just before year
		synctest.Wait()
		require.NoError(t, leader.Stop(ctx))

		fired := s.slots()
		require.Len(t, fired, 365*24*12)
		require.True(t, fired[0].Slot.Equal(sc.NextAt))
		requireEvery(t, fired, 5*time.Minute)

		st, err := client.Stats(ctx, durable.StatsOptions{})
		require.NoError(t, err)
		require.Len(t, st.Queues, 1)
		require.Equal(t, 365*24*12, st.Queues[0].Ready, "every slot's run is queued")
	})
}

// TestScheduleMisfire: with no engine running for three hours, the next
// engine fires one run for the latest missed slot, then the regular ones.
func TestScheduleMisfire(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &firedLog{Store: memstore.New()}
		var runs atomic.Int64
		wf, client := scheduled(t, s, &runs)
		ctx := context.Background()
		start := func() *durable.Engine {
			e, err := durable.New(s, quietConfig())
			require.NoError(t, err)
			require.NoError(t, e.Register(wf))
			require.NoError(t, e.Start(ctx))
			return e
		}
		sc, err := wf.Schedule(ctx, client, "t1", "five", 1, "*/5 * * * *", durable.ScheduleOptions{})
		require.NoError(t, err)
		e := start()
		time.Sleep(time.Until(sc.NextAt.Add(time.Hour + time.Minute))) // 13 slots
		synctest.Wait()
		require.NoError(t, e.Stop(ctx))
		before := s.slots()
		require.Len(t, before, 13)
		requireEvery(t, before, 5*time.Minute)

		time.Sleep(3 * time.Hour) // nothing runs: 36 slots pass
		restart := time.Now()
		e = start()
		time.Sleep(time.Until(restart.Add(time.Hour - time.Second)))
		synctest.Wait()
		require.NoError(t, e.Stop(ctx))

		after := s.slots()[len(before):]
		catchUp := after[0]
		require.Equal(t, 35, catchUp.Missed, "the missed slots are skipped")
		require.True(t, catchUp.Slot.Equal(restart.Truncate(5*time.Minute)), "the latest missed slot fires: %s", catchUp.Slot)
		require.True(t, catchUp.At.Equal(restart), "at once")
		requireEvery(t, after[1:], 5*time.Minute)
		require.Len(t, after[1:], 12)
		require.True(t, after[1].Slot.Equal(catchUp.Slot.Add(5*time.Minute)))
		require.Equal(t, int64(13+1+12), runs.Load(), "each fired run executed once")
	})
}

// TestScheduleAPI: create, list, pause, resume and delete through the
// engine, with the errors of bad input.
func TestScheduleAPI(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		var runs atomic.Int64
		wf, e := scheduled(t, s, &runs)
		ctx := context.Background()

		_, err := wf.Schedule(ctx, e, "t1", "bad", 1, "not cron", durable.ScheduleOptions{})
		require.ErrorIs(t, err, durabletype.ErrInvalidSchedule)
		_, err = wf.Schedule(ctx, e, "t1", "bad", 1, "* * * * *", durable.ScheduleOptions{TimeZone: "Moon/Base"})
		require.ErrorIs(t, err, durabletype.ErrInvalidSchedule)
		_, err = wf.Schedule(ctx, e, "", "bad", 1, "* * * * *", durable.ScheduleOptions{})
		require.ErrorIs(t, err, durabletype.ErrInvalidTenant)
		_, err = e.CreateSchedule(ctx, durable.ScheduleSpec{Tenant: "t1", Name: "x", Workflow: "nope", Input: []byte("1"), Cron: "@daily"})
		require.ErrorIs(t, err, durable.ErrWorkflowNotRegistered)
		_, err = e.CreateSchedule(ctx, durable.ScheduleSpec{Tenant: "t1", Name: "x", Workflow: "tick", Input: []byte(`"text"`), Cron: "@daily"})
		require.ErrorIs(t, err, durabletype.ErrInvalidSchedule)

		sc, err := e.CreateSchedule(ctx, durable.ScheduleSpec{Tenant: "t1", Name: "daily", Workflow: "tick", Input: []byte("5"), Cron: "@daily", TimeZone: "Asia/Tokyo"})
		require.NoError(t, err)
		require.Equal(t, 15, sc.NextAt.UTC().Hour(), "midnight in Tokyo")
		_, err = wf.Schedule(ctx, e, "t1", "daily", 1, "@hourly", durable.ScheduleOptions{})
		require.ErrorIs(t, err, durabletype.ErrScheduleExists)
		_, err = wf.Schedule(ctx, e, "t2", "daily", 1, "@hourly", durable.ScheduleOptions{Paused: true})
		require.NoError(t, err, "names are per tenant")

		page, err := e.ListSchedules(ctx, durable.ScheduleListOptions{})
		require.NoError(t, err)
		require.Len(t, page.Schedules, 2)
		page, err = e.ListSchedules(ctx, durable.ScheduleListOptions{Tenant: "t2"})
		require.NoError(t, err)
		require.Len(t, page.Schedules, 1)
		require.True(t, page.Schedules[0].Paused)

		p, err := e.PauseSchedule(ctx, "t1", "daily")
		require.NoError(t, err)
		require.True(t, p.Paused)
		r, err := e.ResumeSchedule(ctx, "t1", "daily")
		require.NoError(t, err)
		require.False(t, r.Paused)
		require.True(t, r.NextAt.Equal(sc.NextAt))
		require.NoError(t, e.DeleteSchedule(ctx, "t1", "daily"))
		require.ErrorIs(t, e.DeleteSchedule(ctx, "t1", "daily"), durabletype.ErrScheduleNotFound)
		_, err = e.GetSchedule(ctx, "t1", "daily")
		require.ErrorIs(t, err, durabletype.ErrScheduleNotFound)
		_, err = e.PauseSchedule(ctx, "t9", "daily")
		require.ErrorIs(t, err, durabletype.ErrScheduleNotFound)

		// A tenant's view: its own schedules, never another's.
		t2 := e.Tenant("t2")
		page, err = t2.ListSchedules(ctx, durable.ScheduleListOptions{Tenant: "t1"})
		require.NoError(t, err)
		require.Len(t, page.Schedules, 1, "the options' tenant does not widen the scope")
		require.Equal(t, "t2", page.Schedules[0].Tenant)
		_, err = t2.ListSchedules(ctx, durable.ScheduleListOptions{After: &durabletype.ScheduleKey{Tenant: "t1", Name: "a"}})
		require.ErrorIs(t, err, durable.ErrInvalidCursor)
		got, err := t2.ResumeSchedule(ctx, "daily")
		require.NoError(t, err)
		require.False(t, got.Paused)
		_, err = e.Tenant("t1").GetSchedule(ctx, "daily")
		require.ErrorIs(t, err, durabletype.ErrScheduleNotFound, "deleted above")
		for _, none := range []*durable.TenantRuns{e.Tenant(""), e.Tenant("t1")} {
			_, err = none.PauseSchedule(ctx, "daily")
			require.ErrorIs(t, err, durabletype.ErrScheduleNotFound)
			require.ErrorIs(t, none.DeleteSchedule(ctx, "daily"), durabletype.ErrScheduleNotFound)
		}
		page, err = e.Tenant("").ListSchedules(ctx, durable.ScheduleListOptions{})
		require.NoError(t, err)
		require.Empty(t, page.Schedules, "the empty tenant finds nothing")
		require.NoError(t, t2.DeleteSchedule(ctx, "daily"))
	})
}
