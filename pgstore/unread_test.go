package pgstore_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// An engine that meets a run it cannot read (its shape recorded by a newer
// release) leaves it for a newer engine: the other runs of the same call
// proceed. Each test creates a run of workflow "new" and one of "old" with
// the store of the newer engine, makes the shape of "new" one this store's
// release cannot read (a step with a field it does not know: a newer kind
// of step), and calls a second store on the same schema, the older engine.

// future makes the recorded shape of run id unreadable by this release.
func future(t *testing.T, pool *pgxpool.Pool, schema string, id uuid.UUID) {
	t.Helper()
	shapes, runs := pgx.Identifier{schema, "shapes"}.Sanitize(), pgx.Identifier{schema, "runs"}.Sanitize()
	ct, err := pool.Exec(ctx, "UPDATE "+shapes+` SET shape = jsonb_set(shape, '{steps,0,future}', '{"kind":"teleport"}')
		WHERE id = (SELECT shape_id FROM `+runs+" WHERE id = $1)", id)
	require.NoError(t, err)
	require.EqualValues(t, 1, ct.RowsAffected())
}

// olderEngine returns a second store on schema, with nothing cached,
// logging into the buffer returned.
func olderEngine(t *testing.T, pool *pgxpool.Pool, schema string) (*pgstore.Store, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	return s, &logs
}

// newAndOld creates a run of "new" and one of "old", each of one step
// made by spec, and makes the first unreadable.
func newAndOld(t *testing.T, spec func(name string) durabletype.StepSpec) (newer *pgstore.Store, older *pgstore.Store, logs *bytes.Buffer, pool *pgxpool.Pool, schema string, nr, or store.NewRun) {
	t.Helper()
	newer, pool, schema = setup(t)
	nr = newRun("new", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{spec("x")}})
	or = newRun("old", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{spec("a")}})
	require.NoError(t, created(newer.CreateRuns(ctx, &store.CreateRunsParams{Now: t0, Runs: []store.NewRun{nr, or}})))
	future(t, pool, schema, nr.ID)
	older, logs = olderEngine(t, pool, schema)
	return newer, older, logs, pool, schema, nr, or
}

func taskState(t *testing.T, s store.Store, id uuid.UUID) durabletype.TaskState {
	t.Helper()
	ts, err := s.ListTasks(ctx, id)
	require.NoError(t, err)
	return ts[0].State
}

func plain(name string) durabletype.StepSpec { return step(name) }

func TestUnreadableShapeTimers(t *testing.T) {
	t.Parallel()
	nap := func(name string) durabletype.StepSpec {
		return durabletype.StepSpec{Name: name, Sleep: time.Hour, Retry: once()}
	}
	newer, older, logs, _, _, nr, or := newAndOld(t, nap)
	require.Equal(t, durabletype.TaskSleeping, taskState(t, newer, nr.ID))

	res, err := older.FireTimers(ctx, &store.FireTimersParams{Now: t0.Add(2 * time.Hour), Limit: 1000})
	require.NoError(t, err, "a run this engine cannot read fails no timer pass")
	require.Equal(t, 1, res.Fired)
	require.Equal(t, 1, res.Left)
	require.NotEqual(t, durabletype.TaskSleeping, taskState(t, older, or.ID), "the readable run's timer fired")
	require.Equal(t, durabletype.TaskSleeping, taskState(t, older, nr.ID), "the other is left for a newer engine")
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), "run "+nr.ID.String()+" of workflow new needs a newer engine")

	// Once per shape per interval: a second pass logs nothing new.
	n := strings.Count(logs.String(), "needs a newer engine")
	_, err = older.FireTimers(ctx, &store.FireTimersParams{Now: t0.Add(2 * time.Hour), Limit: 1000})
	require.NoError(t, err)
	require.Equal(t, n, strings.Count(logs.String(), "needs a newer engine"))
}

func TestUnreadableShapeRescueAndFinish(t *testing.T) {
	t.Parallel()
	newer, older, _, _, _, nr, or := newAndOld(t, plain)
	// The newer engine claims both steps (it reads both shapes).
	cs, err := newer.ClaimTasks(ctx, &store.ClaimTasksParams{Now: t0, WorkerID: "w", Limit: 10, Workflows: []string{"new", "old"}})
	require.NoError(t, err)
	require.Len(t, cs, 2)

	// A completer batch of the older engine with outcomes of both: the
	// readable one is applied, the other is stale to it and changes nothing.
	outs := make([]store.Outcome, len(cs))
	for k, c := range cs {
		outs[k] = complete(c)
	}
	fr, err := older.FinishTasks(ctx, &store.FinishTasksParams{Now: t0.Add(time.Second), Outcomes: outs})
	require.NoError(t, err, "a run this engine cannot read fails no completer batch")
	for k, c := range cs {
		if c.RunID == nr.ID {
			require.Equal(t, store.FinishStale, fr[k].Status)
		} else {
			require.Equal(t, store.FinishApplied, fr[k].Status)
			require.Equal(t, durabletype.RunCompleted, fr[k].Settled)
		}
	}
	require.Equal(t, durabletype.TaskRunning, taskState(t, older, nr.ID))

	// A second pair, claimed by the newer engine and never heartbeated: the
	// older leader's rescue rescues the readable one only.
	n2 := newRun("new", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{plain("x")}})
	o2 := newRun("old", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{plain("a")}})
	require.NoError(t, created(newer.CreateRuns(ctx, &store.CreateRunsParams{Now: t0, Runs: []store.NewRun{n2, o2}})))
	cs, err = newer.ClaimTasks(ctx, &store.ClaimTasksParams{Now: t0, WorkerID: "w", Limit: 10, Workflows: []string{"new", "old"}})
	require.NoError(t, err)
	require.Len(t, cs, 2)
	rr, err := older.RescueTasks(ctx, &store.RescueTasksParams{Now: t0.Add(time.Hour), DeadAfter: time.Minute, Limit: 1000})
	require.NoError(t, err, "a run this engine cannot read fails no rescue pass")
	var rescued []uuid.UUID
	for _, ref := range rr.Rescued {
		rescued = append(rescued, ref.RunID)
	}
	require.ElementsMatch(t, []uuid.UUID{o2.ID}, rescued)
	require.Equal(t, durabletype.TaskRunning, taskState(t, older, n2.ID))
	require.Equal(t, durabletype.TaskRunning, taskState(t, older, nr.ID))
	_ = or
}

func TestUnreadableShapeReadsAndActions(t *testing.T) {
	t.Parallel()
	_, older, _, pool, schema, nr, or := newAndOld(t, plain)

	_, err := older.GetRun(ctx, nr.ID)
	require.ErrorIs(t, err, durabletype.ErrUnknownShape)
	var se *durabletype.ShapeError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "new", se.Workflow)
	r, err := older.GetRun(ctx, or.ID)
	require.NoError(t, err)
	require.Equal(t, "old", r.Workflow)
	list, err := older.ListRuns(ctx, &store.ListRunsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list.Runs, 2)
	_, err = older.ListTasks(ctx, nr.ID)
	require.NoError(t, err)

	// The older engine claims only what it can read, without failing the
	// claim (pinning keeps such tasks from it unless a version was set by
	// hand and kept).
	cs, err := older.ClaimTasks(ctx, &store.ClaimTasksParams{Now: t0, WorkerID: "w", Limit: 10, Workflows: []string{"new", "old"}})
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, or.ID, cs[0].RunID)

	// Messages pending for both: the readable run's are applied, the
	// other's stay pending.
	inbox := pgx.Identifier{schema, "inbox"}.Sanitize()
	for _, id := range []uuid.UUID{nr.ID, or.ID} {
		_, err := pool.Exec(ctx, "INSERT INTO "+inbox+" (run_id, kind) VALUES ($1, 'cancel')", id)
		require.NoError(t, err)
	}
	_, err = older.ApplyInbox(ctx, &store.ApplyInboxParams{Now: t0.Add(time.Second)})
	require.NoError(t, err)
	var pending []uuid.UUID
	rows, err := pool.Query(ctx, "SELECT run_id FROM "+inbox)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		require.NoError(t, rows.Scan(&id))
		pending = append(pending, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []uuid.UUID{nr.ID}, pending)
	r, err = older.GetRun(ctx, or.ID)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCancelled, r.Status)

	// An action on both: the unreadable run reports why, nothing else fails.
	n3 := newRun("old", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{plain("a")}})
	require.NoError(t, created(older.CreateRuns(ctx, &store.CreateRunsParams{Now: t0, Runs: []store.NewRun{n3}})))
	ar, err := older.ActOnRuns(ctx, &store.ActOnRunsParams{Action: durabletype.ActionCancel, IDs: []uuid.UUID{nr.ID, n3.ID}})
	require.NoError(t, err)
	require.ErrorIs(t, ar[0].Err, durabletype.ErrUnknownShape)
	require.NoError(t, ar[1].Err)
}

// TestUnreadableShapeSchedules: a due schedule whose recorded shape this
// engine cannot read, of a workflow it does not register, is left due for
// a newer engine (not fired, not broken); the other due schedule fires.
func TestUnreadableShapeSchedules(t *testing.T) {
	t.Parallel()
	newer, pool, schema := setup(t)
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{plain("a")}}
	var scheds []*durabletype.Schedule
	for _, wf := range []string{"new", "old"} {
		sc, err := newer.CreateSchedule(ctx, &store.CreateScheduleParams{Now: t0, ID: uuid.New(), Tenant: "t", Name: wf,
			Workflow: wf, Input: []byte(`{}`), Cron: "* * * * *", TimeZone: "UTC", Shape: sh})
		require.NoError(t, err)
		scheds = append(scheds, sc)
	}
	table := pgx.Identifier{schema, "schedules"}.Sanitize()
	_, err := pool.Exec(ctx, "UPDATE "+table+` SET shape = jsonb_set(shape::jsonb, '{steps,0,future}', '{}') WHERE id = $1`, scheds[0].ID)
	require.NoError(t, err)

	older, logs := olderEngine(t, pool, schema)
	res, err := older.FireSchedules(ctx, &store.FireSchedulesParams{Now: t0.Add(90 * time.Second), Limit: 10})
	require.NoError(t, err)
	require.Empty(t, res.Broken, "a newer release's schedule is not broken by an older leader")
	require.Equal(t, 1, res.Left)
	require.Len(t, res.Fired, 1)
	require.Equal(t, "old", res.Fired[0].Name)
	require.Contains(t, logs.String(), "schedule t/new of workflow new needs a newer engine")

	// An engine that registers the workflow fires it, with the shape it
	// registered (cronslot.Plan).
	res, err = older.FireSchedules(ctx, &store.FireSchedulesParams{Now: t0.Add(100 * time.Second), Limit: 10,
		Shapes: map[string]*durabletype.Shape{"new": sh}})
	require.NoError(t, err)
	require.Len(t, res.Fired, 1)
	require.Equal(t, "new", res.Fired[0].Name)
}

// TestUnreadableShapeTimersPassedOver: timers of runs left alone that fill
// a whole batch do not hold back the timers due after them.
func TestUnreadableShapeTimersPassedOver(t *testing.T) {
	t.Parallel()
	newer, pool, schema := setup(t)
	nr := newRun("new", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "x", Sleep: 30 * time.Minute, Retry: once()}}})
	or := newRun("old", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{{Name: "a", Sleep: time.Hour, Retry: once()}}})
	require.NoError(t, created(newer.CreateRuns(ctx, &store.CreateRunsParams{Now: t0, Runs: []store.NewRun{nr, or}})))
	future(t, pool, schema, nr.ID)
	older, _ := olderEngine(t, pool, schema)

	res, err := older.FireTimers(ctx, &store.FireTimersParams{Now: t0.Add(2 * time.Hour), Limit: 1})
	require.NoError(t, err)
	require.Equal(t, 1, res.Left, "the earliest timer, left alone")
	require.Equal(t, 1, res.Fired, "the next one, fired past it")
	require.NotEqual(t, durabletype.TaskSleeping, taskState(t, older, or.ID))
	require.Equal(t, durabletype.TaskSleeping, taskState(t, older, nr.ID))
}
