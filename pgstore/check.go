package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectivelabs/durable/store"
)

var _ store.Checker = (*Store)(nil)

// ErrSchemaNotCurrent matches (with errors.Is) the *SchemaError that Check
// returns for a schema that does not exist, was never migrated, or lacks
// migrations this code needs.
var ErrSchemaNotCurrent = errors.New("pgstore: schema not migrated to the current version")

// SchemaError describes a schema that the store cannot serve yet. It
// matches ErrSchemaNotCurrent.
type SchemaError struct {
	// Schema is the schema's name.
	Schema string
	// Have is the highest migration applied to it; 0 when the schema, or
	// its migrations table, does not exist.
	Have int
	// Want is the newest migration this code embeds.
	Want int

	reason string // what is wrong, for Error; "" when Have < Want says it
}

// Error describes the problem and names the fix.
func (e *SchemaError) Error() string {
	what := e.reason
	if what == "" {
		what = fmt.Sprintf("is at migration %03d, but this code needs %03d", e.Have, e.Want)
	}
	return fmt.Sprintf("pgstore: schema %s %s: run `durable migrate up` (or pgstore.Migrate)", e.Schema, what)
}

// Is reports whether target is ErrSchemaNotCurrent.
func (e *SchemaError) Is(target error) bool { return target == ErrSchemaNotCurrent }

// Reasons of a SchemaError besides an old version.
const (
	reasonNoSchema = "does not exist"
	reasonNoTable  = "has never been migrated (it has no migrations table)"
)

// Check implements store.Checker: it returns a *SchemaError (matching
// ErrSchemaNotCurrent) when the store's schema or its migrations table is
// missing, or when its highest applied migration is older than the newest
// one this code embeds. A schema newer than the code is accepted, so that
// older workers keep running during a rolling deploy. It costs one
// statement (two when the migrations table is missing, to tell which part
// is) and needs only SELECT on the migrations table.
func (s *Store) Check(ctx context.Context) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	want := all[len(all)-1].version
	var have int
	err = s.pool.QueryRow(ctx, render(s.schema, `SELECT coalesce(max(version), 0) FROM {{schema}}.migrations`)).Scan(&have)
	if isUndefinedTable(err) {
		reason := reasonNoTable
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL`,
			pgx.Identifier{s.schema}.Sanitize()).Scan(&exists); err != nil {
			return fmt.Errorf("pgstore: check schema %s: %w", s.schema, err)
		}
		if !exists {
			reason = reasonNoSchema
		}
		return &SchemaError{Schema: s.schema, Want: want, reason: reason}
	}
	if err != nil {
		return fmt.Errorf("pgstore: check schema %s: %w", s.schema, err)
	}
	if have < want {
		return &SchemaError{Schema: s.schema, Have: have, Want: want}
	}
	return nil
}

// isUndefinedTable reports whether err is PostgreSQL's undefined_table,
// which a query of a table in a missing schema reports too.
func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}

// upToDate reports whether every migration of all is applied to schema, by
// reading its migrations table without any DDL, so that roles without
// CREATE rights can run Migrate on a schema that is current. A missing
// schema or table, or any error, reports false: Migrate then takes its
// usual path, which reports errors itself. It looks the table up first, so
// that migrating a new schema does not log an error on the server.
func upToDate(ctx context.Context, q querier, schema string, all []migration) bool {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`,
		pgx.Identifier{schema, "migrations"}.Sanitize()).Scan(&exists); err != nil || !exists {
		return false
	}
	rows, err := q.Query(ctx, render(schema, `SELECT version FROM {{schema}}.migrations`))
	if err != nil {
		return false
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return false
	}
	have := make(map[int]bool, len(applied))
	for _, v := range applied {
		have[int(v)] = true
	}
	for _, m := range all {
		if !have[m.version] {
			return false
		}
	}
	return true
}
