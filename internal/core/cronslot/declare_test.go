package cronslot

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

var declShape = &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "a", Retry: durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1}}}}

func decl(name, cron string) store.DeclaredSchedule {
	return store.DeclaredSchedule{ID: uuid.New(), Tenant: "t", Name: name, Workflow: "wf", Input: []byte(`1`),
		Cron: cron, Shape: declShape}
}

func declParams(ds ...store.DeclaredSchedule) *store.DeclareSchedulesParams {
	return &store.DeclareSchedulesParams{Workflows: []string{"wf"}, Schedules: ds}
}

// stored is the row a DeclareCreate decision writes.
func stored(t *testing.T, d store.DeclaredSchedule, at time.Time) *durabletype.Schedule {
	t.Helper()
	res, err := Declare(declParams(d), nil, at)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, DeclareCreate, res[0].Action)
	return res[0].Row
}

func TestDeclareCreateAndKeep(t *testing.T) {
	t.Parallel()
	d := decl("hourly", "0 * * * *")
	row := stored(t, d, t0.Add(90*time.Minute))
	require.Equal(t, d.ID, row.ID)
	require.True(t, row.Declared)
	require.False(t, row.Paused)
	require.Equal(t, t0.Add(2*time.Hour), row.NextAt, "the first slot after now")

	// The same declaration later, with another ID (each engine proposes
	// one): nothing to write, whatever the time.
	row.LastSlot = t0.Add(2 * time.Hour)
	row.NextAt = t0.Add(3 * time.Hour)
	again := decl("hourly", "0 * * * *")
	res, err := Declare(declParams(again), []*durabletype.Schedule{row}, t0.Add(150*time.Minute))
	require.NoError(t, err)
	require.Equal(t, []Declaration{{Key: durabletype.ScheduleKey{Tenant: "t", Name: "hourly"}, Action: DeclareKeep}}, res)

	// Declared paused: created paused, with no next slot.
	p := decl("paused", "0 * * * *")
	p.Paused = true
	row = stored(t, p, t0)
	require.True(t, row.Paused)
	require.True(t, row.DeclaredPaused)
	require.True(t, row.NextAt.IsZero())
}

func TestDeclareUpdate(t *testing.T) {
	t.Parallel()
	base := stored(t, decl("s", "0 * * * *"), t0) // next 01:00
	base.LastSlot, base.LastRunID, base.NextAt = t0.Add(time.Hour), uuid.New(), t0.Add(2*time.Hour)
	now := t0.Add(90 * time.Minute)
	for _, tc := range []struct {
		name   string
		change func(d *store.DeclaredSchedule, cur *durabletype.Schedule)
		want   func(row *durabletype.Schedule)
		wake   bool
	}{
		{"cron: next slot from now", func(d *store.DeclaredSchedule, _ *durabletype.Schedule) { d.Cron = "*/20 * * * *" },
			func(row *durabletype.Schedule) {
				require.Equal(t, "*/20 * * * *", row.Cron)
				require.Equal(t, t0.Add(100*time.Minute), row.NextAt)
			}, true},
		{"zone: next slot from now", func(d *store.DeclaredSchedule, _ *durabletype.Schedule) { d.TimeZone = "Asia/Kolkata" },
			func(row *durabletype.Schedule) {
				// 01:30 UTC is 07:00 in Kolkata (UTC+5:30): the next whole
				// local hour is 08:00, 02:30 UTC.
				require.Equal(t, t0.Add(150*time.Minute), row.NextAt)
			}, true},
		{"input: the slot waited for stays", func(d *store.DeclaredSchedule, _ *durabletype.Schedule) { d.Input = []byte(`2`) },
			func(row *durabletype.Schedule) {
				require.Equal(t, []byte(`2`), row.Input)
				require.Equal(t, t0.Add(2*time.Hour), row.NextAt)
			}, false},
		{"paused as declared", func(d *store.DeclaredSchedule, _ *durabletype.Schedule) { d.Paused = true },
			func(row *durabletype.Schedule) {
				require.True(t, row.Paused)
				require.True(t, row.DeclaredPaused)
				require.True(t, row.NextAt.IsZero())
			}, false},
		{"an operator's pause holds while the declaration is the same", func(_ *store.DeclaredSchedule, cur *durabletype.Schedule) {
			cur.Paused, cur.NextAt = true, time.Time{}
		}, nil, false},
		{"a changed declaration overrides an operator's pause", func(d *store.DeclaredSchedule, cur *durabletype.Schedule) {
			cur.Paused, cur.NextAt = true, time.Time{}
			d.Input = []byte(`3`)
		}, func(row *durabletype.Schedule) {
			require.False(t, row.Paused)
			require.Equal(t, t0.Add(2*time.Hour), row.NextAt, "resumed from now")
		}, true},
		{"a changed declaration repairs a broken schedule", func(d *store.DeclaredSchedule, cur *durabletype.Schedule) {
			cur.NextAt, cur.Error = time.Time{}, "boom"
			d.Input = []byte(`4`)
		}, func(row *durabletype.Schedule) {
			require.Empty(t, row.Error)
			require.Equal(t, t0.Add(2*time.Hour), row.NextAt)
		}, true},
		{"shape alone: the shape only", func(d *store.DeclaredSchedule, cur *durabletype.Schedule) {
			d.Shape = &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "b", Retry: durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1}}}}
			cur.Paused, cur.NextAt = true, time.Time{} // an operator's pause holds
		}, func(row *durabletype.Schedule) {
			require.Equal(t, "b", row.Shape.Steps[0].Name)
			require.True(t, row.Paused)
			require.True(t, row.NextAt.IsZero())
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := *base
			d := decl("s", "0 * * * *")
			tc.change(&d, &cur)
			res, err := Declare(declParams(d), []*durabletype.Schedule{&cur}, now)
			require.NoError(t, err)
			require.Len(t, res, 1)
			if tc.want == nil {
				require.Equal(t, DeclareKeep, res[0].Action)
				return
			}
			require.Equal(t, DeclareUpdate, res[0].Action)
			require.Equal(t, tc.wake, res[0].Wake)
			row := res[0].Row
			require.Equal(t, base.ID, row.ID, "the schedule keeps its ID")
			require.Equal(t, base.LastSlot, row.LastSlot, "and its last slot")
			require.Equal(t, base.LastRunID, row.LastRunID)
			require.Equal(t, base.CreatedAt, row.CreatedAt)
			require.Equal(t, now, row.UpdatedAt)
			tc.want(row)
		})
	}
}

func TestDeclareDelete(t *testing.T) {
	t.Parallel()
	gone := stored(t, decl("gone", "0 * * * *"), t0)
	kept := stored(t, decl("kept", "0 * * * *"), t0)
	other := stored(t, decl("other-wf", "0 * * * *"), t0)
	other.Workflow = "another"
	api := &durabletype.Schedule{ID: uuid.New(), Tenant: "t", Name: "api", Workflow: "wf", Cron: "0 * * * *", Shape: declShape}
	all := []*durabletype.Schedule{gone, kept, other, api}
	res, err := Declare(declParams(decl("kept", "0 * * * *")), all, t0)
	require.NoError(t, err)
	require.Equal(t, []Declaration{
		{Key: durabletype.ScheduleKey{Tenant: "t", Name: "kept"}, Action: DeclareKeep},
		{Key: durabletype.ScheduleKey{Tenant: "t", Name: "gone"}, Action: DeclareDelete},
	}, res, "a workflow out of scope and a schedule made through the API are not touched")

	require.True(t, Loads(declParams(), gone))
	require.False(t, Loads(declParams(), other))
	require.False(t, Loads(declParams(), api))
	require.True(t, Loads(declParams(decl("api", "* * * * *")), api))
}

func TestDeclareInvalid(t *testing.T) {
	t.Parallel()
	api := &durabletype.Schedule{ID: uuid.New(), Tenant: "t", Name: "api", Workflow: "wf", Cron: "0 * * * *", Shape: declShape}
	badCron := decl("bad", "* * *")
	badZone := decl("zone", "* * * * *")
	badZone.TimeZone = "Nowhere/Else"
	otherWf := decl("elsewhere", "* * * * *")
	otherWf.Workflow = "nope"
	badTenant := decl("tenant", "* * * * *")
	badTenant.Tenant = ""
	for name, tc := range map[string]struct {
		ds   []store.DeclaredSchedule
		want error
	}{
		"cron":        {[]store.DeclaredSchedule{decl("ok", "* * * * *"), badCron}, durabletype.ErrInvalidSchedule},
		"zone":        {[]store.DeclaredSchedule{badZone}, durabletype.ErrInvalidSchedule},
		"twice":       {[]store.DeclaredSchedule{decl("x", "* * * * *"), decl("x", "0 * * * *")}, durabletype.ErrInvalidSchedule},
		"workflow":    {[]store.DeclaredSchedule{otherWf}, durabletype.ErrInvalidSchedule},
		"tenant":      {[]store.DeclaredSchedule{badTenant}, durabletype.ErrInvalidTenant},
		"through API": {[]store.DeclaredSchedule{decl("api", "* * * * *")}, durabletype.ErrScheduleExists},
	} {
		res, err := Declare(declParams(tc.ds...), []*durabletype.Schedule{api}, t0)
		require.ErrorIs(t, err, tc.want, name)
		require.Nil(t, res, name)
	}
	_, err := Declare(declParams(badCron), nil, t0)
	require.ErrorContains(t, err, `declared schedule "bad" of tenant "t"`, "the error names the schedule")
}

// TestRunIDSortsBySlot: a slot's run ID is the same for the same schedule
// and slot, differs otherwise, and is a UUIDv7 of the slot's time, so that
// fired runs sort by time.
func TestRunIDSortsBySlot(t *testing.T) {
	t.Parallel()
	sc, slot := uuid.New(), time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	id := RunID(sc, slot)
	require.Equal(t, id, RunID(sc, slot))
	require.NotEqual(t, id, RunID(uuid.New(), slot))
	next := RunID(sc, slot.Add(time.Minute))
	require.NotEqual(t, id, next)
	require.Equal(t, uuid.Version(7), id.Version())
	sec, nsec := id.Time().UnixTime()
	require.Equal(t, slot, time.Unix(sec, nsec).UTC())
	require.Less(t, id.String(), next.String())
}
