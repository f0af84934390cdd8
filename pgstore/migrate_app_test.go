package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
)

// paymentsMigrations are an application's migrations, their objects in
// schema (so that the test's cleanup drops them): a type and a table that
// uses it, as the user of issue #33 created in their own code at start-up,
// then a row written by Go code that counts its calls.
func paymentsMigrations(schema string, calls *atomic.Int32) []pgstore.AppMigration {
	q := pgx.Identifier{schema}.Sanitize()
	return []pgstore.AppMigration{
		{
			Version: 1, Name: "create_payments",
			Up: fmt.Sprintf(`CREATE TYPE %[1]s.payment_state AS ENUM ('new', 'paid');
CREATE TABLE %[1]s.payments (id bigint PRIMARY KEY, state %[1]s.payment_state NOT NULL)`, q),
			Down: fmt.Sprintf(`DROP TABLE %[1]s.payments; DROP TYPE %[1]s.payment_state`, q),
		},
		{
			Version: 2, Name: "seed_payment",
			UpFunc: func(ctx context.Context, tx pgx.Tx) error {
				calls.Add(1)
				_, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.payments VALUES (1, 'new')`, q))
				return err
			},
			DownFunc: func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %s.payments WHERE id = 1`, q))
				return err
			},
		},
	}
}

// appApplied lists the versions of the application migrations applied to
// schema.
func appApplied(t *testing.T, pool *pgxpool.Pool, schema string, app []pgstore.AppMigration) []int {
	t.Helper()
	st, err := pgstore.AppMigrationStatus(ctx, pool, schema, app)
	require.NoError(t, err)
	var out []int
	for _, m := range st {
		if m.Applied {
			require.False(t, m.AppliedAt.IsZero())
			out = append(out, m.Version)
		}
	}
	return out
}

// TestAppMigrationsConcurrently starts several workers at once on a fresh
// schema, each with its own pool, each migrating durable's schema and the
// application's migrations: every one succeeds, and each application
// migration runs once (a second CREATE TYPE would fail, and UpFunc counts
// its calls).
func TestAppMigrationsConcurrently(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, pool)
	var calls atomic.Int32
	app := paymentsMigrations(schema, &calls)
	const n = 6
	pools := make([]*pgxpool.Pool, n)
	for i := range pools {
		p, err := pgxpool.New(ctx, pgtest.URL(t))
		require.NoError(t, err)
		t.Cleanup(p.Close)
		pools[i] = p
	}
	results := make([]*pgstore.MigrateResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = pgstore.Migrate(ctx, pools[i], &pgstore.MigrateConfig{Schema: schema, App: app})
		})
	}
	close(start)
	wg.Wait()
	ran := 0
	for i := range n {
		require.NoError(t, errs[i], "worker %d", i)
		if len(results[i].App) > 0 {
			require.Equal(t, []pgstore.AppMigrationRef{{Version: 1, Name: "create_payments"}, {Version: 2, Name: "seed_payment"}},
				results[i].App)
			require.Equal(t, allVersions(t, pool), results[i].Versions, "durable's first, in the same call")
			ran++
		}
	}
	require.Equal(t, 1, ran, "exactly one worker applies the migrations")
	require.Equal(t, int32(1), calls.Load(), "UpFunc ran once")
	require.Equal(t, []int{1, 2}, appApplied(t, pool, schema, app))
	require.Equal(t, allVersions(t, pool), applied(t, pool, schema))
	var rows int
	require.NoError(t, pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.payments`, pgx.Identifier{schema}.Sanitize())).Scan(&rows))
	require.Equal(t, 1, rows)

	// Once applied, they are not applied again; a new one is.
	res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, App: app})
	require.NoError(t, err)
	require.Empty(t, res.App)
	app = append(app, pgstore.AppMigration{Version: 3, Name: "index", Up: fmt.Sprintf(
		`CREATE INDEX payments_state_idx ON %s.payments (state)`, pgx.Identifier{schema}.Sanitize())})
	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, App: app})
	require.NoError(t, err)
	require.Empty(t, res.Versions)
	require.Equal(t, []pgstore.AppMigrationRef{{Version: 3, Name: "index"}}, res.App)
	require.Equal(t, int32(1), calls.Load())
}

// TestAppMigrationError: a failing application migration is an
// *AppMigrationError that names it and says it is the application's, and
// the whole call rolls back: durable's migrations of that call, the
// application's before it, and its record table.
func TestAppMigrationError(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, c := range []struct {
		name string
		bad  pgstore.AppMigration
		want func(t *testing.T, err error)
	}{
		{"sql", pgstore.AppMigration{Version: 7, Name: "broken", Up: `CREATE TABLE pg_catalog.nope (id int); SELECT 1`},
			func(t *testing.T, err error) {
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr, "the database's error is kept")
			}},
		{"func", pgstore.AppMigration{Version: 7, Name: "broken", UpFunc: func(context.Context, pgx.Tx) error {
			return errors.New("out of coffee")
		}}, func(t *testing.T, err error) { require.ErrorContains(t, err, "out of coffee") }},
		{"panic", pgstore.AppMigration{Version: 7, Name: "broken", UpFunc: func(context.Context, pgx.Tx) error {
			panic("boom")
		}}, func(t *testing.T, err error) { require.ErrorContains(t, err, "panic: boom") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema := pgtest.EmptySchema(t, pool)
			var calls atomic.Int32
			app := append(paymentsMigrations(schema, &calls), c.bad)
			_, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, App: app})
			var ae *pgstore.AppMigrationError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, 7, ae.Version)
			require.Equal(t, "broken", ae.Name)
			require.Equal(t, pgstore.Up, ae.Direction)
			require.NotErrorIs(t, err, pgstore.ErrInvalidAppMigration)
			require.ErrorContains(t, err, "application migration 007_broken up (the application's own migration, not durable's)")
			require.ErrorContains(t, err, "nothing was changed")
			c.want(t, err)

			require.Empty(t, applied(t, pool, schema), "durable's migrations of the call rolled back")
			require.False(t, tableExists(t, pool, schema, "payments"), "the application's earlier migrations rolled back")
			require.False(t, tableExists(t, pool, schema, "app_migrations"))
			require.Empty(t, appApplied(t, pool, schema, app))
		})
	}
}

func TestAppMigrationsValidation(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ok := pgstore.AppMigration{Version: 1, Name: "a", Up: "SELECT 1"}
	noop := func(context.Context, pgx.Tx) error { return nil }
	for _, c := range []struct {
		app  []pgstore.AppMigration
		want string
	}{
		{[]pgstore.AppMigration{{Version: 0, Name: "a", Up: "SELECT 1"}}, "version 0: it must be positive"},
		{[]pgstore.AppMigration{{Version: -3, Name: "a", Up: "SELECT 1"}}, "version -3: it must be positive"},
		{[]pgstore.AppMigration{ok, {Version: 1, Name: "b", Up: "SELECT 2"}}, `version 1 is given twice (also to "a")`},
		{[]pgstore.AppMigration{{Version: 2, Up: "SELECT 1"}}, "a Name is required"},
		{[]pgstore.AppMigration{{Version: 2, Name: "a\nb", Up: "SELECT 1"}}, "control characters"},
		{[]pgstore.AppMigration{{Version: 2, Name: "a\xffb", Up: "SELECT 1"}}, "not valid UTF-8"},
		{[]pgstore.AppMigration{{Version: 2, Name: "a"}}, "its Up SQL is empty"},
		{[]pgstore.AppMigration{{Version: 2, Name: "a", Up: " \n\t"}}, "its Up SQL is empty"},
		{[]pgstore.AppMigration{{Version: 2, Name: "a", Up: "SELECT 1", UpFunc: noop}}, "both Up and UpFunc"},
		{[]pgstore.AppMigration{{Version: 2, Name: "a", Up: "SELECT 1", Down: "  "}}, "Down SQL is blank"},
		{[]pgstore.AppMigration{{Version: 2, Name: "a", Up: "SELECT 1", Down: "SELECT 1", DownFunc: noop}}, "both Down and DownFunc"},
	} {
		err := pgstore.ValidateAppMigrations(c.app)
		require.ErrorIs(t, err, pgstore.ErrInvalidAppMigration, c.want)
		require.ErrorContains(t, err, "pgstore: invalid application migration ")
		require.ErrorContains(t, err, c.want)
		var ae *pgstore.AppMigrationError
		require.ErrorAs(t, err, &ae)
		require.Zero(t, ae.Direction)

		schema := pgtest.EmptySchema(t, pool)
		_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, App: c.app})
		require.ErrorIs(t, err, pgstore.ErrInvalidAppMigration, c.want)
		require.Empty(t, applied(t, pool, schema), "nothing ran")
		_, err = pgstore.AppMigrationStatus(ctx, pool, schema, c.app)
		require.ErrorIs(t, err, pgstore.ErrInvalidAppMigration, c.want)
	}
	require.NoError(t, pgstore.ValidateAppMigrations([]pgstore.AppMigration{ok, {Version: 20260129150405, Name: "ts", UpFunc: noop}}))
	require.NoError(t, pgstore.ValidateAppMigrations(nil))

	_, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: pgtest.NewSchemaName(), Revert: pgstore.RevertApp})
	require.ErrorContains(t, err, "Revert app is for Down")
	_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: pgtest.NewSchemaName(), Direction: pgstore.Down, Revert: 9})
	require.ErrorContains(t, err, "invalid MigrateConfig.Revert 9")
	for _, s := range []string{"durable", "app", "all"} {
		r, err := pgstore.ParseRevert(s)
		require.NoError(t, err)
		require.Equal(t, s, r.String())
	}
	_, err = pgstore.ParseRevert("mine")
	require.ErrorContains(t, err, "want durable, app or all")
}

func TestAppMigrationsFS(t *testing.T) {
	t.Parallel()
	files := fstest.MapFS{
		"db/001_create_payments.up.sql":   {Data: []byte("CREATE TABLE payments (id int)")},
		"db/001_create_payments.down.sql": {Data: []byte("DROP TABLE payments")},
		"db/2_add-index.up.sql":           {Data: []byte("CREATE INDEX ON payments (id)")},
		"db/README.md":                    {Data: []byte("not a migration")},
		"db/old/009_x.up.sql":             {Data: []byte("ignored: a subdirectory")},
	}
	app, err := pgstore.AppMigrationsFS(files, "db")
	require.NoError(t, err)
	require.Equal(t, []pgstore.AppMigration{
		{Version: 1, Name: "create_payments", Up: "CREATE TABLE payments (id int)", Down: "DROP TABLE payments"},
		{Version: 2, Name: "add-index", Up: "CREATE INDEX ON payments (id)"},
	}, app)
	require.NoError(t, pgstore.ValidateAppMigrations(app))

	for name, c := range map[string]struct {
		files      fstest.MapFS
		file, want string
	}{
		"no version":   {fstest.MapFS{"payments.up.sql": {Data: []byte("SELECT 1")}}, "payments.up.sql", "does not match NNN_name.up.sql"},
		"no direction": {fstest.MapFS{"001_payments.sql": {Data: []byte("SELECT 1")}}, "001_payments.sql", "does not match"},
		"space":        {fstest.MapFS{"001_my payments.up.sql": {Data: []byte("SELECT 1")}}, "001_my payments.up.sql", "does not match"},
		"zero":         {fstest.MapFS{"000_payments.up.sql": {Data: []byte("SELECT 1")}}, "000_payments.up.sql", "must be a positive number"},
		"empty":        {fstest.MapFS{"001_payments.up.sql": {Data: []byte(" \n")}}, "001_payments.up.sql", "the file is empty"},
		"down only":    {fstest.MapFS{"001_payments.down.sql": {Data: []byte("SELECT 1")}}, "001_payments.down.sql", "there is no 001_payments.up.sql"},
		"two names": {fstest.MapFS{"001_a.up.sql": {Data: []byte("SELECT 1")}, "001_b.down.sql": {Data: []byte("SELECT 1")}},
			"001_b.down.sql", "files of two names (also 001_a.up.sql)"},
		"twice": {fstest.MapFS{"001_a.up.sql": {Data: []byte("SELECT 1")}, "1_a.up.sql": {Data: []byte("SELECT 1")}},
			"1_a.up.sql", "two up files (also 001_a.up.sql)"},
	} {
		_, err := pgstore.AppMigrationsFS(c.files, ".")
		require.ErrorIs(t, err, pgstore.ErrInvalidAppMigration, name)
		var ae *pgstore.AppMigrationError
		require.ErrorAs(t, err, &ae, name)
		require.Equal(t, c.file, ae.File, name)
		require.ErrorContains(t, err, c.want, name)
	}
	_, err = pgstore.AppMigrationsFS(files, "missing")
	require.Error(t, err)
	require.NotErrorIs(t, err, pgstore.ErrInvalidAppMigration)
}

// TestAppMigrationsDown: Down reverts durable's migrations only unless
// Revert says otherwise; RevertApp reverts the application's newest first,
// and refuses, changing nothing, one without a Down or one this program
// does not declare; RevertAll reverts the application's, then durable's.
func TestAppMigrationsDown(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, pool)
	all := allVersions(t, pool)
	var calls atomic.Int32
	app := paymentsMigrations(schema, &calls)
	_, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, App: app})
	require.NoError(t, err)

	res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down, Steps: 1, App: app})
	require.NoError(t, err)
	require.Equal(t, all[len(all)-1:], res.Versions, "the default reverts durable's")
	require.Empty(t, res.App)
	require.Equal(t, []int{1, 2}, appApplied(t, pool, schema, app))
	_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, App: app})
	require.NoError(t, err)

	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down, Steps: 1,
		Revert: pgstore.RevertApp, App: app})
	require.NoError(t, err)
	require.Empty(t, res.Versions)
	require.Equal(t, []pgstore.AppMigrationRef{{Version: 2, Name: "seed_payment"}}, res.App, "the newest first")
	require.Equal(t, []int{1}, appApplied(t, pool, schema, app))
	require.Equal(t, all, applied(t, pool, schema))

	// A migration without Down cannot be reverted, nor can one the schema
	// records that this program does not declare: nothing is reverted.
	irreversible := append([]pgstore.AppMigration{}, app...)
	irreversible[0].Down = ""
	_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down,
		Revert: pgstore.RevertAll, App: irreversible})
	var ae *pgstore.AppMigrationError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, pgstore.Down, ae.Direction)
	require.ErrorContains(t, err, "application migration 001_create_payments down")
	require.ErrorContains(t, err, "it has no Down")
	require.Equal(t, []int{1}, appApplied(t, pool, schema, app))
	require.Equal(t, all, applied(t, pool, schema))

	extra := append(app, pgstore.AppMigration{Version: 5, Name: "later", Up: "SELECT 1", Down: "SELECT 2"})
	_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, App: extra})
	require.NoError(t, err)
	st, err := pgstore.AppMigrationStatus(ctx, pool, schema, app[:1])
	require.NoError(t, err)
	require.Len(t, st, 3)
	require.Equal(t, []bool{false, true, true}, []bool{st[0].Undeclared, st[1].Undeclared, st[2].Undeclared})
	require.Equal(t, "seed_payment", st[1].Name, "named by its record")
	require.Equal(t, "later", st[2].Name)
	require.True(t, st[1].Applied && st[2].Applied)
	_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down,
		Revert: pgstore.RevertApp, App: app})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 5, ae.Version)
	require.ErrorContains(t, err, "this program does not declare it")
	require.Equal(t, []int{1, 2, 5}, appApplied(t, pool, schema, extra))

	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down,
		Revert: pgstore.RevertAll, App: extra})
	require.NoError(t, err)
	require.Equal(t, []pgstore.AppMigrationRef{{Version: 5, Name: "later"}, {Version: 2, Name: "seed_payment"},
		{Version: 1, Name: "create_payments"}}, res.App)
	require.Len(t, res.Versions, len(all))
	require.Equal(t, all[len(all)-1], res.Versions[0], "durable's newest first, after the application's")
	require.Empty(t, appApplied(t, pool, schema, extra))
	require.Empty(t, applied(t, pool, schema))
	require.False(t, tableExists(t, pool, schema, "payments"))

	// Steps count durable's and the application's together.
	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Steps: len(all) + 1, App: app})
	require.NoError(t, err)
	require.Equal(t, all, res.Versions)
	require.Equal(t, []pgstore.AppMigrationRef{{Version: 1, Name: "create_payments"}}, res.App)
}

// TestAppMigrationsUnderDurableLock: application migrations wait for the
// advisory lock of durable's own migrations, and run once it is released.
func TestAppMigrationsUnderDurableLock(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, pool)
	var calls atomic.Int32
	app := paymentsMigrations(schema, &calls)
	// Durable's migrations are applied: only the application's are left.
	_, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err)
	key := pgstore.MigrateLockKey(schema)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", key)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, App: app})
		done <- err
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1)`,
			int64(uint64(key)>>32), int64(uint32(key))).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 5*time.Millisecond, "the application's migrations wait for durable's migration lock")
	require.Zero(t, calls.Load())
	require.False(t, tableExists(t, pool, schema, "payments"))
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, <-done)
	require.Equal(t, int32(1), calls.Load())
	require.True(t, tableExists(t, pool, schema, "payments"))
}

// TestAppMigrationsLeastPrivilege: on a schema where durable's migrations
// and the application's are applied, a role without DDL rights may call
// Migrate with the application's migrations: it reads the version tables
// and returns, without a lock or DDL.
func TestAppMigrationsLeastPrivilege(t *testing.T) {
	t.Parallel()
	admin := pgtest.Pool(t)
	schema := pgtest.EmptySchema(t, admin)
	var calls atomic.Int32
	app := paymentsMigrations(schema, &calls)
	_, err := pgstore.Migrate(ctx, admin, &pgstore.MigrateConfig{Schema: schema, App: app})
	require.NoError(t, err)
	pool := leastPrivilegeRole(t, admin, schema)
	res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, App: app})
	require.NoError(t, err, "Migrate up on a current schema needs no DDL")
	require.Empty(t, res.Versions)
	require.Empty(t, res.App)
	require.Equal(t, []int{1, 2}, appApplied(t, pool, schema, app))
	require.Equal(t, int32(1), calls.Load())
}
