package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
)

// newestMigration is the newest migration the code embeds.
func newestMigration(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	st, err := pgstore.MigrationStatus(ctx, pool, pgtest.NewSchemaName())
	require.NoError(t, err)
	return st[len(st)-1].Version
}

// requireSchemaError checks that err is the typed error of Check for schema,
// with the fix in its message.
func requireSchemaError(t *testing.T, err error, schema string, have, want int, what string) {
	t.Helper()
	require.ErrorIs(t, err, pgstore.ErrSchemaNotCurrent)
	var se *pgstore.SchemaError
	require.True(t, errors.As(err, &se), "%T: %v", err, err)
	require.Equal(t, schema, se.Schema)
	require.Equal(t, have, se.Have)
	require.Equal(t, want, se.Want)
	require.Contains(t, err.Error(), "schema "+schema+" "+what)
	require.Contains(t, err.Error(), "run `durable migrate up` (or pgstore.Migrate)")
}

// statementCounter counts the statements a pool sends.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countingPool returns a pool on the test database whose statements are
// counted; it is closed when the test ends.
func countingPool(t *testing.T) (*pgxpool.Pool, *statementCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	cfg.MaxConns = 2
	c := &statementCounter{}
	cfg.ConnConfig.Tracer = c
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, c
}

func TestCheck(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	want := newestMigration(t, pool)
	// A counting pool per check: subtests run in parallel, and a shared
	// count would add up their statements.
	check := func(schema string) (error, int64) {
		counted, stmts := countingPool(t)
		s, err := pgstore.New(counted, &pgstore.Config{Schema: schema})
		require.NoError(t, err)
		before := stmts.n.Load()
		err = s.Check(ctx)
		return err, stmts.n.Load() - before
	}

	t.Run("current", func(t *testing.T) {
		t.Parallel()
		err, n := check(pgtest.Schema(t, pool))
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "Check costs one statement")
	})
	t.Run("missing schema", func(t *testing.T) {
		t.Parallel()
		schema := pgtest.EmptySchema(t, pool)
		err, _ := check(schema)
		requireSchemaError(t, err, schema, 0, want, "does not exist")
	})
	t.Run("never migrated", func(t *testing.T) {
		t.Parallel()
		schema := pgtest.EmptySchema(t, pool)
		_, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
		require.NoError(t, err)
		err, _ = check(schema)
		requireSchemaError(t, err, schema, 0, want, "has never been migrated")
	})
	t.Run("migrated down", func(t *testing.T) {
		t.Parallel()
		schema := pgtest.Schema(t, pool)
		res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down})
		require.NoError(t, err)
		require.NotEmpty(t, res.Versions)
		err, _ = check(schema)
		requireSchemaError(t, err, schema, 0, want, fmt.Sprintf("is at migration 000, but this code needs %03d", want))
	})
	t.Run("older", func(t *testing.T) {
		t.Parallel()
		// A schema one migration behind: the newest version row removed
		// (the tables stay, which Check does not look at).
		schema := pgtest.Schema(t, pool)
		_, err := pool.Exec(ctx, fmt.Sprintf(`DELETE FROM %s.migrations WHERE version = $1`, pgx.Identifier{schema}.Sanitize()), want)
		require.NoError(t, err)
		err, _ = check(schema)
		requireSchemaError(t, err, schema, want-1, want, "is at migration")
	})
	t.Run("newer", func(t *testing.T) {
		t.Parallel()
		// Workers of an older release keep running on a schema migrated
		// by a newer one.
		schema := pgtest.Schema(t, pool)
		_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.migrations (version, name) VALUES ($1, 'future')`,
			pgx.Identifier{schema}.Sanitize()), want+1)
		require.NoError(t, err)
		err, n := check(schema)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
		require.NoError(t, err)
		require.Empty(t, res.Versions)
	})
}

// TestStartOnMissingSchema: an engine does not start on a schema that was
// never migrated, and says how to fix it.
func TestStartOnMissingSchema(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, pool)
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	require.NoError(t, err)
	e, err := durable.New(s, durable.Config{Logger: quietLogger()})
	require.NoError(t, err)
	wf := durable.NewWorkflow[int]("check-wf")
	durable.Step(wf, "a", func(durable.Context, int) (int, error) { return 1, nil })
	require.NoError(t, e.Register(wf))
	err = e.Start(ctx)
	require.ErrorIs(t, err, pgstore.ErrSchemaNotCurrent)
	require.Contains(t, err.Error(), "durable: store not ready: pgstore: schema "+schema+" does not exist")
	require.Contains(t, err.Error(), "durable migrate up")
	require.NoError(t, e.Stop(ctx), "stopping an engine that did not start")
}
