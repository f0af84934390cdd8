package durablecli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
)

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	t.Cleanup(func() {
		_, err := pgtest.Pool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		require.NoError(t, err)
	})
	db := []string{"--database-url", url, "--schema", schema}
	code, out, errOut := runCLI(t, append([]string{"migrate", "status"}, db...)...)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `001\s+initial\s+no`, out)

	code, out, errOut = runCLI(t, append([]string{"migrate", "up"}, db...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "applied migration 001")
	code, out, _ = runCLI(t, append([]string{"migrate", "up"}, db...)...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing to do")
	code, out, _ = runCLI(t, append([]string{"migrate", "status"}, db...)...)
	require.Equal(t, 0, code)
	require.NotContains(t, out, " no\n")

	states, err := pgstore.MigrationStatus(context.Background(), pgtest.Pool(t), schema)
	require.NoError(t, err)
	newest := states[len(states)-1].Version
	code, out, errOut = runCLI(t, append([]string{"migrate", "down"}, db...)...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, fmt.Sprintf("schema %s: reverted migration %03d\n", schema, newest), out, "down reverts the newest")

	code, out, _ = runCLI(t, "migrate", "sql", "--schema", "my_schema")
	require.Equal(t, 0, code)
	require.Contains(t, out, `CREATE TABLE IF NOT EXISTS "my_schema".migrations`)
	require.Contains(t, out, `CREATE TABLE "my_schema".tasks`)

	code, _, errOut = runCLI(t, "migrate", "sideways", "--database-url", url)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown action "sideways"`)
	code, _, errOut = runCLI(t, "migrate", "up", "--database-url", "")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--database-url")
	code, _, errOut = runCLI(t, "migrate", "sql", "--direction", "around")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "around")
}

// appConfig is testConfig with the program's own migrations, their
// objects in schema: a type and a table that uses it, then a row written
// by Go code that counts its calls, then extra.
func appConfig(schema string, calls *atomic.Int32, extra ...pgstore.AppMigration) Config {
	q := pgx.Identifier{schema}.Sanitize()
	cfg := testConfig()
	cfg.Migrations = append([]pgstore.AppMigration{
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
			Down: fmt.Sprintf(`DELETE FROM %s.payments`, q),
		},
	}, extra...)
	return cfg
}

func runWith(t *testing.T, cfg Config, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), cfg, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestWorkersApplyAppMigrationsOnce starts several workers and "migrate
// up"s of a program with migrations of its own at once on a fresh schema:
// each serves or succeeds, and each migration of the program runs once
// (a second CREATE TYPE would fail, and the Go one counts its calls).
func TestWorkersApplyAppMigrationsOnce(t *testing.T) {
	t.Parallel()
	p := newPG(t, false)
	var calls atomic.Int32
	cfg := appConfig(p.Schema, &calls)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const workers, migrators = 3, 2
	start := make(chan struct{})
	var wg sync.WaitGroup
	logs := make([]*clitest.Lines, workers)
	codes := make(chan int, workers+migrators)
	for i := range workers {
		pr, pw := io.Pipe()
		logs[i] = clitest.NewLines(pr)
		wg.Go(func() {
			<-start
			codes <- Run(ctx, cfg, p.Flags("worker", "--worker-id", fmt.Sprintf("app-mig-%d", i)), io.Discard, pw)
			pw.Close()
		})
	}
	outs := make([]string, migrators)
	for i := range migrators {
		wg.Go(func() {
			<-start
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), cfg, p.Flags("migrate", "up"), &stdout, &stderr)
			outs[i] = stdout.String() + stderr.String()
			codes <- code
		})
	}
	close(start)
	for i := range workers {
		logs[i].WaitFor(t, "durable worker: serving", 60*time.Second)
	}
	cancel() // the workers drain and exit 0; the migrators run to their end
	wg.Wait()
	close(codes)
	for code := range codes {
		require.Equal(t, 0, code, "outputs: %q", outs)
	}
	require.Equal(t, int32(1), calls.Load(), "the Go migration ran once")
	states, err := pgstore.AppMigrationStatus(context.Background(), pgtest.Pool(t), p.Schema, cfg.Migrations)
	require.NoError(t, err)
	require.Len(t, states, 2)
	require.True(t, states[0].Applied && states[1].Applied)

	code, out, errOut := runWith(t, cfg, p.Flags("migrate", "status")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "this program's own migrations (table app_migrations):")
	require.Regexp(t, `(?m)^001\s+create_payments\s+\d{4}-`, out)
	require.Regexp(t, `(?m)^002\s+seed_payment\s+\d{4}-`, out)
	require.NotContains(t, out, " no\n")
}

// TestMigrateCommandAppMigrations: "migrate up", "status" and "down" of a
// program with migrations of its own, and the errors that name them.
func TestMigrateCommandAppMigrations(t *testing.T) {
	t.Parallel()
	p := newPG(t, false)
	var calls atomic.Int32
	cfg := appConfig(p.Schema, &calls)

	code, out, errOut := runWith(t, cfg, p.Flags("migrate", "status")...)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^001\s+initial\s+no$`, out)
	require.Regexp(t, `(?s)this program's own migrations.*\n001\s+create_payments\s+no\n002\s+seed_payment\s+no\n`, out)

	// A worker that does not migrate names the program's migrations it lacks.
	code, _, errOut = runWith(t, cfg, p.Flags("worker", "--no-migrate")...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "lacks this program's own migrations 001_create_payments, 002_seed_payment")
	require.Contains(t, errOut, "run `durable migrate up`")

	code, out, errOut = runWith(t, cfg, p.Flags("migrate", "up")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "applied migration 001\n")
	require.True(t, strings.HasSuffix(out, fmt.Sprintf("schema %[1]s: applied application migration 001_create_payments\n"+
		"schema %[1]s: applied application migration 002_seed_payment\n", p.Schema)), "after durable's:\n%s", out)
	code, out, _ = runWith(t, cfg, p.Flags("migrate", "up")...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing to do")

	// down reverts durable's unless --revert says otherwise.
	code, out, errOut = runWith(t, cfg, p.Flags("migrate", "down", "--revert", "app")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, fmt.Sprintf("schema %s: reverted application migration 002_seed_payment\n", p.Schema), out)
	code, out, errOut = runWith(t, cfg, p.Flags("migrate", "down")...)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^schema \S+: reverted migration \d{3}\n$`, out)
	code, out, errOut = runWith(t, cfg, p.Flags("migrate", "status")...)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?s)this program's own migrations.*\n001\s+create_payments\s+\d{4}-\S+\n002\s+seed_payment\s+no\n`, out)
	code, out, errOut = runWith(t, cfg, p.Flags("migrate", "up")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "applied application migration 002_seed_payment")
	require.Equal(t, int32(2), calls.Load(), "applied, reverted and applied again")

	// A failing migration of the program's own says so, and nothing of the
	// command is applied.
	broken := appConfig(p.Schema, &calls, pgstore.AppMigration{Version: 3, Name: "broken",
		Up: fmt.Sprintf(`CREATE TABLE %s.refunds (id int); CREATE TABLE %s.payments (id int)`,
			pgx.Identifier{p.Schema}.Sanitize(), pgx.Identifier{p.Schema}.Sanitize())})
	code, out, errOut = runWith(t, broken, p.Flags("migrate", "up")...)
	require.Equal(t, 1, code, out)
	require.Contains(t, errOut, "durable migrate up: pgstore: application migration 003_broken up "+
		"(the application's own migration, not durable's) failed; the migration transaction rolled back, so nothing was changed: ")
	require.Contains(t, errOut, `relation "payments" already exists`)
	code, _, errOut = runWith(t, broken, p.Flags("worker")...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "application migration 003_broken up (the application's own migration, not durable's)")
	var refunds bool
	require.NoError(t, pgtest.Pool(t).QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`,
		pgx.Identifier{p.Schema, "refunds"}.Sanitize()).Scan(&refunds))
	require.False(t, refunds, "nothing of the failed migration is applied")

	// Bad command lines and bad Config.
	code, _, errOut = runWith(t, cfg, p.Flags("migrate", "up", "--revert", "app")...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--revert is for down")
	code, _, errOut = runWith(t, cfg, p.Flags("migrate", "down", "--revert", "mine")...)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "want durable, app or all")
	dup := appConfig(p.Schema, &calls, pgstore.AppMigration{Version: 2, Name: "again", Up: "SELECT 1"})
	code, _, errOut = runWith(t, dup, p.Flags("migrate", "up")...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `durable: invalid durablecli.Config: Migrations: pgstore: invalid application migration 002_again: `+
		`version 2 is given twice (also to "seed_payment")`)

	code, out, errOut = runWith(t, cfg, p.Flags("migrate", "down", "--revert", "all", "--steps", "1000")...)
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(out, fmt.Sprintf("schema %[1]s: reverted application migration 002_seed_payment\n"+
		"schema %[1]s: reverted application migration 001_create_payments\nschema %[1]s: reverted migration ", p.Schema)), out)
	require.True(t, strings.HasSuffix(out, "reverted migration 001\n"), out)
}
