package pgstore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
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
