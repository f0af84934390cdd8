package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable/internal/sleep"
)

// Statement-counting methods of the idle scenario.
const (
	MethodStatements = "pg_stat_statements"
	MethodDatabase   = "pg_stat_database"
)

// minSettle is the shortest settling time: it leaves the bench's own earlier
// statements time to reach the statistics (a backend publishes its counters
// at most once a second).
const minSettle = 2 * time.Second

// idle starts idle workers on an empty queue, lets them settle, and counts
// the statements they cost the database over Duration: on the server
// (pg_stat_statements when loaded, else the database's transaction count
// from pg_stat_database, minus the bench's own), and, for in-process
// workers, exactly, on their connections.
func (b *bencher) idle(ctx context.Context, rep *Report) error {
	W := b.o.Workers
	settle := b.o.Settle
	rep.Description = fmt.Sprintf("%d idle workers on an empty queue, measured for %s after %s of settling", W, b.o.Duration, settle)
	f, err := b.startFleet(ctx, workerSpec{n: W, concurrency: b.o.Concurrency,
		claimBatch: b.o.ClaimBatch, finishBatch: b.o.FinishBatch, name: "w"})
	if err != nil {
		return err
	}
	defer f.stop()
	if err := f.waitListening(ctx); err != nil {
		return err
	}
	method, view, err := b.statsMethod(ctx)
	if err != nil {
		return err
	}
	b.logf("workers listening; settling for %s, then measuring for %s (%s)", settle, b.o.Duration, method)
	if !sleep.For(ctx, settle) {
		return ctx.Err()
	}

	own0 := b.monCount.Counts()
	workers0 := f.counts()
	srv0, start, err := b.serverCount(ctx, method, view)
	if err != nil {
		return err
	}
	t0 := time.Now()
	others := map[int32]string{}
	sample := func() error { return b.otherSessions(ctx, start, others) }
	if err := sample(); err != nil {
		return err
	}
	// Sample every 5s, but not in the last 2s, so that the samples' own
	// statistics are flushed before the final count.
	for {
		left := b.o.Duration - time.Since(t0)
		if left <= 0 {
			break
		}
		d := left
		if left > 7*time.Second {
			d = 5 * time.Second
		}
		if !sleep.For(ctx, d) {
			return ctx.Err()
		}
		if b.o.Duration-time.Since(t0) > 2*time.Second {
			if err := sample(); err != nil {
				return err
			}
		}
	}
	own := b.monCount.Counts().Sub(own0)
	srv1, _, err := b.serverCount(ctx, method, view)
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	workers := f.counts()
	if err := sample(); err != nil { // sessions active near the end
		return err
	}
	leader, err := b.leader(ctx)
	if err != nil {
		return err
	}
	f.stop()

	// Each round trip but a ping ends a transaction on the server.
	ownN := own.RoundTrips - own.Pings
	if method == MethodStatements {
		ownN = own.Statements
	}
	if b.scratchDB != "" {
		ownN = 0 // the counters were read from another database
	}
	server := float64(srv1-srv0-ownN) / secs
	rep.AddGoal("statements_per_s_per_worker", "statements/s per worker ("+method+")", server/float64(W), "stmt/s", 3, AtMost(1))
	rep.Add("statements_per_s", "statements/s, all workers ("+method+")", server, "stmt/s", 3)
	if len(workers) > 0 {
		var st, rt int64
		table := Table{Title: "PER WORKER (in-process, counted on its connections)",
			Columns: []string{"worker", "leader", "statements", "round trips", "pool pings", "statements/s", "round trips/s"}}
		for i, c := range workers {
			d := c.Sub(workers0[i])
			st += d.Statements
			rt += d.RoundTrips
			lead := "no"
			if f.ids[i] == leader {
				lead = "yes"
			}
			table.Rows = append(table.Rows, []any{f.ids[i], lead, d.Statements, d.RoundTrips, d.Pings,
				round3(float64(d.Statements) / secs), round3(float64(d.RoundTrips) / secs)})
		}
		rep.AddGoal("traced_statements_per_s_per_worker", "statements/s per worker (pgx tracer, exact)",
			float64(st)/secs/float64(W), "stmt/s", 3, AtMost(1))
		rep.AddGoal("round_trips_per_s_per_worker", "round trips/s per worker (Query+Sync messages, exact)",
			float64(rt)/secs/float64(W), "trips/s", 3, AtMost(1))
		rep.Tables = append(rep.Tables, table)
	}
	rep.Add("other_sessions", "other sessions active in the database", float64(len(others)), "sessions", 0)
	rep.Add("measured_s", "measured for", secs, "s", 1)

	if b.scratchDB != "" {
		rep.Note("measured in the scratch database %s, so that the server's per-database counters see only this benchmark", b.scratchDB)
	}
	minus := ""
	if b.scratchDB == "" {
		minus = fmt.Sprintf(", minus the bench's own %d", ownN)
	}
	switch method {
	case MethodStatements:
		rep.Note("server count: calls in pg_stat_statements for the database%s; it does not see pings", minus)
	default:
		rep.Note("server count: xact_commit + xact_rollback of pg_stat_database for the database (pg_stat_statements is not loaded)%s; "+
			"every statement outside an explicit transaction is one transaction; pings are not", minus)
	}
	rep.Note("PostgreSQL publishes a backend's counters at most once a second, and may hold an idle backend's back until its next statement: " +
		"the server count is blurred by about one burst per connection at each end of the window")
	if len(workers) > 0 {
		rep.Note("round trips include what the tracer does not see: pgx's pings (pool health checks on acquire, the leader's connection check) and statement preparation")
	}
	if len(others) > 0 {
		names := make([]string, 0, len(others))
		for _, n := range others {
			names = append(names, n)
		}
		rep.Note("%d other session(s) used this database during the window (%s): the server count includes their statements; "+
			"the in-process counts do not", len(others), strings.Join(dedupe(names, 5), ", "))
	}
	if leader != "" {
		rep.Note("leader: %s (it fires timers, rescues dead tasks and checks its connection; the others block on the leader lock)", leader)
	}
	return nil
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// dedupe returns the distinct values of xs, at most n of them, then "...".
func dedupe(xs []string, n int) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if x == "" {
			x = "(unnamed)"
		}
		if seen[x] {
			continue
		}
		seen[x] = true
		if len(out) == n {
			return append(out, "...")
		}
		out = append(out, x)
	}
	return out
}

func (f *fleet) counts() []Counts {
	out := make([]Counts, len(f.counters))
	for i, c := range f.counters {
		out[i] = c.Counts()
	}
	return out
}

// statsMethod picks how to count the server's statements: pg_stat_statements
// when the extension is installed and preloaded (view is its qualified
// name), pg_stat_database otherwise.
func (b *bencher) statsMethod(ctx context.Context) (method, view string, err error) {
	var schema *string
	err = b.stats.QueryRow(ctx, `
SELECT (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_stat_statements')
WHERE current_setting('shared_preload_libraries') LIKE '%pg_stat_statements%'`).Scan(&schema)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("looking for pg_stat_statements: %w", err)
	}
	if schema == nil {
		return MethodDatabase, "", nil
	}
	return MethodStatements, pgx.Identifier{*schema, "pg_stat_statements"}.Sanitize(), nil
}

// serverCount reads the server's statement count for this database, and
// the database's clock.
func (b *bencher) serverCount(ctx context.Context, method, view string) (int64, time.Time, error) {
	q := `SELECT xact_commit + xact_rollback, now() FROM pg_stat_database WHERE datname = $1`
	if method == MethodStatements {
		q = `SELECT coalesce(sum(calls), 0)::bigint, now() FROM ` + view +
			` WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)`
	}
	var n int64
	var now time.Time
	if err := b.stats.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol, b.dbName).Scan(&n, &now); err != nil {
		return 0, time.Time{}, fmt.Errorf("reading %s: %w", method, err)
	}
	return n, now, nil
}

// otherSessions adds to seen the sessions of this database (autovacuum
// workers included), other than the benchmark's, that ran something since
// start.
func (b *bencher) otherSessions(ctx context.Context, start time.Time, seen map[int32]string) error {
	rows, err := b.stats.Query(ctx, `
SELECT pid, CASE WHEN backend_type = 'client backend' THEN coalesce(application_name, '') ELSE backend_type END
FROM pg_stat_activity
WHERE datname = $4 AND pid <> pg_backend_pid()
  AND application_name NOT LIKE $1 AND application_name NOT LIKE $2
  AND (state = 'active' OR state_change >= $3 OR xact_start >= $3)`,
		pgx.QueryExecModeSimpleProtocol, "%:"+b.schema, "durable-elector:bench-"+b.tag+"-%", start, b.dbName)
	if err != nil {
		return fmt.Errorf("reading pg_stat_activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int32
		var name string
		if err := rows.Scan(&pid, &name); err != nil {
			return err
		}
		seen[pid] = name
	}
	return rows.Err()
}

// leader returns the worker ID of the engine holding the leader lock, from
// its elector connection's name, or "".
func (b *bencher) leader(ctx context.Context) (string, error) {
	var name string
	err := b.stats.QueryRow(ctx, `
SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND a.datname = $2
  AND a.application_name LIKE 'durable-elector:%' AND a.application_name LIKE $1
LIMIT 1`, pgx.QueryExecModeSimpleProtocol, "%:"+b.schema, b.dbName).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("finding the leader: %w", err)
	}
	id := strings.TrimPrefix(name, "durable-elector:")
	return strings.TrimSuffix(id, ":"+b.schema), nil
}
