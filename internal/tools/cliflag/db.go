package cliflag

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable/pgstore"
)

// Environment variables that supply the defaults of --database-url,
// --schema, --pooler and --direct-database-url.
const (
	EnvDatabaseURL       = "DURABLE_DATABASE_URL"
	EnvSchema            = "DURABLE_SCHEMA"
	EnvPooler            = "DURABLE_POOLER"
	EnvDirectDatabaseURL = "DURABLE_DIRECT_DATABASE_URL"
)

// DB holds the flags of commands that talk to PostgreSQL: --database-url
// (a Secret: its password is never shown), --schema, --pooler and, for
// the commands that register it (RegisterDirect), --direct-database-url.
type DB struct {
	url    Secret
	Schema string
	// Pooler is --pooler: none, session or transaction.
	Pooler string
	direct Secret
	// Redactor, when set, is told to watch the URLs by Register and
	// RegisterDirect.
	Redactor *Redactor
	// App are the application's own migrations, which Migrate applies
	// after durable's (durablecli.Config.Migrations).
	App []pgstore.AppMigration
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
	d.Pooler = os.Getenv(EnvPooler)
	fs.Var(poolerValue{&d.Pooler}, "pooler", "the connection pooler `mode` the URL goes through: none (a direct connection), "+
		"session, or transaction (PgBouncer's pool_mode = transaction, a managed database's pooled URL: nothing is "+
		"prepared or kept in a session); read from $"+EnvPooler+" if set")
}

// poolerValue is the flag.Value of --pooler: a value pgstore.ParsePooler
// takes, checked as the flags are parsed.
type poolerValue struct{ s *string }

func (p poolerValue) String() string {
	if p.s == nil {
		return ""
	}
	return *p.s
}

func (p poolerValue) Set(v string) error {
	if _, err := pgstore.ParsePooler(v); err != nil {
		return err
	}
	*p.s = v
	return nil
}

// RegisterDirect defines --direct-database-url on fs, for commands whose
// engines listen for notifications and elect a leader (worker).
func (d *DB) RegisterDirect(fs *flag.FlagSet) {
	SecretVar(fs, &d.direct, "direct-database-url", EnvDirectDatabaseURL,
		"PostgreSQL `URL` that bypasses the pooler, for LISTEN and the leader election; without it they use "+
			"--database-url, and with --pooler transaction workers do not listen but poll every --poll-interval", Redact)
	if d.Redactor != nil {
		d.Redactor.WatchURL(&d.direct)
	}
}

// pooler parses --pooler.
func (d *DB) pooler() (pgstore.Pooler, error) {
	p, err := pgstore.ParsePooler(d.Pooler)
	if err != nil {
		return "", fmt.Errorf("--pooler: %w", err)
	}
	return p, nil
}

// StoreConfig returns the store's configuration for the flags: the
// schema, the pooler and the direct connection.
func (d *DB) StoreConfig() (*pgstore.Config, error) {
	p, err := d.pooler()
	if err != nil {
		return nil, err
	}
	cfg := &pgstore.Config{Schema: d.Schema, Pooler: p}
	if u := d.direct.Value(); u != "" {
		cc, err := pgx.ParseConfig(u)
		if err != nil {
			return nil, d.redact(fmt.Errorf("--direct-database-url: %w", err))
		}
		cfg.Direct = cc
	}
	return cfg, nil
}

// URL returns the database URL given (or taken from the environment).
func (d *DB) URL() string { return d.url.Value() }

// redact returns err with the URL's secrets replaced.
func (d *DB) redact(err error) error {
	var r Redactor
	r.WatchURL(&d.url)
	r.WatchURL(&d.direct)
	return r.Error(err)
}

// NewPool returns a pool for the URL that has not connected yet: it
// connects on first use. maxConns 0 keeps pgx's default (or the URL's).
// Behind a transaction pooler (--pooler transaction) its statements are
// not prepared by name: they are described once per connection and sent
// unnamed (pgx's cache_describe), unless the URL chooses a mode itself
// (default_query_exec_mode).
func (d *DB) NewPool(maxConns int32) (*pgxpool.Pool, error) {
	pooler, err := d.pooler()
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(d.URL())
	if err != nil {
		return nil, d.redact(fmt.Errorf("--database-url: %w", err))
	}
	if pooler == pgstore.PoolerTransaction && !strings.Contains(d.URL(), "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
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
	cfg, err := d.StoreConfig()
	if err != nil {
		return nil, err
	}
	return pgstore.New(pool, cfg)
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

// Migrate migrates the schema up if needed, on a pool: durable's
// migrations, then the application's (App).
func (d *DB) Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: d.Schema, App: d.App}); err != nil {
		return d.redact(err)
	}
	return nil
}
