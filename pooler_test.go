package durable_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
)

// TestPgBouncer runs engines whose pools go through a real PgBouncer (one
// per sub-test, on a loopback port of its own), as a user of a managed
// PostgreSQL's pooled URL would: two workers and a client, each with a pool
// of its own, as separate processes would have. Runs with a step, a durable
// sleep, an event wait and another step all complete; each sleep wakes
// within its bound of its due time; a cancelled run's running step is
// cancelled; nothing logs an error (a prepared statement lost between
// transactions, a parameter the pool cannot encode).
//
// The sub-tests: "transaction/pooled only" has the pooled URL and nothing
// else (no LISTEN: the engines poll, and a sleep wakes within PollInterval
// of its due time); "transaction/direct" adds the direct URL for LISTEN and
// the election; "session" is PgBouncer in session mode with the store's
// defaults. The "leader handover" sub-tests stop the leader of two engines
// and check that the other leads and fires timers; through the pooled URL
// only, that takes the lease election, which keeps no session state.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	pgtest.PgBouncerPath(t)
	// One PgBouncer at a time: the server's connections are shared with
	// the other tests.
	t.Run("transaction/pooled only", func(t *testing.T) {
		pooled := pgtest.PgBouncer(t, "transaction")
		testBehindPooler(t, pooled, pgstore.Config{Pooler: pgstore.PoolerTransaction})
	})
	t.Run("transaction/direct", func(t *testing.T) {
		pooled := pgtest.PgBouncer(t, "transaction")
		direct, err := pgx.ParseConfig(pgtest.URL(t))
		require.NoError(t, err)
		testBehindPooler(t, pooled, pgstore.Config{Pooler: pgstore.PoolerTransaction, Direct: direct})
	})
	t.Run("transaction/pooled only/leader handover", func(t *testing.T) {
		pooled := pgtest.PgBouncer(t, "transaction")
		testPoolerHandover(t, pooled, pgstore.Config{Pooler: pgstore.PoolerTransaction})
	})
	t.Run("transaction/direct/leader handover", func(t *testing.T) {
		pooled := pgtest.PgBouncer(t, "transaction")
		direct, err := pgx.ParseConfig(pgtest.URL(t))
		require.NoError(t, err)
		testPoolerHandover(t, pooled, pgstore.Config{Pooler: pgstore.PoolerTransaction, Direct: direct})
	})
	t.Run("session", func(t *testing.T) {
		pooled := pgtest.PgBouncer(t, "session")
		testBehindPooler(t, pooled, pgstore.Config{Pooler: pgstore.PoolerSession})
	})
}

// poolerPoll is the engines' PollInterval behind the pooler: the default.
const poolerPoll = time.Second

// poolerSleep is the durable sleep of the runs; poolerLate bounds how late
// one may wake: PollInterval without notifications, plus a margin for a
// loaded machine. (Before the leader polled its timers, one woke up to a
// minute late.)
const (
	poolerSleep = 1500 * time.Millisecond
	poolerLate  = poolerPoll + 4*time.Second
)

// poolerEnv is a schema reached through a pooler: pools and stores as
// separate processes would have them, and the log of all of them.
type poolerEnv struct {
	t      *testing.T
	pooled string
	base   pgstore.Config
	schema string
	logs   *pgtest.SyncBuffer
	logger *slog.Logger
}

func newPoolerEnv(t *testing.T, pooled string, base pgstore.Config) *poolerEnv {
	env := &poolerEnv{t: t, pooled: pooled, base: base, logs: &pgtest.SyncBuffer{}}
	env.logger = slog.New(slog.NewTextHandler(env.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	env.schema = pgtest.Schema(t, env.pool(4)) // migrated through the pooler
	return env
}

// pool returns a new pool through the pooler, closed when the test ends
// (after the engines stop and the schema is dropped).
func (env *poolerEnv) pool(maxConns int32) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(env.pooled)
	require.NoError(env.t, err)
	if env.base.Pooler == pgstore.PoolerTransaction {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(env.t, err)
	env.t.Cleanup(pool.Close)
	return pool
}

// store returns a store on a pool of its own.
func (env *poolerEnv) store() *pgstore.Store {
	cfg := env.base
	cfg.Schema, cfg.Logger = env.schema, env.logger
	s, err := pgstore.New(env.pool(4), &cfg)
	require.NoError(env.t, err)
	return s
}

// config is the engines' configuration: the default poll interval.
func (env *poolerEnv) config() durable.Config {
	return durable.Config{Logger: env.logger, PollInterval: poolerPoll, HeartbeatInterval: time.Second, DeadAfter: 10 * time.Second}
}

// requireCleanLog fails the test if anything logged an error, a lost
// prepared statement or a parameter it could not encode.
func (env *poolerEnv) requireCleanLog() {
	for _, bad := range []string{"level=ERROR", "prepared statement", "SQLSTATE 42P05", "SQLSTATE 26000", "encode"} {
		require.NotContains(env.t, env.logs.String(), bad, "the engines' and stores' log:\n%s", env.logs.String())
	}
}

// testPoolerHandover stops the leader of two engines: the other leads
// within 30 seconds, and fires a sleep's timer.
func testPoolerHandover(t *testing.T, pooled string, base pgstore.Config) {
	env := newPoolerEnv(t, pooled, base)
	build := func() *durable.Workflow[int] {
		wf := durable.NewWorkflow[int]("handover")
		durable.Sleep(wf, "nap", poolerSleep)
		return wf
	}
	engines := map[string]*durable.Engine{}
	for range 2 {
		e := pgLaunch(t, env.store(), env.config(), build())
		engines[e.WorkerID()] = e
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = e.Stop(ctx) // a second Stop returns nil
		})
	}
	client, err := durable.New(env.store(), env.config())
	require.NoError(t, err)
	wf := build()
	require.NoError(t, client.Register(wf))
	leader := func() string {
		ws, err := client.Workers(context.Background())
		require.NoError(t, err)
		id := ""
		for _, w := range ws {
			if w.Leader && engines[w.ID] != nil {
				if id != "" {
					return "" // two say they lead
				}
				id = w.ID
			}
		}
		return id
	}
	var first string
	pgEventually(t, 30*time.Second, func() bool { first = leader(); return first != "" }, "an engine leads")
	ctx := pgCtx(t, 2*time.Minute)
	require.NoError(t, engines[first].Stop(ctx))
	pgEventually(t, 30*time.Second, func() bool { l := leader(); return l != "" && l != first }, "the other engine leads once %s stopped", first)
	id, err := wf.RunNoWait(ctx, client, "acme", 0)
	require.NoError(t, err)
	res := pgWait(t, client, id, 30*time.Second)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	env.requireCleanLog()
}

func testBehindPooler(t *testing.T, pooled string, base pgstore.Config) {
	const runs = 12
	env := newPoolerEnv(t, pooled, base)
	blocked := make(chan uuid.UUID, 1)
	cancelled := make(chan error, 1)
	build := func() (*durable.Workflow[int], *durable.Workflow[int]) {
		wf := durable.NewWorkflow[int]("pooled")
		a := durable.Step(wf, "a", func(ctx durable.Context, n int) (int, error) { return n, nil })
		nap := durable.Sleep(wf, "nap", poolerSleep, durable.After(a))
		got := durable.WaitForEvent[string](wf, "wait", func(ctx durable.Context, n int) (string, error) {
			return fmt.Sprintf("pooled-%d", n), nil
		}, durable.After(nap))
		durable.Step(wf, "b", func(ctx durable.Context, n int) (string, error) {
			v, _ := got.Output(ctx)
			return v, nil
		}, durable.After(got))
		block := durable.NewWorkflow[int]("blocker")
		durable.Step(block, "block", func(ctx durable.Context, n int) (int, error) {
			blocked <- ctx.RunID()
			<-ctx.Done()
			cancelled <- context.Cause(ctx)
			return 0, ctx.Err()
		})
		return wf, block
	}
	for range 2 {
		w, block := build()
		pgStart(t, env.store(), env.config(), w, block)
	}
	client, err := durable.New(env.store(), env.config())
	require.NoError(t, err)
	wf, block := build()
	require.NoError(t, client.Register(wf, block))
	ctx := pgCtx(t, 3*time.Minute)

	ids := make([]uuid.UUID, runs)
	for n := range runs {
		ids[n], err = wf.RunNoWait(ctx, client, "acme", n)
		require.NoError(t, err)
	}
	pgEventually(t, time.Minute, func() bool {
		for _, id := range ids {
			if stepState(t, client, id, "wait") != durabletype.TaskWaiting {
				return false
			}
		}
		return true
	}, "every run slept and waits for its event")
	for n := range runs {
		got, err := client.SendEvent(ctx, "acme", fmt.Sprintf("pooled-%d", n), fmt.Sprintf("event %d", n))
		require.NoError(t, err)
		require.Equal(t, 1, got, "run %d: the event reaches its waiting step", n)
	}
	var worst time.Duration
	for n, id := range ids {
		res := pgWait(t, client, id, time.Minute)
		require.Equal(t, durabletype.RunCompleted, res.Status, "run %d: %+v", n, res)
		b, _ := res.Step("b")
		require.Equal(t, fmt.Sprintf(`"event %d"`, n), string(b.Output))
		// Database times: the sleep began when a finished.
		a, _ := res.Step("a")
		nap, _ := res.Step("nap")
		late := nap.FinishedAt.Sub(a.FinishedAt) - poolerSleep
		require.GreaterOrEqual(t, late, time.Duration(0), "run %d: the sleep ended early", n)
		worst = max(worst, late)
	}
	t.Logf("%d runs completed; the latest sleep woke %s after its due time", runs, worst.Round(time.Millisecond))
	require.LessOrEqual(t, worst, poolerLate, "a sleep woke later than PollInterval (and a margin) after its due time")

	// A cancelled run's running step is cancelled: by a notification, or
	// without one at its worker's next heartbeat.
	bid, err := block.RunNoWait(ctx, client, "acme", 0)
	require.NoError(t, err)
	select {
	case got := <-blocked:
		require.Equal(t, bid, got)
	case <-ctx.Done():
		t.Fatal("the blocking step never started")
	}
	require.NoError(t, client.Cancel(ctx, bid, "test"))
	select {
	case cause := <-cancelled:
		require.True(t, errors.Is(cause, durable.ErrRunCancelled), "cause %v", cause)
	case <-time.After(30 * time.Second):
		t.Fatal("the step of a cancelled run was not cancelled within 30s (heartbeat: 1s)")
	}
	res := pgWait(t, client, bid, time.Minute)
	require.Equal(t, durabletype.RunCancelled, res.Status)

	env.requireCleanLog()
}
