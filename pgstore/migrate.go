package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Direction is the direction of a migration.
type Direction int

const (
	// Up applies migrations.
	Up Direction = iota + 1
	// Down reverts migrations.
	Down
)

// String returns "up" or "down".
func (d Direction) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	}
	return "unknown"
}

// ParseDirection parses "up" or "down".
func ParseDirection(s string) (Direction, error) {
	switch s {
	case "up":
		return Up, nil
	case "down":
		return Down, nil
	}
	return 0, fmt.Errorf("pgstore: unknown migration direction %q (want up or down)", s)
}

// MigrateConfig configures Migrate.
type MigrateConfig struct {
	// Schema is the schema to migrate; it is created if missing. Defaults to
	// durable.
	Schema string
	// Direction is Up or Down. Defaults to Up.
	Direction Direction
	// Steps is the most migrations to apply or revert, durable's and the
	// application's counted together; 0 means all.
	Steps int
	// App are the application's own migrations (see AppMigration). Up
	// applies the pending ones after durable's, in version order, in the
	// same transaction and under the same lock; Down reverts them only as
	// Revert says. Defaults to none.
	App []AppMigration
	// Revert selects what Down reverts: durable's migrations
	// (RevertDurable), the application's (RevertApp), or the
	// application's and then durable's (RevertAll). Up refuses any other
	// than the default. Defaults to RevertDurable: the application's
	// tables are never dropped unless asked.
	Revert Revert
}

// MigrateResult reports what Migrate did.
type MigrateResult struct {
	// Direction is the direction Migrate was asked for.
	Direction Direction
	// Versions lists durable's migrations applied (Up) or reverted (Down),
	// in the order it ran them; empty when there was nothing to do.
	Versions []int
	// App lists the application's migrations applied or reverted, in the
	// order it ran them (after durable's going up, before them going
	// down).
	App []AppMigrationRef
}

// AppMigrationRef names an application migration.
type AppMigrationRef struct {
	// Version is the migration's AppMigration.Version.
	Version int
	// Name is the migration's AppMigration.Name.
	Name string
}

// MigrationState is the state of one migration in a schema.
type MigrationState struct {
	// Version is the migration's number.
	Version int
	// Name is the migration's name, from its file name.
	Name string
	// Applied reports whether the schema has it.
	Applied bool
	// AppliedAt is when it was applied; zero when not applied.
	AppliedAt time.Time
	// Undeclared reports an application migration that the schema
	// records but the migrations given to AppMigrationStatus do not
	// declare: applied by another build of the application.
	Undeclared bool
}

// migration is one numbered migration with its SQL templates.
type migration struct {
	version  int
	name     string
	up, down string
}

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("pgstore: read migrations: %w", err)
	}
	byVersion := make(map[int]*migration)
	for _, e := range entries {
		base := e.Name()
		stem, dir, ok := strings.Cut(strings.TrimSuffix(base, ".sql"), ".")
		num, name, ok2 := strings.Cut(stem, "_")
		v, err := strconv.Atoi(num)
		if !ok || !ok2 || err != nil || (dir != "up" && dir != "down") {
			return nil, fmt.Errorf("pgstore: bad migration file name %q", base)
		}
		body, err := migrationFS.ReadFile(path.Join("migrations", base))
		if err != nil {
			return nil, fmt.Errorf("pgstore: read migration %s: %w", base, err)
		}
		m := byVersion[v]
		if m == nil {
			m = &migration{version: v, name: name}
			byVersion[v] = m
		}
		if dir == "up" {
			m.up = string(body)
		} else {
			m.down = string(body)
		}
	}
	var out []migration
	for _, m := range byVersion {
		if m.up == "" || m.down == "" {
			return nil, fmt.Errorf("pgstore: migration %03d lacks its up or down file", m.version)
		}
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgstore: migrations are not numbered 1, 2, ...: found %03d at position %d", m.version, i+1)
		}
	}
	return out, nil
}

const versionTableSQL = `CREATE TABLE IF NOT EXISTS {{schema}}.migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// Migrate applies or reverts migrations of a schema in one transaction,
// under a transaction advisory lock derived from the schema name: concurrent
// migrators of one schema run one after the other, and the later ones find
// nothing left to do. Applying when everything is applied is a no-op.
//
// The application's migrations (MigrateConfig.App) run in that
// transaction and under that lock too: Up applies them after durable's,
// Down reverts them first, and only when MigrateConfig.Revert asks. An
// invalid one is an *AppMigrationError matching ErrInvalidAppMigration,
// returned before Migrate connects; one that fails is an
// *AppMigrationError naming it, and the transaction rolls back whole.
//
// Up first reads the schema's migrations tables, without DDL or locks: when
// every migration is applied it returns at once, so a role with only USAGE
// on the schema and SELECT on its tables may call it on a migrated schema.
// Only when there is work does it create the schema and migrations tables if
// needed, which needs CREATE rights.
func Migrate(ctx context.Context, pool *pgxpool.Pool, cfg *MigrateConfig) (*MigrateResult, error) {
	if cfg == nil {
		cfg = &MigrateConfig{}
	}
	schema, err := checkSchema(cfg.Schema)
	if err != nil {
		return nil, err
	}
	dir := cfg.Direction
	if dir == 0 {
		dir = Up
	}
	if dir != Up && dir != Down {
		return nil, fmt.Errorf("pgstore: invalid migration direction %d", dir)
	}
	if cfg.Steps < 0 {
		return nil, fmt.Errorf("pgstore: negative migration steps %d", cfg.Steps)
	}
	switch {
	case cfg.Revert < RevertDurable || cfg.Revert > RevertAll:
		return nil, fmt.Errorf("pgstore: invalid MigrateConfig.Revert %d", cfg.Revert)
	case dir == Up && cfg.Revert != RevertDurable:
		return nil, fmt.Errorf("pgstore: MigrateConfig.Revert %s is for Down: Up applies durable's migrations, then the application's", cfg.Revert)
	}
	app, err := sortedApp(cfg.App)
	if err != nil {
		return nil, err
	}
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	res := &MigrateResult{Direction: dir}
	if dir == Up && upToDate(ctx, pool, schema, all) && appUpToDate(ctx, pool, schema, app) {
		return res, nil
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("migrate", schema)); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
		if _, err := tx.Exec(ctx, render(schema, versionTableSQL)); err != nil {
			return fmt.Errorf("create version table: %w", err)
		}
		if dir == Up && len(app) > 0 {
			if _, err := tx.Exec(ctx, render(schema, appTableSQL)); err != nil {
				return fmt.Errorf("create application version table: %w", err)
			}
		}
		todo, err := migrationPlan(ctx, tx, schema, dir, cfg.Revert, all, app)
		if err != nil {
			return err
		}
		if cfg.Steps > 0 && len(todo) > cfg.Steps {
			todo = todo[:cfg.Steps]
		}
		for _, st := range todo {
			if st.app == nil {
				if err := runMigration(ctx, tx, schema, st.own, dir); err != nil {
					return err
				}
				res.Versions = append(res.Versions, st.own.version)
				continue
			}
			if st.refused != nil {
				return st.refused
			}
			if err := runApp(ctx, tx, schema, st.app, dir); err != nil {
				return err
			}
			res.App = append(res.App, AppMigrationRef{Version: st.app.Version, Name: st.app.Name})
		}
		return nil
	})
	if err != nil {
		var ae *AppMigrationError
		if errors.As(err, &ae) {
			return nil, err // it names the migration and says nothing was applied
		}
		return nil, fmt.Errorf("pgstore: migrate %s %s: %w", schema, dir, err)
	}
	return res, nil
}

// migrateStep is one migration Migrate runs: durable's own (own) or the
// application's (app). refused, when set, is why an application migration
// cannot be reverted: Migrate returns it when it reaches the step.
type migrateStep struct {
	own     migration
	app     *AppMigration
	refused error
}

// migrationPlan lists the migrations to run, in order, under the lock: going up,
// durable's pending ones then the application's; going down, the applied
// ones of the sets that revert selects, the application's first, newest
// first.
func migrationPlan(ctx context.Context, tx pgx.Tx, schema string, dir Direction, revert Revert, all []migration, app []AppMigration) ([]migrateStep, error) {
	var todo []migrateStep
	own := dir == Up || revert != RevertApp
	withApp := (dir == Up && len(app) > 0) || (dir == Down && revert != RevertDurable)
	var ownApplied map[int]time.Time
	if own {
		var err error
		if ownApplied, err = appliedVersions(ctx, tx, schema); err != nil {
			return nil, err
		}
	}
	var appApplied map[int]appRecord
	if withApp {
		var err error
		if appApplied, err = appliedApp(ctx, tx, schema); err != nil {
			return nil, err
		}
	}
	if dir == Up {
		for _, m := range all {
			if _, ok := ownApplied[m.version]; !ok {
				todo = append(todo, migrateStep{own: m})
			}
		}
		for i := range app {
			if _, ok := appApplied[app[i].Version]; !ok {
				todo = append(todo, migrateStep{app: &app[i]})
			}
		}
		return todo, nil
	}
	if withApp {
		byVersion := make(map[int]*AppMigration, len(app))
		for i := range app {
			byVersion[app[i].Version] = &app[i]
		}
		versions := make([]int, 0, len(appApplied))
		for v := range appApplied {
			versions = append(versions, v)
		}
		slices.Sort(versions)
		for _, v := range slices.Backward(versions) {
			m := byVersion[v]
			st := migrateStep{app: m}
			switch {
			case m == nil:
				m = &AppMigration{Version: v, Name: appApplied[v].name}
				st = migrateStep{app: m, refused: &AppMigrationError{Version: v, Name: m.Name, Direction: Down,
					Err: errors.New("the schema records it, but this program does not declare it: it cannot revert it")}}
			case m.Down == "" && m.DownFunc == nil:
				st.refused = &AppMigrationError{Version: v, Name: m.Name, Direction: Down,
					Err: errors.New("it has no Down (or DownFunc): it cannot be reverted")}
			}
			todo = append(todo, st)
		}
	}
	if own {
		for _, m := range slices.Backward(all) {
			if _, ok := ownApplied[m.version]; ok {
				todo = append(todo, migrateStep{own: m})
			}
		}
	}
	return todo, nil
}

func runMigration(ctx context.Context, tx pgx.Tx, schema string, m migration, dir Direction) error {
	body, book := m.up, render(schema, `INSERT INTO {{schema}}.migrations (version, name) VALUES ($1, $2)`)
	args := []any{m.version, m.name}
	if dir == Down {
		body, book = m.down, render(schema, `DELETE FROM {{schema}}.migrations WHERE version = $1`)
		args = args[:1]
	}
	// Without arguments pgx uses the simple protocol, which runs a
	// multi-statement script.
	if _, err := tx.Exec(ctx, render(schema, body)); err != nil {
		return fmt.Errorf("migration %03d_%s %s: %w", m.version, m.name, dir, err)
	}
	if _, err := tx.Exec(ctx, book, args...); err != nil {
		return fmt.Errorf("record migration %03d: %w", m.version, err)
	}
	return nil
}

func appliedVersions(ctx context.Context, q querier, schema string) (map[int]time.Time, error) {
	rows, err := q.Query(ctx, render(schema, `SELECT version, applied_at FROM {{schema}}.migrations`))
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	defer rows.Close()
	out := make(map[int]time.Time)
	for rows.Next() {
		var v int
		var at time.Time
		if err := rows.Scan(&v, &at); err != nil {
			return nil, fmt.Errorf("read applied migrations: %w", err)
		}
		out[v] = at
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	return out, nil
}

// MigrationStatus reports every known migration and whether it is applied
// to schema ("" means durable). A schema never migrated reports none applied.
func MigrationStatus(ctx context.Context, pool *pgxpool.Pool, schema string) ([]MigrationState, error) {
	schema, err := checkSchema(schema)
	if err != nil {
		return nil, err
	}
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`,
		pgx.Identifier{schema, "migrations"}.Sanitize()).Scan(&exists); err != nil {
		return nil, fmt.Errorf("pgstore: migration status: %w", err)
	}
	applied := map[int]time.Time{}
	if exists {
		if applied, err = appliedVersions(ctx, pool, schema); err != nil {
			return nil, fmt.Errorf("pgstore: migration status: %w", err)
		}
	}
	out := make([]MigrationState, len(all))
	for i, m := range all {
		at, ok := applied[m.version]
		out[i] = MigrationState{Version: m.version, Name: m.name, Applied: ok, AppliedAt: at}
	}
	return out, nil
}

// MigrationSQL returns the SQL of every migration in one direction, for
// users who run their own migration tool: Up creates the schema and applies
// all migrations in order, Down reverts them all in reverse order. Both keep
// the version table current, so Migrate and MigrationStatus agree with a
// database migrated this way.
func MigrationSQL(schema string, dir Direction) (string, error) {
	schema, err := checkSchema(schema)
	if err != nil {
		return "", err
	}
	all, err := migrations()
	if err != nil {
		return "", err
	}
	q := pgx.Identifier{schema}.Sanitize()
	var sb strings.Builder
	fmt.Fprintf(&sb, "-- durable migrations for schema %s (%s)\n\n", q, dir)
	switch dir {
	case Up:
		fmt.Fprintf(&sb, "CREATE SCHEMA IF NOT EXISTS %s;\n\n%s;\n", q, render(schema, versionTableSQL))
		for _, m := range all {
			fmt.Fprintf(&sb, "\n-- %03d_%s.up.sql\n%s\nINSERT INTO %s.migrations (version, name) VALUES (%d, '%s');\n",
				m.version, m.name, strings.TrimSpace(render(schema, m.up)), q, m.version, m.name)
		}
	case Down:
		for _, m := range slices.Backward(all) {
			fmt.Fprintf(&sb, "\n-- %03d_%s.down.sql\n%s\nDELETE FROM %s.migrations WHERE version = %d;\n",
				m.version, m.name, strings.TrimSpace(render(schema, m.down)), q, m.version)
		}
	default:
		return "", errors.New("pgstore: migration direction must be up or down")
	}
	return sb.String(), nil
}
