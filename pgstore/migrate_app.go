package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AppMigration is a schema migration of the application that uses
// durable: its own tables, types and indexes (a payments table, say).
// Given to Migrate (MigrateConfig.App) or to the command line
// (durablecli.Config.Migrations), it runs under the advisory lock that
// guards durable's own migrations, after them, once: several workers that
// start together apply it once, the others wait for the lock and find it
// applied. It is recorded in the table app_migrations of durable's
// schema, apart from durable's own versions, in the transaction that runs
// it.
//
// A migration runs inside Migrate's transaction, so it must not contain
// statements PostgreSQL refuses in a transaction block (CREATE INDEX
// CONCURRENTLY, VACUUM, ...). Its SQL is run as written, with the
// connection's search_path: name the schema of your tables in it.
type AppMigration struct {
	// Version orders the migrations and identifies a migration once
	// applied: a positive number, unique among the application's (a
	// sequence, 1, 2, 3, or a timestamp such as 20260129150405). It is
	// counted apart from durable's own versions. A pending version lower
	// than an applied one (merged from a branch) is applied all the same.
	Version int
	// Name describes the migration in errors and in "migrate status"
	// (create_payments). Required.
	Name string
	// Up is the SQL that applies the migration; it may hold several
	// statements. Exactly one of Up and UpFunc is required.
	Up string
	// UpFunc applies the migration with Go code, in the migration's
	// transaction: what it does through tx commits with the migration's
	// record, or not at all.
	UpFunc func(ctx context.Context, tx pgx.Tx) error
	// Down is the SQL that reverts the migration. At most one of Down and
	// DownFunc; a migration with neither cannot be reverted, and Migrate
	// refuses to revert it (and everything else in that call).
	Down string
	// DownFunc reverts the migration with Go code, in the migration's
	// transaction.
	DownFunc func(ctx context.Context, tx pgx.Tx) error
}

// label is the migration's version and name, as in "003_create_payments".
func (m *AppMigration) label() string { return fmt.Sprintf("%03d_%s", m.Version, m.Name) }

// ErrInvalidAppMigration matches (with errors.Is) the *AppMigrationError
// that reports an application migration declared wrongly (a version that
// is not positive or is given twice, no Name, no Up, both Up and UpFunc,
// a file whose name is not NNN_name.up.sql or NNN_name.down.sql, ...).
// Migrate, AppMigrationStatus, ValidateAppMigrations and AppMigrationsFS
// report it before they change anything.
var ErrInvalidAppMigration = errors.New("pgstore: invalid application migration")

// AppMigrationError is the error of one application migration: declared
// wrongly (it matches ErrInvalidAppMigration and Direction is 0), or
// failed or refused as Migrate ran it (Direction is Up or Down). It names
// the migration and says that it is the application's, not durable's.
// When Migrate returns it, its transaction rolled back: neither that
// migration nor any other of the call was applied or reverted.
type AppMigrationError struct {
	// Version and Name identify the migration (0 and "" when a file name
	// could not be read).
	Version int
	Name    string
	// File is the file the migration was read from by AppMigrationsFS;
	// empty for a migration declared in Go.
	File string
	// Direction is what Migrate was doing: Up, Down, or 0 for a migration
	// declared wrongly.
	Direction Direction
	// Err is what went wrong: the database's error (a *pgconn.PgError),
	// UpFunc's or DownFunc's, or why the declaration is invalid.
	Err error
}

// Error names the application migration and what went wrong.
func (e *AppMigrationError) Error() string {
	var who string
	switch {
	case e.Version != 0 || e.Name != "":
		who = fmt.Sprintf("%03d_%s", e.Version, e.Name)
		if e.File != "" {
			who += " (" + e.File + ")"
		}
	default:
		who = strconv.Quote(e.File)
	}
	if errors.Is(e.Err, ErrInvalidAppMigration) {
		return fmt.Sprintf("pgstore: invalid application migration %s: %v", who, e.Err)
	}
	return fmt.Sprintf("pgstore: application migration %s %s (the application's own migration, not durable's) "+
		"failed; the migration transaction rolled back, so nothing was changed: %v", who, e.Direction, e.Err)
}

// Unwrap returns Err.
func (e *AppMigrationError) Unwrap() error { return e.Err }

// invalidApp is the reason an application migration is invalid; it
// matches ErrInvalidAppMigration.
type invalidApp string

func (r invalidApp) Error() string        { return string(r) }
func (r invalidApp) Is(target error) bool { return target == ErrInvalidAppMigration }

func invalid(m *AppMigration, file, format string, a ...any) *AppMigrationError {
	e := &AppMigrationError{File: file, Err: invalidApp(fmt.Sprintf(format, a...))}
	if m != nil {
		e.Version, e.Name = m.Version, m.Name
	}
	return e
}

// ValidateAppMigrations reports the first application migration of app
// declared wrongly, as an *AppMigrationError matching
// ErrInvalidAppMigration: a Version not positive or given twice, a Name
// empty or with control characters, no Up (or one of blanks only), both
// Up and UpFunc, a Down of blanks only, or both Down and DownFunc. Migrate
// checks the same before it connects; a test of the application may call
// it to check its migrations without a database.
func ValidateAppMigrations(app []AppMigration) error {
	_, err := sortedApp(app)
	return err
}

// sortedApp validates app and returns a copy in version order.
func sortedApp(app []AppMigration) ([]AppMigration, error) {
	seen := make(map[int]*AppMigration, len(app))
	for i := range app {
		m := &app[i]
		switch {
		case m.Version <= 0:
			return nil, invalid(m, "", "version %d: it must be positive", m.Version)
		case seen[m.Version] != nil:
			return nil, invalid(m, "", "version %d is given twice (also to %q)", m.Version, seen[m.Version].Name)
		case m.Name == "":
			return nil, invalid(m, "", "a Name is required")
		case !utf8.ValidString(m.Name):
			return nil, invalid(m, "", "its Name %q is not valid UTF-8", m.Name)
		case strings.IndexFunc(m.Name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
			return nil, invalid(m, "", "its Name %q has control characters", m.Name)
		case m.Up != "" && m.UpFunc != nil:
			return nil, invalid(m, "", "both Up and UpFunc are set: give one")
		case m.UpFunc == nil && strings.TrimSpace(m.Up) == "":
			return nil, invalid(m, "", "its Up SQL is empty (and no UpFunc)")
		case m.Down != "" && m.DownFunc != nil:
			return nil, invalid(m, "", "both Down and DownFunc are set: give one")
		case m.Down != "" && strings.TrimSpace(m.Down) == "":
			return nil, invalid(m, "", "its Down SQL is blank: give SQL, or none for a migration that cannot be reverted")
		}
		seen[m.Version] = m
	}
	out := slices.Clone(app)
	slices.SortFunc(out, func(a, b AppMigration) int { return a.Version - b.Version })
	return out, nil
}

// appFileName is the name of an application migration file.
var appFileName = regexp.MustCompile(`^([0-9]+)_([A-Za-z0-9_-]+)\.(up|down)\.sql$`)

// AppMigrationsFS reads application migrations from the directory dir of
// fsys (an embed.FS, os.DirFS, ...; "." for its root): each file
// NNN_name.up.sql applies migration NNN (a positive number: 001, 2,
// 20260129150405), and the optional NNN_name.down.sql beside it reverts
// it. Other files, and subdirectories, are ignored; a file ending in .sql
// whose name breaks that pattern, an empty file, a down file without its
// up file, two files for one version and direction, or an up and a down
// file of one version with different names are errors
// (*AppMigrationError matching ErrInvalidAppMigration, naming the file).
//
//	//go:embed migrations/*.sql
//	var migrationFiles embed.FS
//
//	app, err := pgstore.AppMigrationsFS(migrationFiles, "migrations")
func AppMigrationsFS(fsys fs.FS, dir string) ([]AppMigration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read application migrations: %w", err)
	}
	byVersion := make(map[int]*AppMigration)
	files := make(map[int]string) // a file of each version, for errors
	for _, e := range entries {
		base := e.Name()
		if e.IsDir() || !strings.HasSuffix(base, ".sql") {
			continue
		}
		match := appFileName.FindStringSubmatch(base)
		if match == nil {
			return nil, invalid(nil, base, "its name does not match NNN_name.up.sql or NNN_name.down.sql "+
				"(NNN a positive number, name of letters, digits, _ and -)")
		}
		v, err := strconv.Atoi(match[1])
		if err != nil || v <= 0 {
			return nil, invalid(nil, base, "version %q: it must be a positive number", match[1])
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, base))
		if err != nil {
			return nil, fmt.Errorf("pgstore: read application migration %s: %w", base, err)
		}
		m := byVersion[v]
		if m == nil {
			m = &AppMigration{Version: v, Name: match[2]}
			byVersion[v] = m
		} else if m.Name != match[2] {
			return nil, invalid(m, base, "version %d has files of two names (also %s)", v, files[v])
		}
		sql := string(body)
		if strings.TrimSpace(sql) == "" {
			return nil, invalid(m, base, "the file is empty")
		}
		slot := &m.Up
		if match[3] == "down" {
			slot = &m.Down
		}
		if *slot != "" {
			return nil, invalid(m, base, "version %d has two %s files (also %s)", v, match[3], files[v])
		}
		*slot = sql
		files[v] = base
	}
	out := make([]AppMigration, 0, len(byVersion))
	for v, m := range byVersion {
		if m.Up == "" {
			return nil, invalid(m, files[v], "there is no %03d_%s.up.sql beside it", v, m.Name)
		}
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b AppMigration) int { return a.Version - b.Version })
	return out, nil
}

const appTableSQL = `CREATE TABLE IF NOT EXISTS {{schema}}.app_migrations (
    version    bigint PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// appliedApp reads the application migrations recorded in schema: their
// names and when they were applied, by version. A missing table reads as
// none.
func appliedApp(ctx context.Context, q querier, schema string) (map[int]appRecord, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`,
		pgx.Identifier{schema, "app_migrations"}.Sanitize()).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read applied application migrations: %w", err)
	}
	out := make(map[int]appRecord)
	if !exists {
		return out, nil
	}
	rows, err := q.Query(ctx, render(schema, `SELECT version, name, applied_at FROM {{schema}}.app_migrations`))
	if err != nil {
		return nil, fmt.Errorf("read applied application migrations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int64
		var r appRecord
		if err := rows.Scan(&v, &r.name, &r.at); err != nil {
			return nil, fmt.Errorf("read applied application migrations: %w", err)
		}
		out[int(v)] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read applied application migrations: %w", err)
	}
	return out, nil
}

// appRecord is a row of app_migrations.
type appRecord struct {
	name string
	at   time.Time
}

// appUpToDate reports whether every migration of app is recorded in
// schema, without DDL or locks (as upToDate); any error reports false.
func appUpToDate(ctx context.Context, q querier, schema string, app []AppMigration) bool {
	if len(app) == 0 {
		return true
	}
	applied, err := appliedApp(ctx, q, schema)
	if err != nil {
		return false
	}
	for _, m := range app {
		if _, ok := applied[m.Version]; !ok {
			return false
		}
	}
	return true
}

// runApp applies or reverts one application migration and records it,
// in a savepoint of tx: a function that commits the transaction it is
// given only releases the savepoint, and the migration's record commits
// with what it did or not at all. A panic of UpFunc or DownFunc is
// returned as its error.
func runApp(ctx context.Context, tx pgx.Tx, schema string, m *AppMigration, dir Direction) (err error) {
	fail := func(err error) error {
		return &AppMigrationError{Version: m.Version, Name: m.Name, Direction: dir, Err: err}
	}
	sql, fn := m.Up, m.UpFunc
	if dir == Down {
		sql, fn = m.Down, m.DownFunc
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("application migration %s: savepoint: %w", m.label(), err)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fail(fmt.Errorf("panic: %v", p))
		}
		if err != nil {
			_ = sp.Rollback(ctx)
		}
	}()
	if fn != nil {
		err = fn(ctx, sp)
	} else {
		// Without arguments pgx uses the simple protocol, which runs a
		// multi-statement script.
		_, err = sp.Exec(ctx, sql)
	}
	if err != nil {
		return fail(err)
	}
	if dir == Up {
		_, err = sp.Exec(ctx, render(schema, `INSERT INTO {{schema}}.app_migrations (version, name) VALUES ($1, $2)`), int64(m.Version), m.Name)
	} else {
		_, err = sp.Exec(ctx, render(schema, `DELETE FROM {{schema}}.app_migrations WHERE version = $1`), int64(m.Version))
	}
	if err != nil {
		return fail(fmt.Errorf("record it: %w", err))
	}
	if err := sp.Commit(ctx); err != nil {
		return fail(err)
	}
	return nil
}

// AppMigrationStatus reports the application migrations of app and the
// ones schema records that app does not declare (applied by another build
// of the application; Undeclared is set), in version order, and whether
// each is applied to schema ("" means durable). A schema never migrated
// reports none applied. An invalid app is an *AppMigrationError matching
// ErrInvalidAppMigration.
func AppMigrationStatus(ctx context.Context, pool *pgxpool.Pool, schema string, app []AppMigration) ([]MigrationState, error) {
	schema, err := checkSchema(schema)
	if err != nil {
		return nil, err
	}
	app, err = sortedApp(app)
	if err != nil {
		return nil, err
	}
	applied, err := appliedApp(ctx, pool, schema)
	if err != nil {
		return nil, fmt.Errorf("pgstore: application migration status: %w", err)
	}
	out := make([]MigrationState, 0, len(app))
	declared := make(map[int]bool, len(app))
	for _, m := range app {
		r, ok := applied[m.Version]
		out = append(out, MigrationState{Version: m.Version, Name: m.Name, Applied: ok, AppliedAt: r.at})
		declared[m.Version] = true
	}
	for v, r := range applied {
		if !declared[v] {
			out = append(out, MigrationState{Version: v, Name: r.name, Applied: true, AppliedAt: r.at, Undeclared: true})
		}
	}
	slices.SortFunc(out, func(a, b MigrationState) int { return a.Version - b.Version })
	return out, nil
}

// Revert selects which migrations Migrate reverts (Direction Down).
type Revert int

const (
	// RevertDurable reverts durable's own migrations only, newest first;
	// the application's stay applied. The default.
	RevertDurable Revert = iota
	// RevertApp reverts the application's migrations only, newest first.
	RevertApp
	// RevertAll reverts the application's migrations, newest first, then
	// durable's: the reverse of the order Up applies them in.
	RevertAll
)

// String returns "durable", "app" or "all".
func (r Revert) String() string {
	switch r {
	case RevertDurable:
		return "durable"
	case RevertApp:
		return "app"
	case RevertAll:
		return "all"
	}
	return "unknown"
}

// ParseRevert parses "durable", "app" or "all".
func ParseRevert(s string) (Revert, error) {
	for _, r := range []Revert{RevertDurable, RevertApp, RevertAll} {
		if s == r.String() {
			return r, nil
		}
	}
	return 0, fmt.Errorf("pgstore: unknown migrations to revert %q (want durable, app or all)", s)
}
