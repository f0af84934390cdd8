package durable_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
)

// Helpers for the engine tests against PostgreSQL: the harness's pg branch
// (suite_test.go) and the PostgreSQL-only tests (pg_test.go). They run in
// real time, so the engines get short intervals.

// pgFast is the engine configuration of the PostgreSQL tests: fast polls,
// heartbeats and dead-worker detection. Fields set in cfg win.
func pgFast(cfg durable.Config) durable.Config {
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 200 * time.Millisecond
	}
	if cfg.DeadAfter == 0 {
		cfg.DeadAfter = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	return cfg
}

// pgEnv is one test's database: a pool of its own (closed when the test
// ends, so that goleak in TestMain finds no pool goroutines) and a freshly
// migrated schema (dropped when the test ends).
type pgEnv struct {
	pool   *pgxpool.Pool
	schema string
	store  *pgstore.Store
}

// pgSetup skips the test without DURABLE_TEST_DATABASE_URL (fails it under
// CI=true) and returns a store on a new schema.
func pgSetup(t *testing.T) *pgEnv {
	t.Helper()
	url := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 8
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close) // registered first: runs after the schema is dropped
	require.NoError(t, pool.Ping(ctx))
	schema := pgtest.Schema(t, pool)
	return &pgEnv{pool: pool, schema: schema, store: pgEnv{pool: pool, schema: schema}.newStore(t)}
}

// newStore returns another store object on the same schema, as a separate
// process would have.
func (env pgEnv) newStore(t *testing.T) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(env.pool, &pgstore.Config{Schema: env.schema, LeaderLease: testLeaderLease})
	require.NoError(t, err)
	return s
}

// testLeaderLease is the leader's lease of the engines' PostgreSQL tests:
// short, so that a takeover (a leader stopped, a lease expired) takes a
// second or two. (pgstore's tests cover the default.)
const testLeaderLease = 2 * time.Second

// pgClient returns an engine that is never started: it triggers and reads
// runs, as a client process would.
func pgClient(t *testing.T, s *pgstore.Store) *durable.Engine {
	t.Helper()
	e, err := durable.New(s, pgFast(durable.Config{}))
	require.NoError(t, err)
	return e
}

// pgLaunch starts an engine on s; the caller stops it.
func pgLaunch(t *testing.T, s *pgstore.Store, cfg durable.Config, wfs ...durable.Definition) *durable.Engine {
	t.Helper()
	e, err := durable.New(s, pgFast(cfg))
	require.NoError(t, err)
	require.NoError(t, e.Register(wfs...))
	require.NoError(t, e.Start(context.Background()))
	return e
}

// pgStart starts an engine on s that is stopped (gracefully, within a
// minute) when the test ends, before its schema is dropped.
func pgStart(t *testing.T, s *pgstore.Store, cfg durable.Config, wfs ...durable.Definition) *durable.Engine {
	t.Helper()
	e := pgLaunch(t, s, cfg, wfs...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Errorf("stopping engine %s: %v", e.WorkerID(), err)
		}
	})
	return e
}

// pgCtx returns a context that ends after d (and when the test ends).
func pgCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// pgWait waits for a run to settle, for at most d.
func pgWait(t *testing.T, e *durable.Engine, id uuid.UUID, d time.Duration) *durable.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := e.Wait(ctx, id)
	require.NoError(t, err, "run %s did not settle within %s", id, d)
	return res
}

// pgEventually polls cond every 10ms until it holds, failing the test after
// d with the message.
func pgEventually(t *testing.T, d time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, fmt.Sprintf(msg, args...))
		}
		<-tick.C
	}
}

// leaseHolder returns the worker holding the leader's lease now (the
// leader table, on the database's clock), or "" when the lease has expired.
func leaseHolder(t *testing.T, env *pgEnv) string {
	t.Helper()
	var w string
	err := env.pool.QueryRow(context.Background(),
		`SELECT coalesce((SELECT worker FROM `+env.schema+`.leader WHERE expires_at > now()), '')`).Scan(&w)
	require.NoError(t, err)
	return w
}

// expireLease ends the leader's lease now, as if its leader had frozen for
// a lease: the leader's next renewal or fenced write is refused, and it
// steps down; another engine takes the lease at its next poll.
func expireLease(t *testing.T, env *pgEnv) {
	t.Helper()
	_, err := env.pool.Exec(context.Background(), `UPDATE `+env.schema+`.leader SET expires_at = now()`)
	require.NoError(t, err)
}
