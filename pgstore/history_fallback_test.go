package pgstore_test

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// settledIn creates a run with an id of the time in on s and completes it.
func settledIn(t *testing.T, s *pgstore.Store, wf string, in time.Time) uuid.UUID {
	t.Helper()
	r := newRun(wf, "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})
	r.ID = dag.TimeOrderedID(uuid.New(), in)
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))
	cs := claimAll(t, s, wf, 10)
	require.Len(t, cs, 1)
	_, err := s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{complete(cs[0])}})
	require.NoError(t, err)
	return r.ID
}

// holdLock holds lock (a LOCK TABLE statement) in a transaction of pool's
// until the test ends.
func holdLock(t *testing.T, pool *pgxpool.Pool, lock string) {
	t.Helper()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	_, err = tx.Exec(ctx, lock)
	require.NoError(t, err)
}

// TestHistoryRetentionWithoutDDLRights: a worker's role with only DML
// rights (docs/operating.md, --no-migrate) can neither create nor drop the
// history's periods. Its leader's retention still deletes the settled runs
// that expired, row by row, in a period's partitions as in the default
// ones, and warns once instead of failing every pass and keeping every run.
func TestHistoryRetentionWithoutDDLRights(t *testing.T) {
	t.Parallel()
	admin, pool, schema := setup(t)
	const retention = time.Hour // periods of 15 minutes
	_, err := admin.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	ps := periods(t, pool, schema)
	require.Len(t, ps, 2)
	inPeriod := settledIn(t, admin, "wf", timeOfBound(ps[0].Lo).Add(time.Minute))
	inDefault := settledIn(t, admin, "wf", dbNow(t, pool).Add(-time.Minute))
	require.Equal(t, schema+".runs_"+ps[0].Suffix, partitionOf(t, pool, schema, "runs", inPeriod))
	require.Equal(t, schema+".runs_default", partitionOf(t, pool, schema, "runs", inDefault))

	var logs pgtest.SyncBuffer
	dml := leastPrivilegeRole(t, pool, schema)
	s, err := pgstore.New(dml, &pgstore.Config{Schema: schema, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	later := timeOfBound(ps[1].Hi).Add(retention + time.Minute) // both periods expired, and past
	for range 2 {
		_, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: later, OlderThan: retention, Limit: 500, Lazy: true})
		require.NoError(t, err, "the periods cannot be changed, the runs are deleted all the same")
	}
	for _, id := range []uuid.UUID{inPeriod, inDefault} {
		_, err := s.GetRun(ctx, id)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	}
	require.Equal(t, ps, periods(t, pool, schema), "the periods are the owner's to drop")
	require.Equal(t, 1, bytes.Count([]byte(logs.String()), []byte("settled runs are deleted row by row")), logs.String())
}

// TestHistoryOverdueDropDeletesRowByRow: a period whose drop keeps waiting
// for its locks (a long transaction reading its runs) a whole period past
// its expiry has its settled runs deleted row by row meanwhile, so that
// retention holds; the drop happens once the locks are free.
func TestHistoryOverdueDropDeletesRowByRow(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	const retention = time.Hour // periods of 15 minutes
	_, err := s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	ps := periods(t, pool, schema)
	id := settledIn(t, s, "wf", timeOfBound(ps[0].Lo).Add(time.Minute))
	part := pgx.Identifier{schema, "runs_" + ps[0].Suffix}.Sanitize()
	reader, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = reader.Rollback(ctx) }()
	_, err = reader.Exec(ctx, "LOCK TABLE "+part+" IN ACCESS SHARE MODE")
	require.NoError(t, err)

	expired := timeOfBound(ps[0].Hi).Add(retention + time.Minute) // expired, not yet overdue
	res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: expired, OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.Zero(t, res.Deleted, "the drop waits for its next pass")
	_, err = s.GetRun(ctx, id)
	require.NoError(t, err)

	overdue := timeOfBound(ps[0].Hi).Add(retention + 15*time.Minute + time.Minute)
	res, err = s.PruneRuns(ctx, &store.PruneRunsParams{Now: overdue, OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.Deleted, "a period overdue has its runs deleted row by row")
	_, err = s.GetRun(ctx, id)
	require.ErrorIs(t, err, durabletype.ErrRunNotFound)
	require.Contains(t, periods(t, pool, schema), ps[0])

	require.NoError(t, reader.Rollback(ctx))
	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{Now: overdue, OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.NotContains(t, periods(t, pool, schema), ps[0], "dropped once its locks are free")
}

// TestHistoryFreeConstraintsNeverOutliveACreation: the constraints a
// period's creation puts on the default partitions (freeDefaults) go when
// the creation gives way, and a pass that makes no period still clears
// those a creation left (its process died): left there, every run whose id
// falls in their period would be refused once the clock got there.
func TestHistoryFreeConstraintsNeverOutliveACreation(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	const retention = time.Hour // periods of 15 minutes
	id := pgx.Identifier{schema}.Sanitize()
	// The first period begins more than a minute ahead: its creation
	// frees the default partitions first.
	now := dbNow(t, pool).Truncate(15 * time.Minute).Add(time.Second)

	// The attach cannot take tasks: the creation gives way, five times.
	holdLock(t, pool, "LOCK TABLE ONLY "+id+".tasks IN ACCESS SHARE MODE")
	_, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: now, OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err, "the next pass tries again")
	require.Empty(t, periods(t, pool, schema))
	require.Empty(t, freeConstraints(t, pool, schema), "a creation that gave way leaves no constraint")

	// A constraint a creation left (it died) for the period under way, and
	// a pass that creates nothing (an operator's prune): the constraint
	// goes, and runs of that period are recorded.
	start := dbNow(t, pool).Truncate(15 * time.Minute)
	lo, hi := dag.TimeOrderedID(uuid.UUID{}, start), dag.TimeOrderedID(uuid.UUID{}, start.Add(15*time.Minute))
	for i := 6; i < 16; i++ {
		lo[i], hi[i] = 0, 0
	}
	suffix := "p" + start.UTC().Format("20060102t150405")
	_, err = pool.Exec(ctx, `ALTER TABLE `+id+`.runs_default ADD CONSTRAINT runs_default_free_`+suffix+
		` CHECK (id < '`+lo.String()+`' OR id >= '`+hi.String()+`') NOT VALID`)
	require.NoError(t, err)
	r := newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})
	r.ID = dag.TimeOrderedID(uuid.New(), dbNow(t, pool))
	_, err = s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})
	require.ErrorIs(t, err, durabletype.ErrTransient, "refused while the constraint is there")
	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500})
	require.NoError(t, err)
	require.Empty(t, freeConstraints(t, pool, schema))
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))
}

// TestHistoryPeriodNamesChecked: the name of a period goes into statements
// as it is, so a store takes only the names it makes. A row of
// history_partitions it did not make (hostile, or corrupt) is refused: the
// store routes nothing to it, its runs go on through the parent tables,
// and retention deletes them row by row.
func TestHistoryPeriodNamesChecked(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	const retention = time.Hour
	now := dbNow(t, pool)
	lo, hi := dag.TimeOrderedID(uuid.UUID{}, now.Add(-time.Hour)), dag.TimeOrderedID(uuid.UUID{}, now.Add(time.Hour))
	for i := 6; i < 16; i++ {
		lo[i], hi[i] = 0, 0
	}
	_, err := pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "history_partitions"}.Sanitize()+
		" (lo, hi, suffix) VALUES ($1, $2, $3)", lo, hi, `p1 x; DROP TABLE runs; --`)
	require.NoError(t, err)

	id := settledIn(t, s, "wf", now)
	got, err := s.GetRun(ctx, id)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, got.Status)
	res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: now.Add(2 * retention), OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.Equal(t, 1, res.Deleted)
}

// TestHistoryRoutesForgetDroppedPeriods: the statements a store rewrote
// for a period's partitions are forgotten once the period is dropped (a
// store with 15-second periods would otherwise keep thousands a day).
func TestHistoryRoutesForgetDroppedPeriods(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	const retention = time.Hour
	_, err := s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	ps := periods(t, pool, schema)
	for _, p := range ps {
		pgstore.CacheVariant(s, p.Suffix)
	}
	pgstore.CacheVariant(s, "default")
	require.ElementsMatch(t, []string{ps[0].Suffix, ps[1].Suffix, "default"}, pgstore.VariantSuffixes(s))
	later := timeOfBound(ps[0].Hi).Add(retention + time.Second)
	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{Now: later, OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.NotContains(t, periods(t, pool, schema), ps[0])
	require.NotContains(t, pgstore.VariantSuffixes(s), ps[0].Suffix)
	require.Contains(t, pgstore.VariantSuffixes(s), "default")
}

// TestHistoryRoutedRowsForgetDroppedPeriod: a statement a store sends
// alone to a period's partitions, prepared on its connection before the
// period was dropped, fails once as it reads its rows (not as it is sent);
// the store then forgets the periods, and the next one goes through the
// parent tables, without waiting for the store's next read of the periods.
func TestHistoryRoutedRowsForgetDroppedPeriod(t *testing.T) {
	t.Parallel()
	admin, pool, schema := setup(t)
	const retention = time.Hour
	_, err := admin.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	ps := periods(t, pool, schema)
	r := newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})
	r.ID = dag.TimeOrderedID(uuid.New(), timeOfBound(ps[0].Lo).Add(time.Minute))
	require.NoError(t, created(admin.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))

	cfg := pool.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0 // one connection: the statement prepared there is the one used again
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(one.Close)
	s, err := pgstore.New(one, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, pgstore.ReadRecords(ctx, s, r.ID)) // reads the periods in the background
	require.Eventually(t, func() bool { return pgstore.KnowsPeriods(s) }, time.Minute, time.Millisecond)
	require.NoError(t, pgstore.ReadRecords(ctx, s, r.ID)) // prepared for the period's partitions

	later := timeOfBound(ps[0].Hi).Add(retention + time.Second)
	_, err = admin.PruneRuns(ctx, &store.PruneRunsParams{Now: later, OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.NotContains(t, periods(t, pool, schema), ps[0])
	require.Equal(t, schema+".runs_default", partitionOf(t, pool, schema, "runs", r.ID), "kept: in flight")

	err = pgstore.ReadRecords(ctx, s, r.ID)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "42P01", pgErr.Code, "the partition is gone: %v", err)
	require.False(t, pgstore.KnowsPeriods(s), "forgotten at once")
	require.NoError(t, pgstore.ReadRecords(ctx, s, r.ID))
}

// TestHistoryWaitsForOldWorkersRecords: no period is made while the
// record of a worker of a release before the periods is there, live or
// not (one frozen past its DeadAfter may come back, with statements that
// assume one table); once the record is gone (the worker stopped, or the
// leader expired it), the periods start.
func TestHistoryWaitsForOldWorkersRecords(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	const retention = time.Hour
	workers := pgx.Identifier{schema, "workers"}.Sanitize()
	_, err := pool.Exec(ctx, "INSERT INTO "+workers+` (id, concurrency, in_flight, dead_after, started_at, last_seen, schema_level)
VALUES ('old', 10, 1, 1000000, now() - interval '2 hours', now() - interval '1 hour', 0)`)
	require.NoError(t, err)
	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.Empty(t, periods(t, pool, schema), "an old worker dead for an hour may come back")

	_, err = pool.Exec(ctx, "DELETE FROM "+workers+" WHERE id = 'old'")
	require.NoError(t, err)
	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.NotEmpty(t, periods(t, pool, schema))
}
