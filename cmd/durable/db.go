package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable/pgstore"
)

// Environment variables that supply defaults for --database-url and --schema.
const (
	envDatabaseURL = "DURABLE_DATABASE_URL"
	envSchema      = "DURABLE_SCHEMA"
)

// dbFlags are the flags of commands that talk to PostgreSQL.
type dbFlags struct {
	url    string
	schema string
}

func (d *dbFlags) register(fs *flag.FlagSet, required bool) {
	help := "PostgreSQL URL, e.g. postgres://user@127.0.0.1:5432/db (default $" + envDatabaseURL + ")"
	if !required {
		help = "PostgreSQL URL; without it the in-memory store is used (default $" + envDatabaseURL + ")"
	}
	fs.StringVar(&d.url, "database-url", os.Getenv(envDatabaseURL), help)
	def := os.Getenv(envSchema)
	if def == "" {
		def = pgstore.DefaultSchema
	}
	fs.StringVar(&d.schema, "schema", def, "PostgreSQL schema holding durable's tables (read from $"+envSchema+" if set)")
}

// open connects a pool; maxConns 0 keeps pgx's default (or the URL's).
func (d *dbFlags) open(ctx context.Context, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(d.url)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	return pool, nil
}

// openStore connects, migrates the schema up if needed (and migrate is
// set), and returns a store.
func (d *dbFlags) openStore(ctx context.Context, maxConns int32, migrate bool) (*pgstore.Store, *pgxpool.Pool, error) {
	pool, err := d.open(ctx, maxConns)
	if err != nil {
		return nil, nil, err
	}
	if migrate {
		if _, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: d.schema}); err != nil {
			pool.Close()
			return nil, nil, err
		}
	}
	s, err := pgstore.New(pool, &pgstore.Config{Schema: d.schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s, pool, nil
}
