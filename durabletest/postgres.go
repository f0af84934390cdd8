package durabletest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// EnvDatabaseURL is the environment variable DatabaseURL and RunPostgres
// read the URL of the test database from.
const EnvDatabaseURL = "DURABLE_TEST_DATABASE_URL"

// DefaultPostgresTimeout is the Options.Timeout of a kit on PostgreSQL
// whose Options leave it zero: a minute of real time.
const DefaultPostgresTimeout = time.Minute

// pgPoll is how often the kit on PostgreSQL reads the database while it
// waits, besides whenever its engine changed something: the changes other
// processes make, and the due times that pass, are seen that way.
const pgPoll = 20 * time.Millisecond

// pgStopTimeout bounds, in real time, the drain of the kit's engine on
// PostgreSQL when the test function returns.
const pgStopTimeout = 5 * time.Second

// pgMaxConns is the size of the kit's pool unless the URL sets
// pool_max_conns: the store's transactional steps take half of it.
const pgMaxConns = 8

// pgKit is what a kit on PostgreSQL has besides the engine: its pool, the
// schema of the application's tables, and the store (unwatched, for the
// kit's own calls).
type pgKit struct {
	pool   *pgxpool.Pool
	schema string
	store  *pgstore.Store
}

// DatabaseURL returns the URL of the test database, from the environment
// variable DURABLE_TEST_DATABASE_URL, and skips the test when it is unset.
// Set Options.DatabaseURL with it to run a kit with options on
// PostgreSQL.
func DatabaseURL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv(EnvDatabaseURL)
	if url == "" {
		tb.Skipf("durabletest: the kit on PostgreSQL needs %s, e.g. %s=postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
			EnvDatabaseURL, EnvDatabaseURL)
	}
	return url
}

// RunPostgres runs fn with a Kit whose engine runs on PostgreSQL, at the
// URL in DURABLE_TEST_DATABASE_URL (DatabaseURL; the test is skipped when
// it is unset), so that the SQL of your transactional steps
// (durable.TxStep, durable.DoTx, declared with tx pgx.Tx) runs for real,
// in the transaction that records the step's outcome.
//
// The kit migrates a fresh schema for its store and creates another,
// empty, for your application's tables: Kit.Schema names it, and it comes
// first on the search_path of the kit's pool (Kit.Pool), which the steps'
// transactions come from, so that SQL with unqualified table names, as in
// production, finds the tables the test creates there (CREATE TABLE
// through Kit.Pool, or your migrations run on it). Both schemas are
// dropped, and the pool closed, when the test ends.
//
// Time is real there: Advance fails the test, Settle and WaitStep wait in
// real time (Options.Timeout, DefaultPostgresTimeout by default), and a
// retry backoff or a sleep takes as long as it says. The other methods
// work as in memory; fn runs outside a synctest bubble, so it may call
// t.Parallel and t.Run.
func RunPostgres(t *testing.T, fn func(t *testing.T, k *Kit)) {
	t.Helper()
	RunOptions(t, Options{DatabaseURL: DatabaseURL(t)}, fn)
}

// Pool returns the pool of the kit's database: the steps' transactions
// come from it, and the test reads and writes the application's tables
// through it. The kit closes it when the test ends. On the in-memory kit,
// which has no database, it fails the test.
func (k *Kit) Pool() *pgxpool.Pool {
	k.tb.Helper()
	k.needPostgres("Pool")
	return k.pg.pool
}

// Schema returns the schema of the application's tables in the kit's
// database: first on the search_path of Pool's connections, and dropped,
// with all it holds, when the test ends. (The store's tables are in a
// schema of their own.) On the in-memory kit it fails the test.
func (k *Kit) Schema() string {
	k.tb.Helper()
	k.needPostgres("Schema")
	return k.pg.schema
}

func (k *Kit) needPostgres(what string) {
	k.tb.Helper()
	if k.pg == nil {
		k.tb.Fatalf("durabletest: Kit.%s: the in-memory kit has no database; run the kit on PostgreSQL (RunPostgres, Options.DatabaseURL)", what)
	}
}

// startPostgres builds and starts a kit's engine on PostgreSQL at
// opts.DatabaseURL, in fresh schemas, failing t if it cannot.
func startPostgres(t *testing.T, opts Options) *Kit {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(opts.DatabaseURL)
	if err != nil {
		t.Fatalf("durabletest: Options.DatabaseURL: %v", err)
	}
	if !strings.Contains(opts.DatabaseURL, "pool_max_conns") {
		cfg.MaxConns = pgMaxConns
	}
	base := newSchemaName()
	storeSchema, appSchema := base, base+"_app"
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{appSchema}.Sanitize() + ", public"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("durabletest: connecting to Options.DatabaseURL: %v", err)
	}
	t.Cleanup(pool.Close) // registered first: runs after the schemas are dropped
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("durabletest: connecting to Options.DatabaseURL: %v", err)
	}
	for _, schema := range []string{storeSchema, appSchema} {
		t.Cleanup(func() { pgtest.DropSchema(t, pool, schema) })
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{appSchema}.Sanitize()); err != nil {
		t.Fatalf("durabletest: creating schema %s: %v", appSchema, err)
	}
	if _, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: storeSchema}); err != nil {
		t.Fatalf("durabletest: migrating schema %s: %v", storeSchema, err)
	}
	ps, err := pgstore.New(pool, &pgstore.Config{Schema: storeSchema, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("durabletest: %v", err)
	}
	w := newWatch()
	k := newKit(t, opts, DefaultPostgresTimeout, &pgObserved{Store: ps, w: w}, w)
	k.pg = &pgKit{pool: pool, schema: appSchema, store: ps}
	k.launch()
	return k
}

// newSchemaName returns a random name for a kit's schema.
func newSchemaName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	return "durabletest_" + hex.EncodeToString(b[:])
}

// now returns the instant the kit compares due times with: virtual time in
// memory, the database's clock on PostgreSQL.
func (k *Kit) now() time.Time {
	k.tb.Helper()
	if k.pg == nil {
		return time.Now()
	}
	var now time.Time
	if err := k.pg.pool.QueryRow(k.ctx, "SELECT clock_timestamp()").Scan(&now); err != nil {
		k.tb.Fatalf("durabletest: reading the database's clock: %v", err)
	}
	return now
}

// pgServes waits until the kit's engine's record in the registry of
// workers serves every workflow registered on it (the engine refreshes it
// in the background after Register), failing the test after the kit's
// timeout.
func (k *Kit) pgServes() {
	k.tb.Helper()
	var names []string
	for _, w := range k.engine.Workflows() {
		names = append(names, w.Name)
	}
	deadline := time.Now().Add(k.timeout)
	for {
		ws, err := k.engine.Workers(k.ctx)
		if err != nil {
			k.tb.Fatalf("durabletest: %v", err)
		}
		own := slices.DeleteFunc(ws, func(w durable.WorkerInfo) bool { return w.ID != k.engine.WorkerID() })
		missing := durable.Unserved(own, names...)
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			k.tb.Fatalf("durabletest: the engine's record in the registry of workers did not list %v within %s (Options.Timeout)", missing, k.timeout)
		}
		select {
		case <-time.After(pgPoll):
		case <-k.ctx.Done():
			k.tb.Fatalf("durabletest: %v", context.Cause(k.ctx))
		}
	}
}

// pgIdle is Idle on PostgreSQL: it waits until quietNow, looking again
// whenever the engine changed something and every pgPoll, and fails the
// test after the kit's timeout, describing what is busy.
func (k *Kit) pgIdle() {
	k.tb.Helper()
	deadline := time.NewTimer(k.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pgPoll)
	defer tick.Stop()
	start := time.Now()
	for {
		if k.quietNow() {
			return
		}
		select {
		case <-k.watch.changed:
		case <-tick.C:
		case <-deadline.C:
			if k.quietNow() {
				return
			}
			what := "  (no run is busy: calls of the engine's were under way)"
			if busy := k.busyRuns(); len(busy) > 0 {
				what = strings.Join(busy, "\n")
			}
			k.tb.Fatalf("durabletest: the engine was not idle within %s of real time (Options.Timeout); busy:\n%s",
				time.Since(start).Round(time.Millisecond), what)
		}
	}
}

// quietNow reports whether the engine on PostgreSQL has nothing to do at
// this instant: no call of its that may change a run was under way
// before, during or after the kit read the runs, no message for a run was
// left pending (the kit applies those it finds, as the leader would), and
// no run in flight is busy (runState.busy).
func (k *Kit) quietNow() bool {
	k.tb.Helper()
	calls := k.watch.calls.Load()
	if k.watch.inflight.Load() != 0 {
		return false
	}
	applied, err := k.pg.store.ApplyInbox(k.ctx, &store.ApplyInboxParams{})
	if err != nil {
		k.tb.Fatalf("durabletest: applying pending messages: %v", err)
	}
	if applied.Applied > 0 {
		k.watch.touch()
		return false
	}
	busy := k.busyRuns()
	return len(busy) == 0 && k.watch.inflight.Load() == 0 && k.watch.calls.Load() == calls
}

// busyRuns describes the runs in flight that are busy (runState.busy),
// with what each waits for.
func (k *Kit) busyRuns() []string {
	k.tb.Helper()
	now := k.now()
	var busy []string
	p := &store.ListRunsParams{Filter: store.RunFilter{TopLevel: true}, Limit: 100}
	for {
		page, err := k.store.ListRuns(k.ctx, p)
		if err != nil {
			k.tb.Fatalf("durabletest: listing runs: %v", err)
		}
		for _, r := range page.Runs {
			if !r.FinishedAt.IsZero() {
				continue
			}
			if st := k.analyzeAt(r.ID, r.Workflow, r.Tenant, now); st.busy {
				busy = append(busy, fmt.Sprintf("  run %s (%s):", r.ID, r.Workflow))
				for _, l := range st.lines {
					busy = append(busy, "  "+l)
				}
			}
		}
		if !page.More || len(page.Runs) == 0 {
			return busy
		}
		last := page.Runs[len(page.Runs)-1]
		p.After = &store.RunKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}
