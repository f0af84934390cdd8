// Package example opens the store the examples run on: the in-memory
// store by default, so that `go run ./examples/NAME` works on a fresh
// machine, or PostgreSQL when DURABLE_DATABASE_URL is set. It is what a
// program of your own writes once; durablecli does the same from its flags.
// WaitStep polls a run, where the examples wait for a state to show it.
package example

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// DefaultSchema is the PostgreSQL schema the examples use unless
// DURABLE_SCHEMA names another: apart from durable's default ("durable"),
// so that the examples' runs stay out of your own.
const DefaultSchema = "durable_examples"

// DB says where an example keeps its runs.
type DB struct {
	// URL is a PostgreSQL URL; empty means the in-memory store.
	URL string
	// Schema is the PostgreSQL schema, created and migrated if need be.
	// Defaults to DefaultSchema.
	Schema string
}

// FromEnv reads DURABLE_DATABASE_URL and DURABLE_SCHEMA.
func FromEnv() DB {
	return DB{URL: os.Getenv("DURABLE_DATABASE_URL"), Schema: os.Getenv("DURABLE_SCHEMA")}
}

// Store is an open store.
type Store struct {
	// Store is the store to give durable.New: a *memstore.Store or a
	// *pgstore.Store (the concrete type, so that the engine finds the
	// store's optional capabilities, transactions among them).
	Store store.Store
	// Pool is the PostgreSQL pool, nil in memory.
	Pool *pgxpool.Pool
	// Schema is the PostgreSQL schema, empty in memory.
	Schema string
}

// Open opens the store db names: on PostgreSQL it connects, and applies
// durable's migrations to the schema, then the application's own (app), in
// the same transaction, under durable's migration lock (a program of your
// own declares them once, in durablecli.Config.Migrations). In memory, app
// is ignored.
func Open(ctx context.Context, db DB, app ...pgstore.AppMigration) (*Store, error) {
	if db.URL == "" {
		return &Store{Store: memstore.New()}, nil
	}
	schema := db.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	pool, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	if _, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, App: app}); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrating schema %s: %w", schema, err)
	}
	st, err := pgstore.New(pool, &pgstore.Config{Schema: schema, Logger: Logger()})
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{Store: st, Pool: pool, Schema: schema}, nil
}

// Close closes the PostgreSQL pool, if any. Stop the engines first.
func (s *Store) Close() {
	if s.Pool != nil {
		s.Pool.Close()
	}
}

// Where names the store, for the examples' first line of output.
func (s *Store) Where() string {
	if s.Pool == nil {
		return "in memory"
	}
	return "on PostgreSQL, schema " + s.Schema
}

// Logger is the examples' engine logger: warnings and errors to stderr, so
// that what an example prints stays readable. Leave Config.Logger unset
// to see the engine's start, leadership and stop too.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// WaitStep polls run id until its step is in state, and returns the
// step. It fails if the run settles first, or when ctx ends. (Tests of your
// own do this with durabletest's Kit.WaitStep, in virtual time.)
func WaitStep(ctx context.Context, e *durable.Engine, id uuid.UUID, step string, state durabletype.TaskState) (*durable.StepResult, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := e.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if s, ok := res.Step(step); ok && s.State == state {
			return s, nil
		}
		if res.Done() {
			return nil, fmt.Errorf("run %s settled %s before its step %s was %s", id, res.Status, step, state)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for step %s of run %s to be %s: %w", step, id, state, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
