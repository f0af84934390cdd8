package durable_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

// Engine tests that hold for every store are written once, as a function of
// a harness, and run by both against each store: the in-memory store inside
// a testing/synctest bubble (virtual time: a 24-hour sleep takes no time),
// and PostgreSQL in a freshly migrated schema of its own (real time, short
// intervals; skipped without DURABLE_TEST_DATABASE_URL, failed without it
// under CI=true). Durations a test waits for come from the harness, so that
// the same test sleeps for hours in memory and for a fraction of a second
// on PostgreSQL.

// harness is one store an engine test runs against.
type harness struct {
	t *testing.T
	// store is the store engines of the test share.
	store store.Store
	// virtual is set in memory, where time is virtual.
	virtual bool
	pg      *pgEnv // on PostgreSQL
}

// both runs fn against the in-memory store and against PostgreSQL.
func both(t *testing.T, fn func(t *testing.T, h *harness)) {
	t.Helper()
	t.Run("mem", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fn(t, &harness{t: t, store: memstore.New(), virtual: true})
		})
	})
	t.Run("pg", func(t *testing.T) {
		env := pgSetup(t)
		fn(t, &harness{t: t, store: env.store, pg: env})
	})
}

// config completes an engine configuration for the store: on PostgreSQL,
// short intervals (pgFast) and the quiet logger; fields set in cfg win.
func (h *harness) config(cfg durable.Config) durable.Config {
	if h.pg != nil {
		return pgFast(cfg)
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	return cfg
}

// deadAfter is the Config.DeadAfter engines of the harness get by default.
func (h *harness) deadAfter() time.Duration {
	if d := h.config(durable.Config{}).DeadAfter; d > 0 {
		return d
	}
	return 30 * time.Second // the engine's default
}

// launchOn starts an engine on s; the caller stops it.
func (h *harness) launchOn(s store.Store, cfg durable.Config, wfs ...durable.Definition) *durable.Engine {
	h.t.Helper()
	e, err := durable.New(s, h.config(cfg))
	require.NoError(h.t, err)
	require.NoError(h.t, e.Register(wfs...))
	require.NoError(h.t, e.Start(context.Background()))
	return e
}

// startOn starts an engine on s, stopped (gracefully, within a minute) when
// the test ends.
func (h *harness) startOn(s store.Store, cfg durable.Config, wfs ...durable.Definition) *durable.Engine {
	h.t.Helper()
	e := h.launchOn(s, cfg, wfs...)
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			h.t.Errorf("stopping engine %s: %v", e.WorkerID(), err)
		}
	})
	return e
}

// start starts an engine on the harness's store, stopped when the test
// ends.
func (h *harness) start(cfg durable.Config, wfs ...durable.Definition) *durable.Engine {
	h.t.Helper()
	return h.startOn(h.store, cfg, wfs...)
}

// client returns an engine that is never started: it triggers and reads
// runs, as a client process would.
func (h *harness) client() *durable.Engine {
	h.t.Helper()
	e, err := durable.New(h.store, h.config(durable.Config{}))
	require.NoError(h.t, err)
	return e
}

// ctx returns a context that ends after d (and when the test ends).
func (h *harness) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	h.t.Cleanup(cancel)
	return ctx
}

// tx returns a transaction of the store's kind for RunNoWaitTx (a pgx.Tx on
// PostgreSQL, rolled back when the test ends; nil in memory) and its commit.
func (h *harness) tx() (any, func() error) {
	h.t.Helper()
	if h.pg == nil {
		return nil, func() error { return nil }
	}
	tx, err := h.pg.pool.Begin(context.Background())
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx, func() error { return tx.Commit(context.Background()) }
}

// eventually polls cond until it holds, failing the test after d (virtual
// time in memory, where polling costs nothing).
func (h *harness) eventually(d time.Duration, cond func() bool, msg string, args ...any) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("not within %s: %s", d, fmt.Sprintf(msg, args...))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// duration returns inMemory on the in-memory store, where time is virtual
// and a test may wait for hours at no cost, and onPG on PostgreSQL, where
// the test waits for real: a sleep step of 24 hours in memory is one of a
// few hundred milliseconds on PostgreSQL.
func (h *harness) duration(inMemory, onPG time.Duration) time.Duration {
	if h.virtual {
		return inMemory
	}
	return onPG
}

// another returns a store object on the harness's data, as another process
// would have: on PostgreSQL a new pgstore.Store on the same schema; in
// memory the store itself (there is no other process).
func (h *harness) another() store.Store {
	h.t.Helper()
	if h.pg != nil {
		return h.pg.newStore(h.t)
	}
	return h.store
}

// startMany starts n engines, each on its own store object (another) with
// the workflows build returns (a fresh copy each, as separate processes
// would have), stopped when the test ends. When cfg names a worker, engine
// i is called "<WorkerID>-<i>".
func (h *harness) startMany(n int, cfg durable.Config, build func() []durable.Definition) []*durable.Engine {
	h.t.Helper()
	engines := make([]*durable.Engine, n)
	for i := range engines {
		c := cfg
		if cfg.WorkerID != "" {
			c.WorkerID = fmt.Sprintf("%s-%d", cfg.WorkerID, i)
		}
		engines[i] = h.startOn(h.another(), c, build()...)
	}
	return engines
}

// wait waits for a run to settle, for at most d, and returns its result.
func (h *harness) wait(e *durable.Engine, id uuid.UUID, d time.Duration) *durable.RunResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := e.Wait(ctx, id)
	require.NoError(h.t, err, "run %s did not settle within %s", id, d)
	return res
}
