package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
	"github.com/effectivelabs/durable/store/storetest"
)

// The store behind a connection pooler in transaction mode (PgBouncer, as
// most managed PostgreSQL offer): TestConformancePooler runs the whole
// conformance suite through a real PgBouncer, TestListenBehindPooler the
// listener with and without a direct connection. The engines behind one
// are tested in the root package (TestPgBouncer).

func TestParsePooler(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]pgstore.Pooler{
		"": pgstore.PoolerNone, "none": pgstore.PoolerNone,
		"session": pgstore.PoolerSession, "transaction": pgstore.PoolerTransaction,
	} {
		got, err := pgstore.ParsePooler(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"Transaction", "statement", "pgbouncer", " session"} {
		_, err := pgstore.ParsePooler(in)
		require.ErrorIs(t, err, pgstore.ErrInvalidPooler, in)
	}
}

// TestNewPoolerModes: New refuses a pool whose statements cannot work
// (behind the pooler it is told of), saying what to set; it does not
// connect to tell.
func TestNewPoolerModes(t *testing.T) {
	t.Parallel()
	newPool := func(mode pgx.QueryExecMode) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none?sslmode=disable")
		require.NoError(t, err)
		cfg.ConnConfig.DefaultQueryExecMode = mode
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		return pool
	}
	for _, c := range []struct {
		mode   pgx.QueryExecMode
		pooler pgstore.Pooler
		ok     bool
	}{
		{pgx.QueryExecModeCacheStatement, pgstore.PoolerNone, true},
		{pgx.QueryExecModeCacheStatement, pgstore.PoolerSession, true},
		{pgx.QueryExecModeCacheStatement, pgstore.PoolerTransaction, false},
		{pgx.QueryExecModeCacheDescribe, pgstore.PoolerTransaction, true},
		{pgx.QueryExecModeDescribeExec, pgstore.PoolerTransaction, true},
		{pgx.QueryExecModeCacheDescribe, pgstore.PoolerNone, true},
		{pgx.QueryExecModeExec, pgstore.PoolerNone, false},
		{pgx.QueryExecModeSimpleProtocol, pgstore.PoolerNone, false},
		{pgx.QueryExecModeSimpleProtocol, pgstore.PoolerTransaction, false},
	} {
		_, err := pgstore.New(newPool(c.mode), &pgstore.Config{Pooler: c.pooler})
		if c.ok {
			require.NoError(t, err, "%s behind %q", c.mode, c.pooler)
			continue
		}
		require.ErrorIs(t, err, pgstore.ErrInvalidPooler, "%s behind %q", c.mode, c.pooler)
		require.ErrorContains(t, err, "cache_describe", "the error says what to use")
	}
	_, err := pgstore.New(newPool(pgx.QueryExecModeCacheStatement), &pgstore.Config{Pooler: "statement"})
	require.ErrorIs(t, err, pgstore.ErrInvalidPooler)
}

// pooledPool returns a pool through a PgBouncer of its own in mode, whose
// statements are described once and sent unnamed (cache_describe), and a
// fresh schema migrated through it.
func pooledPool(t *testing.T, mode string) (*pgxpool.Pool, string) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.PgBouncer(t, mode))
	require.NoError(t, err)
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	cfg.MaxConns = 12
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close) // after the schema is dropped
	return pool, pgtest.Schema(t, pool)
}

// TestConformancePooler runs the conformance suite on stores whose pool
// goes through PgBouncer in transaction mode: each transaction may get
// another server session, so a statement prepared by name, a setting or a
// lock left in a session would break some behaviour of the suite
// (PgBouncer 1.18 does not track prepared statements). "pooled only" has
// nothing but the pooled URL; "direct" also has the direct connection
// (Config.Direct), on which the store listens and elects.
func TestConformancePooler(t *testing.T) {
	t.Parallel()
	pool, _ := pooledPool(t, "transaction")
	direct, err := pgx.ParseConfig(pgtest.URL(t))
	require.NoError(t, err)
	t.Run("pooled only", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) store.Store {
			s, err := pgstore.New(pool, &pgstore.Config{Schema: pgtest.Schema(t, pool), Pooler: pgstore.PoolerTransaction})
			require.NoError(t, err)
			return s
		})
	})
	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) store.Store {
			s, err := pgstore.New(pool, &pgstore.Config{Schema: pgtest.Schema(t, pool), Pooler: pgstore.PoolerTransaction, Direct: direct})
			require.NoError(t, err)
			return s
		})
	})
}

// TestListenBehindPooler: behind a transaction pooler without a direct
// connection the store does not listen (a LISTEN there would lose the
// notifications without a word): it delivers nothing, not even the resync
// that tells engines notifications flow, so they poll. With Config.Direct
// it listens there and hears what the pooled connections notify.
func TestListenBehindPooler(t *testing.T) {
	t.Parallel()
	pool, schema := pooledPool(t, "transaction")
	run := func() []store.NewRun {
		return []store.NewRun{newRun("wf", "t", &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}})}
	}

	t.Run("pooled only", func(t *testing.T) {
		s, err := pgstore.New(pool, &pgstore.Config{Schema: schema, Pooler: pgstore.PoolerTransaction})
		require.NoError(t, err)
		n, stop := listen(t, s)
		require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: run()})))
		stop() // Listen returns when its context ends
		close(n.ch)
		for x := range n.ch {
			t.Errorf("a store that cannot listen delivered %+v", x)
		}
	})

	t.Run("direct", func(t *testing.T) {
		direct, err := pgx.ParseConfig(pgtest.URL(t))
		require.NoError(t, err)
		s, err := pgstore.New(pool, &pgstore.Config{Schema: schema, Pooler: pgstore.PoolerTransaction, Direct: direct})
		require.NoError(t, err)
		n, stop := listen(t, s)
		defer stop()
		n.wait(t, "first resync", topic(store.TopicResync))
		require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: run()})))
		n.wait(t, "ready, notified through the pooler", topic(store.TopicReady))
		// The listener's session is the direct connection's: ended by the
		// server, it is seen as on a direct store.
		require.Eventually(t, func() bool { return terminate(t, pgtest.Pool(t), schema, "listener") == 1 },
			10*time.Second, 10*time.Millisecond)
		n.wait(t, "deaf", topic(store.TopicDeaf))
		n.wait(t, "resync", topic(store.TopicResync))
	})
}
