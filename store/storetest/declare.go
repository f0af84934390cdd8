package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// declarer returns s as a store.ScheduleDeclarer, skipping the test for a
// store without declared schedules.
func declarer(t *testing.T, s store.Store) store.ScheduleDeclarer {
	t.Helper()
	d, ok := s.(store.ScheduleDeclarer)
	if !ok {
		t.Skip("store has no declared schedules")
	}
	return d
}

func declaration(name, wf, expr string) store.DeclaredSchedule {
	return store.DeclaredSchedule{ID: uuid.New(), Tenant: "t1", Name: name, Workflow: wf,
		Input: []byte(`{"in":1}`), Cron: expr, Shape: shape(step("a"))}
}

func declare(t *testing.T, s store.ScheduleDeclarer, now time.Time, workflows []string, ds ...store.DeclaredSchedule) *store.DeclareSchedulesResult {
	t.Helper()
	res, err := s.DeclareSchedules(ctx, &store.DeclareSchedulesParams{Now: now, Workflows: workflows, Schedules: ds})
	require.NoError(t, err)
	return res
}

func key(name string) durabletype.ScheduleKey {
	return durabletype.ScheduleKey{Tenant: "t1", Name: name}
}

func getSchedule(t *testing.T, s store.Scheduler, name string) *durabletype.Schedule {
	t.Helper()
	sc, err := s.GetSchedule(ctx, &store.GetScheduleParams{Key: key(name)})
	require.NoError(t, err)
	return sc
}

// requireSameSchedule fails unless two reads of a schedule are equal
// (nothing was written in between).
func requireSameSchedule(t *testing.T, want, got *durabletype.Schedule) {
	t.Helper()
	require.Equal(t, want.ID, got.ID)
	require.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "updated at %s, want %s", got.UpdatedAt, want.UpdatedAt)
	require.True(t, want.NextAt.Equal(got.NextAt), "next at %s, want %s", got.NextAt, want.NextAt)
	require.True(t, want.LastSlot.Equal(got.LastSlot), "last slot %s, want %s", got.LastSlot, want.LastSlot)
	require.Equal(t, want.LastRunID, got.LastRunID)
	require.Equal(t, want.Paused, got.Paused)
	require.Equal(t, want.Cron, got.Cron)
	require.Equal(t, want.Input, got.Input)
	require.Equal(t, want.Declared, got.Declared)
	require.Equal(t, want.DeclaredPaused, got.DeclaredPaused)
}

// testDeclareSchedules: declarations create schedules, write nothing when
// declared again unchanged (whatever their IDs), update what changed
// (keeping the schedule's ID and last slot), and delete the declared
// schedules of the workflows in scope that are no longer declared. A
// schedule created through the API, and the declared schedules of other
// workflows, are never touched.
func testDeclareSchedules(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	d := declarer(t, st)
	_, err := s.CreateSchedule(ctx, newSchedule("t1", "api", "*/5 * * * *"))
	require.NoError(t, err)
	other := declare(t, d, T0, []string{"wf2"}, declaration("other", "wf2", "0 * * * *"))
	require.Equal(t, []durabletype.ScheduleKey{key("other")}, other.Created)

	a, b := declaration("a", "wf", "*/5 * * * *"), declaration("b", "wf", "0 * * * *")
	res := declare(t, d, T0, []string{"wf"}, a, b)
	require.Equal(t, []durabletype.ScheduleKey{key("a"), key("b")}, res.Created)
	require.Empty(t, res.Updated)
	require.Empty(t, res.Deleted)
	got := getSchedule(t, s, "a")
	require.Equal(t, a.ID, got.ID)
	require.True(t, got.Declared)
	require.False(t, got.Paused)
	require.Equal(t, T0.Truncate(time.Hour).Add(5*time.Minute), got.NextAt.UTC(), "T0 is 03:04:05: the first slot is 03:05")
	require.False(t, getSchedule(t, s, "api").Declared)

	// a fires its 03:05 slot.
	fired := fireAt(t, s, at(time.Minute))
	require.Len(t, fired.Fired, 2) // a and api
	afterFire := getSchedule(t, s, "a")
	require.False(t, afterFire.LastSlot.IsZero())

	// Declared again unchanged, by another engine (other IDs): nothing is
	// written.
	res = declare(t, d, at(10*time.Minute), []string{"wf"}, declaration("a", "wf", "*/5 * * * *"), declaration("b", "wf", "0 * * * *"))
	require.Equal(t, []durabletype.ScheduleKey{key("a"), key("b")}, res.Unchanged)
	require.Empty(t, res.Created)
	require.Empty(t, res.Updated)
	requireSameSchedule(t, afterFire, getSchedule(t, s, "a"))

	// A changed expression: the next slot from now, the last slot kept.
	now := at(11 * time.Minute) // 03:15:05
	res = declare(t, d, now, []string{"wf"}, declaration("a", "wf", "*/7 * * * *"), b)
	require.Equal(t, []durabletype.ScheduleKey{key("a")}, res.Updated)
	require.Equal(t, []durabletype.ScheduleKey{key("b")}, res.Unchanged)
	got = getSchedule(t, s, "a")
	require.Equal(t, a.ID, got.ID)
	require.Equal(t, "*/7 * * * *", got.Cron)
	require.Equal(t, T0.Truncate(time.Hour).Add(21*time.Minute), got.NextAt.UTC())
	require.True(t, afterFire.LastSlot.Equal(got.LastSlot))
	require.Equal(t, afterFire.LastRunID, got.LastRunID)

	// A declaration that names the schedule made through the API fails,
	// and the call changes nothing at all.
	_, err = d.DeclareSchedules(ctx, &store.DeclareSchedulesParams{Now: now, Workflows: []string{"wf"},
		Schedules: []store.DeclaredSchedule{declaration("a", "wf", "*/9 * * * *"), declaration("api", "wf", "* * * * *")}})
	require.ErrorIs(t, err, durabletype.ErrScheduleExists)
	require.Equal(t, "*/7 * * * *", getSchedule(t, s, "a").Cron)

	// b is no longer declared: deleted. The API's schedule and wf2's are
	// kept.
	beforeAPI := getSchedule(t, s, "api")
	res = declare(t, d, now, []string{"wf"}, declaration("a", "wf", "*/7 * * * *"))
	require.Equal(t, []durabletype.ScheduleKey{key("b")}, res.Deleted)
	_, err = s.GetSchedule(ctx, &store.GetScheduleParams{Key: key("b")})
	require.ErrorIs(t, err, durabletype.ErrScheduleNotFound)
	requireSameSchedule(t, beforeAPI, getSchedule(t, s, "api"))
	require.Equal(t, "wf2", getSchedule(t, s, "other").Workflow)

	// No declaration left for wf: its declared schedules go.
	res = declare(t, d, now, []string{"wf"})
	require.Equal(t, []durabletype.ScheduleKey{key("a")}, res.Deleted)
	list, err := s.ListSchedules(ctx, &store.ListSchedulesParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list.Schedules, 2)
	require.Equal(t, "api", list.Schedules[0].Name)
	require.Equal(t, "other", list.Schedules[1].Name)
}

// testDeclarePaused: a schedule is paused as declared whenever its
// declaration changes; an operator's pause or resume holds while the
// declaration stays the same.
func testDeclarePaused(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	d := declarer(t, st)
	wf := []string{"wf"}
	paused := declaration("p", "wf", "*/5 * * * *")
	paused.Paused = true
	require.Equal(t, []durabletype.ScheduleKey{key("p")}, declare(t, d, T0, wf, paused).Created)
	got := getSchedule(t, s, "p")
	require.True(t, got.Paused)
	require.True(t, got.DeclaredPaused)
	require.True(t, got.NextAt.IsZero())

	// An operator resumes it; the same declaration does not pause it again.
	_, err := s.PauseSchedule(ctx, &store.PauseScheduleParams{Now: at(time.Minute), Key: key("p"), Paused: false})
	require.NoError(t, err)
	resumed := getSchedule(t, s, "p")
	require.Equal(t, []durabletype.ScheduleKey{key("p")}, declare(t, d, at(2*time.Minute), wf, paused).Unchanged)
	requireSameSchedule(t, resumed, getSchedule(t, s, "p"))

	// The declaration now says running: it was, so only the declared state
	// is recorded; the slot it waited for is kept.
	running := paused
	running.Paused = false
	require.Equal(t, []durabletype.ScheduleKey{key("p")}, declare(t, d, at(3*time.Minute), wf, running).Updated)
	got = getSchedule(t, s, "p")
	require.False(t, got.Paused)
	require.False(t, got.DeclaredPaused)
	require.True(t, resumed.NextAt.Equal(got.NextAt))

	// An operator pauses it; it stays paused while the declaration is the
	// same, and is resumed from now when the declaration changes.
	_, err = s.PauseSchedule(ctx, &store.PauseScheduleParams{Now: at(4 * time.Minute), Key: key("p"), Paused: true})
	require.NoError(t, err)
	require.Equal(t, []durabletype.ScheduleKey{key("p")}, declare(t, d, at(5*time.Minute), wf, running).Unchanged)
	require.True(t, getSchedule(t, s, "p").Paused)
	changed := running
	changed.Input = []byte(`{"in":2}`)
	require.Equal(t, []durabletype.ScheduleKey{key("p")}, declare(t, d, at(20*time.Minute), wf, changed).Updated)
	got = getSchedule(t, s, "p")
	require.False(t, got.Paused)
	require.JSONEq(t, `{"in":2}`, string(got.Input))
	require.Equal(t, T0.Truncate(time.Hour).Add(25*time.Minute), got.NextAt.UTC(), "the first slot after 03:24:05")
}

// testDeclareInvalid: an invalid declaration fails the call, which then
// changes nothing.
func testDeclareInvalid(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	d := declarer(t, st)
	for name, bad := range map[string]store.DeclaredSchedule{
		"cron": declaration("bad", "wf", "* * *"),
		"zone": func() store.DeclaredSchedule {
			x := declaration("bad", "wf", "* * * * *")
			x.TimeZone = "Nowhere/Else"
			return x
		}(),
		"name":     declaration("", "wf", "* * * * *"),
		"workflow": declaration("bad", "elsewhere", "* * * * *"),
		"no shape": func() store.DeclaredSchedule { x := declaration("bad", "wf", "* * * * *"); x.Shape = nil; return x }(),
	} {
		_, err := d.DeclareSchedules(ctx, &store.DeclareSchedulesParams{Now: T0, Workflows: []string{"wf"},
			Schedules: []store.DeclaredSchedule{declaration("good", "wf", "* * * * *"), bad}})
		require.ErrorIs(t, err, durabletype.ErrInvalidSchedule, name)
	}
	_, err := d.DeclareSchedules(ctx, &store.DeclareSchedulesParams{Now: T0, Workflows: []string{"wf"},
		Schedules: []store.DeclaredSchedule{declaration("twice", "wf", "* * * * *"), declaration("twice", "wf", "0 * * * *")}})
	require.ErrorIs(t, err, durabletype.ErrInvalidSchedule, "a name declared twice")
	list, err := s.ListSchedules(ctx, &store.ListSchedulesParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list.Schedules)
}

// testDeclareConcurrent: engines starting at once declare the same
// schedules, each with IDs of its own: one creates each schedule, the
// others find it declared, and nothing fails.
func testDeclareConcurrent(t *testing.T, st store.Store) {
	s := scheduler(t, st)
	d := declarer(t, st)
	const engines = 8
	names := []string{"a", "b", "c"}
	results := make([]*store.DeclareSchedulesResult, engines)
	errs := make([]error, engines)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range engines {
		wg.Go(func() {
			var ds []store.DeclaredSchedule
			for _, n := range names {
				ds = append(ds, declaration(n, "wf", "*/5 * * * *"))
			}
			<-start
			results[i], errs[i] = d.DeclareSchedules(ctx, &store.DeclareSchedulesParams{Now: T0, Workflows: []string{"wf"}, Schedules: ds})
		})
	}
	close(start)
	wg.Wait()
	created := map[durabletype.ScheduleKey]int{}
	for i := range engines {
		require.NoError(t, errs[i])
		require.Empty(t, results[i].Updated)
		require.Empty(t, results[i].Deleted)
		require.Len(t, append(results[i].Created, results[i].Unchanged...), len(names))
		for _, k := range results[i].Created {
			created[k]++
		}
	}
	require.Equal(t, map[durabletype.ScheduleKey]int{key("a"): 1, key("b"): 1, key("c"): 1}, created)
	list, err := s.ListSchedules(ctx, &store.ListSchedulesParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list.Schedules, len(names))
}
