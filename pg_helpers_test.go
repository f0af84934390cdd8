package durable_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/pgtest"
	"github.com/effectivelabs/durable/pgstore"
)

// Helpers for the engine tests against PostgreSQL (pg_test.go). They run in
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
	s, err := pgstore.New(env.pool, &pgstore.Config{Schema: env.schema})
	require.NoError(t, err)
	return s
}

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
// pgStarter starts engines on env's store with pgFast's intervals.
func pgStarter(env *pgEnv) starter {
	return func(t *testing.T, wfs ...durable.Definition) *durable.Engine {
		return pgStart(t, env.store, durable.Config{}, wfs...)
	}
}

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

// pgEvent returns the first event of a step with the given type.
func pgEvent(t *testing.T, e *durable.Engine, id uuid.UUID, step string, typ durable.EventType) durable.Event {
	t.Helper()
	evs, err := e.Events(context.Background(), id)
	require.NoError(t, err)
	for _, ev := range evs {
		if ev.Step == step && ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("run %s: no %s event for step %q in %v", id, typ, step, evs)
	return durable.Event{}
}

// pgLastQueuedDetail returns the detail of the last QUEUED event of a step.
func pgLastQueuedDetail(t *testing.T, e *durable.Engine, id uuid.UUID, step string) string {
	t.Helper()
	evs, err := e.Events(context.Background(), id)
	require.NoError(t, err)
	detail := ""
	for _, ev := range evs {
		if ev.Step == step && ev.Type == durable.EventQueued {
			detail = ev.Detail
		}
	}
	return detail
}

// pgStepState reads a step's state now.
func pgStepState(t *testing.T, e *durable.Engine, id uuid.UUID, step string) durable.StepState {
	t.Helper()
	res, err := e.Get(context.Background(), id)
	require.NoError(t, err)
	s, ok := res.Step(step)
	require.True(t, ok, "run %s has no step %q", id, step)
	return s.State
}

// leaderLog is a slog handler that follows the engines' "leading" and "no
// longer leading" messages: who leads, how many led at once at most, and
// every message by worker.
type leaderLog struct {
	mu      sync.Mutex
	leading map[string]bool
	most    int
	turns   []string // workers in the order they became leader
	msgs    map[string][]string
}

func newLeaderLog() *leaderLog {
	return &leaderLog{leading: map[string]bool{}, msgs: map[string][]string{}}
}

func (l *leaderLog) logger() *slog.Logger { return slog.New(&leaderHandler{log: l}) }

func (l *leaderLog) record(worker, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs[worker] = append(l.msgs[worker], msg)
	switch msg {
	case "durable: leading":
		l.leading[worker] = true
		l.turns = append(l.turns, worker)
		l.most = max(l.most, len(l.leading))
	case "durable: no longer leading":
		delete(l.leading, worker)
	}
}

// leaders returns the workers leading now.
func (l *leaderLog) leaders() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for w := range l.leading {
		out = append(out, w)
	}
	return out
}

func (l *leaderLog) stats() (most int, turns []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.most, append([]string(nil), l.turns...)
}

func (l *leaderLog) said(worker, msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs[worker] {
		if m == msg {
			return true
		}
	}
	return false
}

type leaderHandler struct {
	log    *leaderLog
	worker string
}

func (h *leaderHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *leaderHandler) Handle(_ context.Context, r slog.Record) error {
	worker := h.worker
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "worker" {
			worker = a.Value.String()
		}
		return true
	})
	h.log.record(worker, r.Message)
	return nil
}

func (h *leaderHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	for _, a := range attrs {
		if a.Key == "worker" {
			c.worker = a.Value.String()
		}
	}
	return &c
}

func (h *leaderHandler) WithGroup(string) slog.Handler { return h }

// electorLocks reports, from pg_locks, which of the given workers' elector
// connections hold the leader's advisory lock and which wait for it.
func electorLocks(t *testing.T, env *pgEnv, workers []string) (holding, waiting []string) {
	t.Helper()
	names := make([]string, len(workers))
	byName := map[string]string{}
	for i, w := range workers {
		names[i] = pgstore.ApplicationName(env.schema, "elector:"+w)
		byName[names[i]] = w
	}
	rows, err := env.pool.Query(context.Background(), `
SELECT a.application_name, l.granted
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND a.application_name = ANY($1::text[])`, names)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var app string
		var granted bool
		require.NoError(t, rows.Scan(&app, &granted))
		if granted {
			holding = append(holding, byName[app])
		} else {
			waiting = append(waiting, byName[app])
		}
	}
	require.NoError(t, rows.Err())
	return holding, waiting
}
