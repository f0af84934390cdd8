package pgstore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

func tableExists(t *testing.T, pool *pgxpool.Pool, schema, table string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema, table}.Sanitize()).Scan(&ok))
	return ok
}

func applied(t *testing.T, pool *pgxpool.Pool, schema string) []int {
	t.Helper()
	st, err := pgstore.MigrationStatus(ctx, pool, schema)
	require.NoError(t, err)
	require.NotEmpty(t, st)
	var out []int
	for _, m := range st {
		if m.Applied {
			require.False(t, m.AppliedAt.IsZero())
			out = append(out, m.Version)
		}
	}
	return out
}

// initialTables are the relations migration 001 creates (sequences
// included); TestMigrateUpDown checks that up creates and down drops each.
var initialTables = []string{"shapes", "runs", "tasks", "ready", "incoming", "tenant_groups",
	"tenants", "frontier", "event_blocks", "events"}

func TestMigrateUpDown(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, pool)

	require.Empty(t, applied(t, pool, schema), "a schema never migrated")
	res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err)
	require.Equal(t, []int{1}, res.Versions)
	require.Equal(t, []int{1}, applied(t, pool, schema))
	for _, table := range initialTables {
		require.True(t, tableExists(t, pool, schema, table), table)
	}

	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Up})
	require.NoError(t, err)
	require.Empty(t, res.Versions, "up twice is a no-op")

	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down, Steps: 1})
	require.NoError(t, err)
	require.Equal(t, []int{1}, res.Versions)
	require.Empty(t, applied(t, pool, schema))
	for _, table := range initialTables {
		require.False(t, tableExists(t, pool, schema, table), table)
	}
	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down})
	require.NoError(t, err)
	require.Empty(t, res.Versions, "nothing left to revert")

	_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err)
	require.Equal(t, []int{1}, applied(t, pool, schema))
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	r := newRun("wf", "t", &store.Shape{Steps: []store.StepSpec{step("a")}})
	require.NoError(t, s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}}))
	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, store.RunRunning, got.Status)
}

func TestMigrationSQL(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, pool)
	up, err := pgstore.MigrationSQL(schema, pgstore.Up)
	require.NoError(t, err)
	require.Contains(t, up, `CREATE TABLE "`+schema+`".runs`)
	require.NotContains(t, up, "{{schema}}")
	_, err = pool.Exec(ctx, up) // no arguments: the simple protocol runs the script
	require.NoError(t, err)
	require.Equal(t, []int{1}, applied(t, pool, schema))
	res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err)
	require.Empty(t, res.Versions, "Migrate agrees with a schema migrated from the printed SQL")

	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{
		newRun("wf", "t", &store.Shape{Steps: []store.StepSpec{step("a")}})}}))

	down, err := pgstore.MigrationSQL(schema, pgstore.Down)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, down)
	require.NoError(t, err)
	require.Empty(t, applied(t, pool, schema))
	require.False(t, tableExists(t, pool, schema, "tasks"))

	_, err = pgstore.MigrationSQL("Bad-Name", pgstore.Up)
	require.ErrorIs(t, err, pgstore.ErrInvalidSchema)
	_, err = pgstore.MigrationSQL(schema, pgstore.Direction(7))
	require.Error(t, err)
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, pool)
	const n = 4
	results := make([]*pgstore.MigrateResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
		})
	}
	close(start)
	wg.Wait()
	ran := 0
	for i := range n {
		require.NoError(t, errs[i])
		if len(results[i].Versions) > 0 {
			require.Equal(t, []int{1}, results[i].Versions)
			ran++
		}
	}
	require.Equal(t, 1, ran, "exactly one migrator applies the migration")
	require.Equal(t, []int{1}, applied(t, pool, schema))
}

func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	r := newRun("wf", "t", &store.Shape{Steps: []store.StepSpec{step("a")}})
	require.NoError(t, s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}}))
	q := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{
		fmt.Sprintf(`UPDATE %s.tasks SET state = 'BOGUS' WHERE run_id = $1`, q),
		fmt.Sprintf(`UPDATE %s.tasks SET kind = 'nap' WHERE run_id = $1`, q),
		fmt.Sprintf(`UPDATE %s.runs SET status = 'DONE' WHERE id = $1`, q),
		fmt.Sprintf(`INSERT INTO %s.events (run_id, id, step, type, attempt, at) VALUES ($1, 1, 'a', 'EXPLODED', 0, now())`, q),
	} {
		_, err := pool.Exec(ctx, stmt, r.ID)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", stmt, err)
		require.Equal(t, "23514", pgErr.Code, "check_violation for %s", stmt)
	}
	// The frontier has one row per claimer (shard); the migration inserts
	// the row of shard "", so a second one is a unique violation.
	_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.frontier (shard, block) VALUES ('', 1)`, q))
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "a second frontier row for one shard: %v", err)
	require.Equal(t, "23505", pgErr.Code, "unique_violation: %v", err)
	require.Equal(t, "frontier_pkey", pgErr.ConstraintName)
	_, err = pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.frontier (shard, block) VALUES ('w1', NULL)`, q))
	require.True(t, errors.As(err, &pgErr), "a frontier row without a block: %v", err)
	require.Equal(t, "23502", pgErr.Code, "not_null_violation: %v", err)
	_, err = pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.frontier (shard, block) VALUES ('w1', 2)`, q))
	require.NoError(t, err, "another claimer's row")
}

func TestInvalidSchema(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, name := range []string{"Durable", "1abc", "a-b", "a b", strings.Repeat("a", 64), `x"; DROP TABLE y; --`} {
		_, err := pgstore.New(pool, &pgstore.Config{Schema: name})
		require.ErrorIs(t, err, pgstore.ErrInvalidSchema, name)
		_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: name})
		require.ErrorIs(t, err, pgstore.ErrInvalidSchema, name)
	}
	s, err := pgstore.New(pool, nil)
	require.NoError(t, err)
	require.Equal(t, pgstore.DefaultSchema, s.Schema())
}
