package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectivelabs/durable/internal/core/sleep"
)

// Statement-counting methods of the idle scenario besides MethodServerLog.
const (
	MethodStatements = "pg_stat_statements"
	MethodDatabase   = "pg_stat_database"
)

// minSettle is the shortest settling time: it leaves the bench's own earlier
// statements time to reach the statistics (a backend publishes its counters
// at most once a second).
const minSettle = 2 * time.Second

// Owners of sessions that are not workers, in the server log's attribution.
const (
	ownerBench     = "(bench)"     // the bench's own monitor, client and stats connections
	ownerListeners = "(listeners)" // notification listeners, named alike by every worker
)

// sessions maps the backends (PIDs) of the measured database to the worker
// or role owning them. In-process workers report their connections' PIDs as
// they connect; worker processes are known by the application names of
// their connections, sampled from pg_stat_activity.
type sessions struct {
	mu    sync.Mutex
	owner map[int32]string
	name  map[int32]string // application name, or backend type, as sampled
}

func newSessions() *sessions {
	return &sessions{owner: map[int32]string{}, name: map[int32]string{}}
}

// hook returns a pgconn AfterConnect hook recording the connections of
// worker id, chained before next (which may be nil).
func (s *sessions) hook(id string, next pgconn.AfterConnectFunc) pgconn.AfterConnectFunc {
	return func(ctx context.Context, c *pgconn.PgConn) error {
		s.mu.Lock()
		s.owner[int32(c.PID())] = id
		s.mu.Unlock()
		if next != nil {
			return next(ctx, c)
		}
		return nil
	}
}

// idle starts idle workers on an empty queue, lets them settle, and counts
// the statements they cost the database over Duration: on the server, and,
// for in-process workers, exactly, on their connections. The server count
// comes from the server log (each statement line attributed to a worker by
// its backend's PID) when the measured database logs every statement and
// the log can be read; else from pg_stat_statements when loaded; else from
// pg_stat_database's transaction count, minus the bench's own.
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
	srvLog, logProblem := b.openServerLog(ctx)
	defer func() { srvLog.close() }()
	counting := method
	if srvLog != nil {
		counting = MethodServerLog
	}
	b.logf("workers listening; settling for %s, then measuring for %s (%s)", settle, b.o.Duration, counting)
	if !sleep.For(ctx, settle) {
		return ctx.Err()
	}

	var logStart, logEnd time.Time // when the window's marker statements returned
	seen := map[int32]string{}
	sample := func(start time.Time) error { return b.sampleSessions(ctx, start, f, seen) }
	if srvLog != nil {
		// The window opens with a marker statement, once it is in the log;
		// a log that never shows it is not this server's.
		if err := b.mark(ctx, srvLog.count.startMark); err != nil {
			return err
		}
		logStart = time.Now()
		if err := srvLog.waitFor(ctx, func() bool { return srvLog.count.started }, 10*time.Second); err != nil {
			logProblem = err
			srvLog.close()
			srvLog = nil
		}
	}
	own0 := b.monCount.Counts()
	workers0 := f.counts()
	srv0, start, err := b.serverCount(ctx, method, view)
	if err != nil {
		return err
	}
	leader0, err := b.leader(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := sample(start); err != nil {
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
			if err := sample(start); err != nil {
				return err
			}
		}
	}
	if srvLog != nil {
		if err := b.mark(ctx, srvLog.count.endMark); err != nil {
			return err
		}
		logEnd = time.Now()
	}
	own := b.monCount.Counts().Sub(own0)
	srv1, _, err := b.serverCount(ctx, method, view)
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	workers := f.counts()
	if err := sample(start); err != nil { // sessions active near the end
		return err
	}
	leader, err := b.leader(ctx)
	if err != nil {
		return err
	}
	if srvLog != nil {
		if err := srvLog.waitFor(ctx, func() bool { return srvLog.count.ended }, 10*time.Second); err != nil {
			logProblem = err
			srvLog.close()
			srvLog = nil
		}
	}
	f.stop()

	// Each round trip but a ping ends a transaction on the server. With a
	// scratch database the counters are read from another one, and the
	// monitor only runs the end marker in the measured one.
	ownN := own.RoundTrips - own.Pings
	if method == MethodStatements {
		ownN = own.Statements
	}
	statCount := float64(srv1-srv0-ownN) / secs
	if srvLog != nil {
		rep.Method = MethodServerLog
		b.reportServerLog(rep, f, srvLog, leader, logEnd.Sub(logStart).Seconds())
	} else {
		rep.Method = method
		rep.AddGoal("statements_per_s_per_worker", "statements/s per worker ("+method+")", statCount/float64(W), "stmt/s", 3, AtMost(1))
		rep.Add("statements_per_s", "statements/s, all workers ("+method+")", statCount, "stmt/s", 3)
	}
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
	others := map[int32]string{}
	for pid, name := range seen {
		if b.isOther(name) {
			others[pid] = name
		}
	}
	rep.Add("other_sessions", "other sessions active in the database", float64(len(others)), "sessions", 0)
	rep.Add("measured_s", "measured for", secs, "s", 1)

	if b.scratchDB != "" {
		rep.Note("measured in the scratch database %s, so that the server's per-database counters see only this benchmark", b.scratchDB)
	}
	if srvLog == nil {
		rep.Note("server count: %s, because the server log could not be used: %v", method, logProblem)
		minus := ""
		if ownN != 0 {
			minus = fmt.Sprintf(", minus the bench's own %d", ownN)
		}
		switch method {
		case MethodStatements:
			rep.Note("server count: calls in pg_stat_statements for the database%s; it does not see pings", minus)
		default:
			rep.Note("server count: transactions, not statements: xact_commit + xact_rollback of pg_stat_database for the database "+
				"(pg_stat_statements is not loaded)%s; every statement outside an explicit transaction is one transaction, "+
				"a transaction of several statements counts once, and pings are not counted", minus)
		}
		rep.Note("PostgreSQL publishes a backend's counters at most once a second, and may hold an idle backend's back until its next statement: " +
			"the server count is blurred by about one burst per connection at each end of the window")
	} else if method != "" {
		rep.Note("for comparison, %s over the same window: %s statements/s per worker", method, FormatNumber(statCount/float64(W), 3))
	}
	if len(workers) > 0 {
		rep.Note("round trips include what the tracer does not see: pgx's pings (pool health checks on acquire, the leader's connection check) and statement preparation")
	}
	if len(others) > 0 {
		names := make([]string, 0, len(others))
		for _, n := range others {
			names = append(names, n)
		}
		slices.Sort(names)
		rep.Note("%d other session(s) used this database during the window (%s): the server count includes their statements "+
			"(unless it is the server log's, which leaves them out); the in-process counts do not", len(others), strings.Join(dedupe(names, 5), ", "))
	}
	if leader != "" {
		rep.Note("leader: %s (it fires timers, rescues dead tasks and renews its lease every third of it, which refreshes its worker record; the others poll the lease every half lease, poll for work and refresh their worker records)", leader)
	}
	if leader0 != leader {
		rep.Note("the leader changed during the window (from %q to %q): the split between leader and non-leaders is blurred", leader0, leader)
	}
	return nil
}

// reportServerLog adds the figures counted from the server log: statements
// per second of the leader and of each other worker.
func (b *bencher) reportServerLog(rep *Report, f *fleet, l *serverLog, leader string, secs float64) {
	per := map[string]int64{}
	conns := map[string]int{}
	b.pids.mu.Lock()
	for pid, n := range l.count.perPID {
		owner, ok := b.pids.owner[pid]
		if !ok {
			owner = "(other: " + b.pids.name[pid] + ")"
			if b.pids.name[pid] == "" {
				owner = "(other: unknown)"
			}
		}
		per[owner] += n
		conns[owner]++
	}
	b.pids.mu.Unlock()

	W := float64(len(f.ids))
	var all int64
	var leaderRate, maxOther, sumOther float64
	table := Table{Title: "PER WORKER (server log: statements of its backends)",
		Columns: []string{"worker", "leader", "statements", "statements/s", "backends"}}
	for _, id := range f.ids {
		n := per[id]
		all += n
		rate := float64(n) / secs
		lead := "no"
		if id == leader {
			lead = "yes"
			leaderRate = rate
		} else {
			maxOther = max(maxOther, rate)
			sumOther += rate
		}
		table.Rows = append(table.Rows, []any{id, lead, n, round3(rate), conns[id]})
	}
	listeners := per[ownerListeners]
	all += listeners
	rep.AddGoal("statements_per_s_per_worker", "statements/s per worker, mean ("+MethodServerLog+")", float64(all)/secs/W, "stmt/s", 3, AtMost(1))
	rep.Add("statements_per_s", "statements/s, all workers ("+MethodServerLog+")", float64(all)/secs, "stmt/s", 3)
	if leader != "" {
		rep.AddGoal("leader_statements_per_s", "statements/s, leader ("+MethodServerLog+")", leaderRate, "stmt/s", 3, AtMost(1))
	}
	if others := len(f.ids) - 1; others > 0 && leader != "" {
		rep.AddGoal("non_leader_statements_per_s", "statements/s, busiest non-leader ("+MethodServerLog+")", maxOther, "stmt/s", 3, AtMost(1))
		rep.Add("non_leader_statements_per_s_mean", "statements/s, non-leader mean ("+MethodServerLog+")", sumOther/float64(others), "stmt/s", 3)
	}
	rep.Tables = append(rep.Tables, table)
	rep.Note("server count: lines \"LOG:  statement:\" and \"LOG:  execute\" in the server log %s (log_statement = 'all' on the measured database), "+
		"between two marker statements of the bench; pings, BEGIN and COMMIT count as statements; "+
		"attributed to workers by backend PID (the PIDs of in-process workers' connections as they connect, "+
		"and the application names of the database's sessions sampled every 5s)", l.path)
	if listeners > 0 {
		rep.Note("%d statement(s) came from notification listeners, which carry no worker's name: counted in the mean, not per worker", listeners)
	}
	var unattributed []string
	for owner, n := range per {
		if strings.HasPrefix(owner, "(other") {
			unattributed = append(unattributed, fmt.Sprintf("%s %d", owner, n))
		}
	}
	if len(unattributed) > 0 {
		slices.Sort(unattributed)
		rep.Note("statements of other sessions, left out: %s", strings.Join(unattributed, ", "))
	}
}

// openServerLog opens the server log when the measured database logs
// every statement; it returns nil and why when it cannot be used.
func (b *bencher) openServerLog(ctx context.Context) (*serverLog, error) {
	var setting string
	if err := b.monitor.QueryRow(ctx, `SELECT current_setting('log_statement')`).Scan(&setting); err != nil {
		return nil, fmt.Errorf("reading log_statement: %w", err)
	}
	if setting != "all" {
		if b.scratchDB == "" {
			return nil, fmt.Errorf("log_statement is %q, not 'all', and the bench sets it only on a scratch database", setting)
		}
		return nil, fmt.Errorf("log_statement is %q, not 'all' (setting it on the scratch database needs a superuser)", setting)
	}
	l, err := openServerLog(ctx, b.stats, b.o.ServerLog)
	if err != nil {
		return nil, err
	}
	l.count.db = b.dbName
	l.count.startMark = "durable-bench-mark:" + b.tag + ":start"
	l.count.endMark = "durable-bench-mark:" + b.tag + ":end"
	return l, nil
}

// mark runs a marker statement on the monitor, which the server logs.
func (b *bencher) mark(ctx context.Context, text string) error {
	if _, err := b.monitor.Exec(ctx, "SELECT '"+text+"'", pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("marking the server log: %w", err)
	}
	return nil
}

// isOther reports whether a session's name (sampled by sampleSessions) is
// neither the bench's nor a worker's.
func (b *bencher) isOther(name string) bool {
	return !strings.HasSuffix(name, ":"+b.schema) && !strings.HasPrefix(name, "durable-elector:bench-"+b.tag+"-")
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

// statsMethod picks how to count the server's statements without the
// server log: pg_stat_statements when the extension is installed and
// preloaded (view is its qualified name), pg_stat_database otherwise.
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

// sampleSessions records the sessions of the measured database: every
// session's owner for the server log (workers by the application names of
// their connections), and in seen the sessions that ran something since
// start (autovacuum workers included), by name.
func (b *bencher) sampleSessions(ctx context.Context, start time.Time, f *fleet, seen map[int32]string) error {
	rows, err := b.stats.Query(ctx, `
SELECT pid, CASE WHEN backend_type = 'client backend' THEN coalesce(application_name, '') ELSE backend_type END,
       coalesce(pid <> pg_backend_pid() AND (state = 'active' OR state_change >= $1 OR xact_start >= $1), false)
FROM pg_stat_activity WHERE datname = $2`,
		pgx.QueryExecModeSimpleProtocol, start, b.dbName)
	if err != nil {
		return fmt.Errorf("reading pg_stat_activity: %w", err)
	}
	defer rows.Close()
	b.pids.mu.Lock()
	defer b.pids.mu.Unlock()
	for rows.Next() {
		var pid int32
		var name string
		var active bool
		if err := rows.Scan(&pid, &name, &active); err != nil {
			return err
		}
		b.pids.name[pid] = name
		if _, ok := b.pids.owner[pid]; !ok {
			if owner := b.ownerOf(name, f); owner != "" {
				b.pids.owner[pid] = owner
			}
		}
		if active {
			seen[pid] = name
		}
	}
	return rows.Err()
}

// ownerOf maps a session's application name to a worker of f (its pool,
// named by appName, or its elector, named by pgstore), the bench, or the
// listeners; "" for anything else.
func (b *bencher) ownerOf(name string, f *fleet) string {
	suffix := ":" + b.schema
	role, ok := strings.CutSuffix(name, suffix)
	if !ok {
		return ""
	}
	if id, ok := strings.CutPrefix(role, "durable-elector:"); ok && slices.Contains(f.ids, id) {
		return id
	}
	if role == "durable-listener" {
		return ownerListeners
	}
	if r, ok := strings.CutPrefix(role, "durable-bench-"); ok {
		for _, id := range f.ids {
			if r == b.workerRole(id) {
				return id
			}
		}
		return ownerBench
	}
	return ""
}

// leader returns the worker ID of the engine holding the leader's lease
// (the leader table, on the database's clock), or "". The monitor reads it,
// in the measured database; its statements are the bench's own.
func (b *bencher) leader(ctx context.Context) (string, error) {
	var id string
	err := b.monitor.QueryRow(ctx, `SELECT coalesce((SELECT worker FROM `+pgx.Identifier{b.schema, "leader"}.Sanitize()+
		` WHERE expires_at > now()), '')`, pgx.QueryExecModeSimpleProtocol).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("finding the leader: %w", err)
	}
	return id, nil
}
