package pgstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// leastPrivilegeRole creates a login role with only what a worker needs on
// an already migrated schema: USAGE on the schema, DML on its tables and use
// of its sequences. It returns a pool connected as that role; the role and
// the pool are gone when the test ends.
func leastPrivilegeRole(t *testing.T, admin *pgxpool.Pool, schema string) *pgxpool.Pool {
	t.Helper()
	role := strings.Replace(pgtest.NewSchemaName(), "durable_test_", "durable_test_role_", 1)
	password := pgtest.NewSchemaName() // random; trust authentication ignores it
	r, s := pgx.Identifier{role}.Sanitize(), pgx.Identifier{schema}.Sanitize()
	_, err := admin.Exec(ctx, "CREATE ROLE "+r+" LOGIN PASSWORD '"+password+"'")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// DROP OWNED revokes the role's privileges in this database, which
		// DROP ROLE requires.
		for _, stmt := range []string{"DROP OWNED BY " + r, "DROP ROLE " + r} {
			if _, err := admin.Exec(ctx, stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	for _, grant := range []string{
		"GRANT USAGE ON SCHEMA " + s + " TO " + r,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + s + " TO " + r,
		"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA " + s + " TO " + r,
	} {
		_, err := admin.Exec(ctx, grant)
		require.NoError(t, err, grant)
	}

	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cfg.ConnConfig.User, cfg.ConnConfig.Password = role, password
	cfg.MaxConns = 6
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close) // runs before the role is dropped
	var user string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_user").Scan(&user))
	require.Equal(t, role, user)
	return pool
}

// TestLeastPrivilegeWorker: a role without DDL rights can run Migrate on a
// migrated schema (a no-op), pass Check, run an engine to completion, and
// read the storage of the tables.
func TestLeastPrivilegeWorker(t *testing.T) {
	t.Parallel()
	admin := pgtest.Pool(t)
	schema := pgtest.Schema(t, admin)
	pool := leastPrivilegeRole(t, admin, schema)

	// The role really has no DDL rights.
	for _, ddl := range []string{
		"CREATE TABLE " + pgx.Identifier{schema, "intruder"}.Sanitize() + " (i int)",
		"CREATE SCHEMA " + pgx.Identifier{schema + "_x"}.Sanitize(),
	} {
		_, err := pool.Exec(ctx, ddl)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", ddl, err)
		require.Equal(t, "42501", pgErr.Code, "insufficient_privilege for %s", ddl)
	}

	res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err, "Migrate up on a current schema needs no DDL")
	require.Empty(t, res.Versions)

	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, s.Check(ctx))

	e, err := durable.New(s, durable.Config{
		Logger: quietLogger(), PollInterval: 50 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond, DeadAfter: time.Second,
	})
	require.NoError(t, err)
	wf := durable.NewWorkflow[int]("least-privilege")
	double := durable.Step(wf, "double", func(_ durable.Context, n int) (int, error) { return 2 * n, nil })
	nap := durable.Sleep(wf, "nap", 10*time.Millisecond, durable.After(double))
	durable.Step(wf, "inc", func(ctx durable.Context, _ int) (int, error) {
		d, _ := double.Output(ctx)
		return d + 1, nil
	}, durable.After(double, nap))
	require.NoError(t, e.Register(wf))
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	run, err := wf.Run(rctx, e, "tenant-1", 20)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, run.Status)
	got, err := double.Result(run)
	require.NoError(t, err)
	require.Equal(t, 40, got)

	// The storage of the tables needs no more rights than the engine.
	st, err := e.Storage(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, st.Tables)
	for _, tb := range st.Tables {
		require.Positive(t, tb.TotalBytes, tb.Name)
	}
}

// TestHistoryKeepsGrants: a role with only DML rights, granted on the
// tables before migration 017, keeps them across it (on the partitioned
// tables, the keys' and the periods' tables), and on the partitions of
// the periods a leader of the owner's makes later: it creates, claims,
// completes and prunes runs, in the default partitions and a period's.
func TestHistoryKeepsGrants(t *testing.T) {
	t.Parallel()
	admin := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, admin)
	_, err := pgstore.Migrate(ctx, admin, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Up, Steps: 16})
	require.NoError(t, err)
	pool := leastPrivilegeRole(t, admin, schema) // granted at 016
	_, err = pgstore.Migrate(ctx, admin, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err)

	owner, err := pgstore.New(admin, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	const retention = time.Hour
	_, err = owner.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: retention, Limit: 500, Lazy: true})
	require.NoError(t, err)
	ps := periods(t, admin, schema)
	require.NotEmpty(t, ps, "the owner's leader made periods")

	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	inPeriod := newRun("wf", "t", sh)
	inPeriod.ID, inPeriod.IdempotencyKey = dag.TimeOrderedID(uuid.New(), timeOfBound(ps[0].Lo).Add(time.Minute)), "k1"
	inDefault := newRun("wf", "t", sh)
	inDefault.IdempotencyKey = "k2"
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{inPeriod, inDefault}})))
	require.Equal(t, schema+".runs_"+ps[0].Suffix, partitionOf(t, admin, schema, "runs", inPeriod.ID))
	cs := claimAll(t, s, "wf", 10)
	require.Len(t, cs, 2)
	for _, c := range cs {
		res, err := s.FinishTasks(ctx, &store.FinishTasksParams{Outcomes: []store.Outcome{complete(c)}})
		require.NoError(t, err)
		require.Equal(t, store.FinishApplied, res[0].Status)
	}
	for _, id := range []uuid.UUID{inPeriod.ID, inDefault.ID} {
		r, err := s.GetRun(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, r.Status)
	}
	// An operator's exact prune, as the role: row by row, keys freed.
	res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: timeOfBound(ps[len(ps)-1].Hi).Add(2 * retention), OlderThan: retention, Limit: 500})
	require.NoError(t, err)
	require.Equal(t, 2, res.Deleted)
	again := newRun("wf", "t", sh)
	again.IdempotencyKey = "k1"
	cr, err := s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{again}})
	require.NoError(t, err)
	require.False(t, cr.Runs[0].Duplicate, "k1 was freed with its run")
}
