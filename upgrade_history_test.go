package durable_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// runSnapshot is what a run looks like from outside: its status, key,
// steps and event log, with times in UTC text so that two snapshots
// compare.
type runSnapshot struct {
	Workflow, Tenant, Key string
	Status                durabletype.RunStatus
	Created, Finished     string
	Steps                 []string
	Events                []string
}

func snapshotRun(t *testing.T, e *durable.Engine, id uuid.UUID) runSnapshot {
	t.Helper()
	ctx := context.Background()
	res, err := e.Get(ctx, id)
	require.NoError(t, err, "run %s", id)
	stamp := func(at time.Time) string {
		if at.IsZero() {
			return ""
		}
		return at.UTC().Format(time.RFC3339Nano)
	}
	s := runSnapshot{Workflow: res.Workflow, Tenant: res.Tenant, Key: res.IdempotencyKey, Status: res.Status,
		Created: stamp(res.CreatedAt), Finished: stamp(res.FinishedAt)}
	for _, st := range res.Steps {
		s.Steps = append(s.Steps, fmt.Sprintf("%s %s attempts=%d due=%s started=%s finished=%s output=%s error=%q",
			st.Name, st.State, st.Attempts, stamp(st.DueAt), stamp(st.StartedAt), stamp(st.FinishedAt), st.Output, st.Error))
	}
	evs, err := e.Events(ctx, id)
	require.NoError(t, err)
	for _, ev := range evs {
		s.Events = append(s.Events, fmt.Sprintf("%d %s %s attempt=%d at=%s due=%s %q",
			ev.ID, ev.Step, ev.Type, ev.Attempt, stamp(ev.At), stamp(ev.DueAt), ev.Detail))
	}
	return s
}

// deployPool is a new process's pool on the test's database: closed when
// the test ends.
func deployPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// partitionsOf counts the runs of each partition of runs.
func partitionsOf(t *testing.T, pool *pgxpool.Pool, schema string) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		"SELECT tableoid::regclass::text, count(*)::int FROM "+pgx.Identifier{schema, "runs"}.Sanitize()+" GROUP BY 1")
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		require.NoError(t, rows.Scan(&name, &n))
		out[name] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// TestUpgradeHistoryWithRunsInFlight: migration 017 applied to a schema
// that holds runs in every state loses and breaks none of them. Engines
// run workflows until runs are queued (a workflow nobody serves yet),
// running (a step blocked), sleeping (an hour), waiting for an event,
// parked behind a concurrency key, started with idempotency keys (settled
// and in flight), or completed, most of them in the period partitions the
// leader's retention made. The engines stop, as in a deploy; 017 is
// reverted (every row back into plain tables, as 016 had them) and applied
// again (the upgrade under test, on tables holding these rows). Then every
// run reads exactly as before; new engines on new pools take them on: the
// blocked and parked runs complete once released, the waiting one once its
// event is sent, the queued ones once a worker serves their workflow; the
// sleeping run still sleeps until the same time; the kept idempotency keys
// still dedupe, and new runs start and complete.
func TestUpgradeHistoryWithRunsInFlight(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	ctx := pgCtx(t, 2*time.Minute)
	release := make(chan struct{})     // the blocked steps
	releaseConc := make(chan struct{}) // the steps behind the concurrency key
	blockOn := func(ch chan struct{}) func(durable.Context, int) (int, error) {
		return func(ctx durable.Context, n int) (int, error) {
			select {
			case <-ch:
				return n * 10, nil
			case <-ctx.Done():
				return 0, context.Cause(ctx)
			}
		}
	}
	// build declares the workflows afresh for each engine.
	type workflows struct {
		quick, block, nap, wait, conc, queued *durable.Workflow[int]
	}
	build := func() workflows {
		var w workflows
		w.quick = durable.NewWorkflow[int]("upg-quick")
		durable.Step(w.quick, "add", func(_ durable.Context, n int) (int, error) { return n + 1, nil })
		w.block = durable.NewWorkflow[int]("upg-block")
		durable.Step(w.block, "block", blockOn(release))
		w.nap = durable.NewWorkflow[int]("upg-nap")
		nap := durable.Sleep(w.nap, "nap", time.Hour)
		durable.Step(w.nap, "after", func(_ durable.Context, n int) (int, error) { return n, nil }, durable.After(nap))
		w.wait = durable.NewWorkflow[int]("upg-wait")
		durable.WaitForEvent[string](w.wait, "wait", func(_ durable.Context, n int) (string, error) { return fmt.Sprintf("upg-%d", n), nil })
		w.conc = durable.NewWorkflow[int]("upg-conc").WithConcurrency(func(int) string { return "one" }, 1)
		durable.Step(w.conc, "work", blockOn(releaseConc))
		w.queued = durable.NewWorkflow[int]("upg-queued")
		durable.Step(w.queued, "later", func(_ durable.Context, n int) (int, error) { return n * 2, nil })
		return w
	}
	served := func(w workflows) []durable.Definition {
		return []durable.Definition{w.quick, w.block, w.nap, w.wait, w.conc}
	}

	// launch starts an engine that stops when the test ends, if it has not
	// by then, cancelling the steps still blocked.
	launch := func(s *pgstore.Store, defs ...durable.Definition) *durable.Engine {
		e := pgLaunch(t, s, durable.Config{Concurrency: 8}, defs...)
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_ = e.Stop(stopCtx)
		})
		return e
	}

	// makePeriods makes the periods' partitions, as the leader's retention
	// did a day ago (it makes them ahead: today's and tomorrow's), before
	// the engines start: retention's first pass then finds them.
	makePeriods := func(s *pgstore.Store) {
		_, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: time.Now().Add(-24 * time.Hour), OlderThan: durable.DefaultRetention,
			Limit: 500, Lazy: true})
		require.NoError(t, err)
	}

	// Before: engines at 017, the history in periods' partitions.
	wfs := build()
	makePeriods(env.store)
	before := []*durable.Engine{
		launch(env.newStore(t), served(build())...),
		launch(env.newStore(t), served(build())...),
	}
	client := pgClient(t, env.newStore(t))

	start := func(wf *durable.Workflow[int], n int, opts ...durable.TriggerOption) uuid.UUID {
		t.Helper()
		st, err := wf.Start(ctx, client, "acme", n, opts...)
		require.NoError(t, err)
		require.False(t, st.Duplicate)
		return st.RunID
	}
	var completed []uuid.UUID
	for n := range 5 {
		completed = append(completed, start(wfs.quick, n))
	}
	doneKeyed := start(wfs.quick, 100, durable.WithIdempotencyKey("done-key"))
	completed = append(completed, doneKeyed)
	blocked := start(wfs.block, 1)
	flyingKeyed := start(wfs.block, 2, durable.WithIdempotencyKey("flying-key"))
	napping := start(wfs.nap, 3)
	waiting := start(wfs.wait, 4)
	concFirst := start(wfs.conc, 5)
	var queued []uuid.UUID
	for n := range 3 {
		queued = append(queued, start(wfs.queued, n))
	}
	pgEventually(t, 15*time.Second, func() bool {
		return stepState(t, client, concFirst, "work") == durabletype.TaskRunning
	}, "the first run of the concurrency key runs")
	concParked := start(wfs.conc, 6)

	for _, id := range completed {
		res := pgWait(t, client, id, 15*time.Second)
		require.Equal(t, durabletype.RunCompleted, res.Status)
	}
	pgEventually(t, 15*time.Second, func() bool {
		return stepState(t, client, blocked, "block") == durabletype.TaskRunning &&
			stepState(t, client, flyingKeyed, "block") == durabletype.TaskRunning &&
			stepState(t, client, napping, "nap") == durabletype.TaskSleeping &&
			stepState(t, client, waiting, "wait") == durabletype.TaskWaiting
	}, "the runs block, sleep and wait")
	require.Equal(t, durabletype.TaskQueued, stepState(t, client, concParked, "work"), "parked behind the key")
	for _, id := range queued {
		require.Equal(t, durabletype.TaskQueued, stepState(t, client, id, "later"), "nobody serves upg-queued")
	}
	res, err := client.Get(ctx, napping)
	require.NoError(t, err)
	nap, _ := res.Step("nap")
	napDue := nap.DueAt
	require.True(t, napDue.After(time.Now().Add(50*time.Minute)), "the nap ends in an hour: %s", napDue)

	// The deploy: the engines stop (the blocked steps go back to the
	// queue), 017 goes down and up again on the tables as they are.
	for _, e := range before {
		stopCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := e.Stop(stopCtx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stopping %s: %v", e.WorkerID(), err)
		}
	}
	all := append(append(append([]uuid.UUID{}, completed...), blocked, flyingKeyed, napping, waiting, concFirst, concParked), queued...)
	snap := map[uuid.UUID]runSnapshot{}
	for _, id := range all {
		snap[id] = snapshotRun(t, client, id)
	}
	parts := partitionsOf(t, env.pool, env.schema)
	require.Zero(t, parts[env.schema+".runs_default"], "every run is in a period's partitions: %v", parts)
	t.Logf("before the deploy, runs by partition: %v", parts)

	pool := deployPool(t)
	status, err := pgstore.MigrationStatus(ctx, pool, env.schema)
	require.NoError(t, err)
	var above []int // 017 and the migrations after it
	for _, m := range status[16:] {
		above = append(above, m.Version)
	}
	res2, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: env.schema, Direction: pgstore.Down, Steps: len(above)})
	require.NoError(t, err)
	require.Equal(t, 17, res2.Versions[len(res2.Versions)-1], "down to 016")
	res2, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: env.schema})
	require.NoError(t, err)
	require.Equal(t, above, res2.Versions, "the upgrade")
	require.Equal(t, map[string]int{env.schema + ".runs_default": len(all)}, partitionsOf(t, pool, env.schema),
		"every run is in the default partition after the upgrade")

	// After: every run reads as it did before.
	newStore := func() *pgstore.Store {
		s, err := pgstore.New(pool, &pgstore.Config{Schema: env.schema, LeaderLease: testLeaderLease})
		require.NoError(t, err)
		return s
	}
	client = pgClient(t, newStore())
	makePeriods(newStore())
	for _, id := range all {
		require.Equal(t, snap[id], snapshotRun(t, client, id), "run %s after the upgrade", id)
	}

	// New engines (a new version of the application also serves
	// upg-queued) take the runs on.
	for range 2 {
		w := build()
		launch(newStore(), append(served(w), w.queued)...)
	}
	for _, id := range queued {
		res := pgWait(t, client, id, 15*time.Second)
		require.Equal(t, durabletype.RunCompleted, res.Status, "queued run %s", id)
	}
	pgEventually(t, 15*time.Second, func() bool {
		return stepState(t, client, blocked, "block") == durabletype.TaskRunning &&
			stepState(t, client, flyingKeyed, "block") == durabletype.TaskRunning
	}, "the blocked runs run again")
	pgEventually(t, 15*time.Second, func() bool {
		first, parked := stepState(t, client, concFirst, "work"), stepState(t, client, concParked, "work")
		return first == durabletype.TaskRunning && parked == durabletype.TaskQueued ||
			first == durabletype.TaskQueued && parked == durabletype.TaskRunning
	}, "one run of the concurrency key runs again, the other is parked")

	// The kept keys still dedupe; new runs start, with new keys too.
	for key, id := range map[string]uuid.UUID{"done-key": doneKeyed, "flying-key": flyingKeyed} {
		wf := wfs.quick
		if key == "flying-key" {
			wf = wfs.block
		}
		st, err := wf.Start(ctx, client, "acme", 0, durable.WithIdempotencyKey(key))
		require.NoError(t, err)
		require.True(t, st.Duplicate, key)
		require.Equal(t, id, st.RunID, key)
	}
	fresh := start(wfs.quick, 41, durable.WithIdempotencyKey("new-key"))
	st, err := wfs.quick.Start(ctx, client, "acme", 0, durable.WithIdempotencyKey("new-key"))
	require.NoError(t, err)
	require.Equal(t, durable.Started{RunID: fresh, Duplicate: true}, st)
	plain := start(wfs.quick, 42)
	for id, want := range map[uuid.UUID]string{fresh: "42", plain: "43"} {
		res := pgWait(t, client, id, 15*time.Second)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		add, _ := res.Step("add")
		require.Equal(t, want, string(add.Output))
	}

	// Released, the blocked and parked runs complete; sent its event, the
	// waiting one does.
	close(release)
	close(releaseConc)
	got, err := client.SendEvent(ctx, "acme", "upg-4", "hello")
	require.NoError(t, err)
	require.Equal(t, 1, got, "the waiting step receives the event")
	for id, want := range map[uuid.UUID]string{blocked: "10", flyingKeyed: "20", concFirst: "50", concParked: "60"} {
		res := pgWait(t, client, id, 15*time.Second)
		require.Equal(t, durabletype.RunCompleted, res.Status, "run %s", id)
		require.Equal(t, want, string(res.Steps[0].Output), "run %s", id)
	}
	res = pgWait(t, client, waiting, 15*time.Second)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	w, _ := res.Step("wait")
	require.Equal(t, `"hello"`, string(w.Output))

	// The sleeping run still sleeps, until the same time.
	res, err = client.Get(ctx, napping)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunRunning, res.Status)
	nap, _ = res.Step("nap")
	require.Equal(t, durabletype.TaskSleeping, nap.State)
	require.True(t, napDue.Equal(nap.DueAt), "the nap ends at %s, not %s", napDue, nap.DueAt)
}
