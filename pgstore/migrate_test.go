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

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
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

// allVersions lists every migration the code embeds, in order.
func allVersions(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	st, err := pgstore.MigrationStatus(ctx, pool, pgtest.NewSchemaName())
	require.NoError(t, err)
	out := make([]int, len(st))
	for i, m := range st {
		out[i] = m.Version
	}
	return out
}

// schemaTables are the relations of a migrated schema (sequences included);
// TestMigrateUpDown checks that up creates and down drops each.
var schemaTables = []string{"shapes", "runs", "tasks", "ready", "incoming", "tenant_groups",
	"tenants", "lanes", "frontier", "event_blocks", "events", "run_counts"}

func TestMigrateUpDown(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, pool)
	all := allVersions(t, pool)
	newest := all[len(all)-1]

	require.Empty(t, applied(t, pool, schema), "a schema never migrated")
	res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err)
	require.Equal(t, all, res.Versions)
	require.Equal(t, all, applied(t, pool, schema))
	for _, table := range schemaTables {
		require.True(t, tableExists(t, pool, schema, table), table)
	}

	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Up})
	require.NoError(t, err)
	require.Empty(t, res.Versions, "up twice is a no-op")

	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down, Steps: 1})
	require.NoError(t, err)
	require.Equal(t, []int{newest}, res.Versions, "down reverts the newest")
	require.Equal(t, all[:len(all)-1], applied(t, pool, schema))
	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down})
	require.NoError(t, err)
	require.Equal(t, len(all)-1, len(res.Versions), "down without steps reverts the rest")
	require.Empty(t, applied(t, pool, schema))
	for _, table := range schemaTables {
		require.False(t, tableExists(t, pool, schema, table), table)
	}
	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down})
	require.NoError(t, err)
	require.Empty(t, res.Versions, "nothing left to revert")

	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Steps: 1})
	require.NoError(t, err)
	require.Equal(t, all[:1], res.Versions, "up with steps applies the oldest first")
	_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err)
	require.Equal(t, all, applied(t, pool, schema))
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	r := newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))
	got, err := s.GetRun(ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunRunning, got.Status)
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
	require.Equal(t, allVersions(t, pool), applied(t, pool, schema))
	res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err)
	require.Empty(t, res.Versions, "Migrate agrees with a schema migrated from the printed SQL")

	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{
		newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})}})))

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
			require.Equal(t, allVersions(t, pool), results[i].Versions)
			ran++
		}
	}
	require.Equal(t, 1, ran, "exactly one migrator applies the migrations")
	require.Equal(t, allVersions(t, pool), applied(t, pool, schema))
}

func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	r := newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{r}})))
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
	// The frontier has one row per claimer (shard), holding its block and
	// the workflows it serves: a second row for a shard is a unique
	// violation, a row without a block or a workflow list a not-null one.
	insert := fmt.Sprintf(`INSERT INTO %s.frontier (shard, block, workflows) VALUES ($1, $2, $3)`, q)
	_, err := pool.Exec(ctx, insert, "w1", 1, []string{"constraints-wf"})
	require.NoError(t, err, "a claimer's row")
	_, err = pool.Exec(ctx, insert, "w2", 1, []string{"constraints-wf", "constraints-wf-2"})
	require.NoError(t, err, "another claimer's row")
	for _, c := range []struct {
		args       []any
		code, what string
	}{
		{[]any{"w1", 2, []string{"other"}}, "23505", "a second row for one shard"},
		{[]any{"w3", nil, []string{"constraints-wf"}}, "23502", "a row without a block"},
		{[]any{"w3", 1, nil}, "23502", "a row without a workflow list"},
	} {
		_, err := pool.Exec(ctx, insert, c.args...)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", c.what, err)
		require.Equal(t, c.code, pgErr.Code, "%s: %v", c.what, err)
	}
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
