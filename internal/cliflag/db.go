package cliflag

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable/pgstore"
)

// Environment variables that supply the defaults of --database-url and
// --schema.
const (
	EnvDatabaseURL = "DURABLE_DATABASE_URL"
	EnvSchema      = "DURABLE_SCHEMA"
)

// DB holds the flags of commands that talk to PostgreSQL: --database-url
// (a Secret: its password is never shown) and --schema.
type DB struct {
	url    Secret
	Schema string
	// Redactor, when set, is told to watch the URL by Register.
	Redactor *Redactor
}

// Register defines --database-url and --schema on fs. With optional set,
// the help says that without a URL the in-memory store is used.
func (d *DB) Register(fs *flag.FlagSet, optional bool) {
	help := "PostgreSQL `URL`, e.g. postgres://user@127.0.0.1:5432/db"
	if optional {
		help = "PostgreSQL `URL`; without it the in-memory store is used"
	}
	SecretVar(fs, &d.url, "database-url", EnvDatabaseURL, help, Redact)
	if d.Redactor != nil {
		d.Redactor.WatchURL(&d.url)
	}
	def := os.Getenv(EnvSchema)
	if def == "" {
		def = pgstore.DefaultSchema
	}
	fs.StringVar(&d.Schema, "schema", def, "PostgreSQL schema holding durable's tables (read from $"+EnvSchema+" if set)")
}

// URL returns the database URL given (or taken from the environment).
func (d *DB) URL() string { return d.url.Value() }

// redact returns err with the URL's secrets replaced.
func (d *DB) redact(err error) error {
	var r Redactor
	r.WatchURL(&d.url)
	return r.Error(err)
}

// NewPool returns a pool for the URL that has not connected yet: it
// connects on first use. maxConns 0 keeps pgx's default (or the URL's).
func (d *DB) NewPool(maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(d.URL())
	if err != nil {
		return nil, d.redact(fmt.Errorf("--database-url: %w", err))
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, d.redact(fmt.Errorf("connecting: %w", err))
	}
	return pool, nil
}

// Ping checks that pool connects, within 10 seconds.
func (d *DB) Ping(ctx context.Context, pool *pgxpool.Pool) error {
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		return d.redact(fmt.Errorf("connecting to PostgreSQL: %w", err))
	}
	return nil
}

// Open connects a pool and checks the connection.
func (d *DB) Open(ctx context.Context, maxConns int32) (*pgxpool.Pool, error) {
	pool, err := d.NewPool(maxConns)
	if err != nil {
		return nil, err
	}
	if err := d.Ping(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// Store migrates the schema up if needed (and migrate is set) on a
// connected pool, and returns a store on it.
func (d *DB) Store(ctx context.Context, pool *pgxpool.Pool, migrate bool) (*pgstore.Store, error) {
	if migrate {
		if err := d.Migrate(ctx, pool); err != nil {
			return nil, err
		}
	}
	return pgstore.New(pool, &pgstore.Config{Schema: d.Schema})
}

// OpenStore connects, migrates the schema up if needed (and migrate is
// set), and returns a store and its pool.
func (d *DB) OpenStore(ctx context.Context, maxConns int32, migrate bool) (*pgstore.Store, *pgxpool.Pool, error) {
	pool, err := d.Open(ctx, maxConns)
	if err != nil {
		return nil, nil, err
	}
	s, err := d.Store(ctx, pool, migrate)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s, pool, nil
}

// Migrate migrates the schema up if needed, on a pool.
func (d *DB) Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: d.Schema}); err != nil {
		return d.redact(err)
	}
	return nil
}
