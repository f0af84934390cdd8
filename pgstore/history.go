package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectivelabs/durable/internal/core/sleep"
)

// The history (runs, tasks, events) lives in time partitions (migration
// 017): runs_<suffix>, tasks_<suffix> and events_<suffix> hold the runs
// whose ids are in a period's range [lo, hi) and their tasks and events;
// the default partitions hold the rest (rows older than the partitions,
// runs whose ids are not time-ordered, runs kept past their period's end).
// The leader creates each period's partitions ahead of time and, once its
// runs have expired, drops them whole, moving the runs still kept into the
// default partitions first (maintainHistory). history_partitions lists the
// periods.
//
// A statement that names a partitioned table costs more with every
// partition: PostgreSQL 15 locks all of them for a generic plan, and
// prepares a scan of each. A statement whose rows all belong to the runs
// of one of its arguments (annotated "-- route: $N" in sql/) is therefore
// sent naming the period's partitions instead, when all those runs are in
// one period the store knows (route): docs/design.md, "Deletes or
// partitions". The parent tables serve everything else.

// historyPeriod is one period's partitions.
type historyPeriod struct {
	lo, hi uuid.UUID
	suffix string
}

// historyPeriods is what a store knows of the periods, sorted by lo.
type historyPeriods struct {
	list []historyPeriod
	at   time.Time // when read
}

// of returns the period holding id, if the store knows one.
func (h *historyPeriods) of(id [16]byte) (historyPeriod, bool) {
	i, _ := slices.BinarySearchFunc(h.list, id, func(p historyPeriod, id [16]byte) int {
		return compareUUID(p.hi, id) // the first period whose hi > id
	})
	for ; i < len(h.list) && compareUUID(h.list[i].hi, id) <= 0; i++ {
	}
	if i < len(h.list) && compareUUID(h.list[i].lo, id) <= 0 {
		return h.list[i], true
	}
	return historyPeriod{}, false
}

// common returns the suffix of the partitions holding the runs of ids:
// one period's, or "default", when the store knows it.
func (h *historyPeriods) common(ids [][16]byte) (string, bool) {
	newest := h.newest()
	var suffix string
	for i, id := range ids {
		s := "default"
		if p, ok := h.of(id); ok {
			s = p.suffix
		} else if compareUUID(id, newest) >= 0 {
			return "", false // a period made since may hold it
		}
		if i > 0 && s != suffix {
			return "", false
		}
		suffix = s
	}
	return suffix, suffix != ""
}

// newest is the end of the newest period, or the zero UUID.
func (h *historyPeriods) newest() uuid.UUID {
	if len(h.list) == 0 {
		return uuid.UUID{}
	}
	return h.list[len(h.list)-1].hi
}

func compareUUID(a, b [16]byte) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// boundOf is the smallest UUID of the time t in the UUIDv7 layout: t's
// Unix milliseconds in the first 48 bits, zeros after.
func boundOf(t time.Time) uuid.UUID {
	var u uuid.UUID
	ms := uint64(max(t.UnixMilli(), 0))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], ms<<16)
	copy(u[:6], b[:6])
	return u
}

// timeOf is the time of a bound (boundOf's inverse).
func timeOf(u uuid.UUID) time.Time {
	var b [8]byte
	copy(b[2:], u[:6])
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[:]))).UTC()
}

// suffixOf names a period's partitions by its start: p20261129t000000.
func suffixOf(lo time.Time) string {
	return "p" + lo.UTC().Format("20060102t150405")
}

// historyPeriodFor is the length of the periods for a retention: a
// quarter of it, rounded down to one of a few lengths, between a second
// and a day, so that a run is deleted at most a quarter of the retention
// (or a day) after it expires.
func historyPeriodFor(retention time.Duration) time.Duration {
	lengths := []time.Duration{24 * time.Hour, 6 * time.Hour, time.Hour, 15 * time.Minute, 5 * time.Minute,
		time.Minute, 15 * time.Second, 5 * time.Second, time.Second}
	for _, l := range lengths {
		if l <= retention/4 {
			return l
		}
	}
	return time.Second
}

// router is the store's state for routing statements to partitions.
type router struct {
	// args is the argument (0-based) holding the run ids of each routed
	// statement, by its SQL.
	args map[string]int
	// periods is what the store knows of the periods; nil until read.
	periods atomic.Pointer[historyPeriods]
	// variants holds the SQL of routed statements for a period, by
	// routeKey.
	variants sync.Map
	// reading is set while the periods are being read.
	reading atomic.Bool
	// warned and noted are when warnHistory and the note of a worker
	// predating the periods were last logged (Unix nanoseconds).
	warned, noted atomic.Int64
	// forgot counts the times the store forgot the periods: a read that
	// began before one of them does not store what it read (readPeriods),
	// which may name a partition dropped since. mu orders the two.
	forgot atomic.Uint64
	mu     sync.Mutex
}

type routeKey struct{ sql, suffix string }

// periodSuffix matches the suffixes suffixOf makes.
var periodSuffix = regexp.MustCompile(`^p[0-9]{8}t[0-9]{6}$`)

// partitionName matches the name of a period's partition in an error.
var partitionName = regexp.MustCompile(`(runs|tasks|events)_p[0-9]{8}t[0-9]{6}`)

// historyTable matches the parent tables in a rendered statement.
var historyTable = regexp.MustCompile(`(\.(?:runs|tasks|events))([^A-Za-z0-9_]|$)`)

// variant is sql naming the partitions of the period suffix.
func (r *router) variant(sql, suffix string) string {
	k := routeKey{sql, suffix}
	if v, ok := r.variants.Load(k); ok {
		return v.(string)
	}
	v := historyTable.ReplaceAllString(sql, "${1}_"+suffix+"${2}")
	r.variants.Store(k, v)
	return v
}

// periodStale is how long a store routes with the periods it read before
// reading them again when a run is newer than the newest it knows, and
// periodRefresh before reading them again anyway (a period dropped by
// another store's retention, which a statement sent alone names until
// then: it fails as a transient error).
const (
	periodStale   = 5 * time.Second
	periodRefresh = 30 * time.Second
)

// routed is sql naming the partitions of the period of the run ids ids
// when sql is routed and they are all in one period the store knows (see
// route), for a statement sent alone; its caller hands the store its
// error (forgetPeriods, queryRouted), so that a period dropped since is
// forgotten.
func (s *Store) routed(sql string, ids any) string {
	b := pgx.Batch{QueuedQueries: []*pgx.QueuedQuery{{SQL: sql, Arguments: []any{ids}}}}
	if arg, ok := s.router.args[sql]; !ok || arg != 0 {
		return sql
	}
	s.route(&b)
	return b.QueuedQueries[0].SQL
}

// queryRouted queries sql, routed by its first argument (routed), on q:
// an error of the query or of its rows that names a dropped partition
// makes the store forget the periods (forgetPeriods).
func (s *Store) queryRouted(ctx context.Context, q querier, sql string, args ...any) (pgx.Rows, error) {
	rows, err := q.Query(ctx, s.routed(sql, args[0]), args...)
	if err != nil {
		s.forgetPeriods(err)
		return nil, err
	}
	return routedRows{rows, s}, nil
}

// routedRows are the rows of queryRouted.
type routedRows struct {
	pgx.Rows
	s *Store
}

func (r routedRows) Err() error {
	err := r.Rows.Err()
	if err != nil {
		r.s.forgetPeriods(err)
	}
	return err
}

// route rewrites the routed statements of b whose runs are all in one
// period the store knows to name that period's partitions, or all in the
// default partitions to name those.
//
// A run is in the default partitions when no period holds its ID: the
// store knows that of the IDs below the end of the newest period it read,
// outside the periods it read. A period made since begins at or after that
// end (periods are made ahead, after the newest), and one dropped since
// moved the runs it kept to the default partitions (a statement naming
// its partitions then fails: forgetPeriods).
func (s *Store) route(b *pgx.Batch) {
	h := s.router.periods.Load()
	for _, qq := range b.QueuedQueries {
		arg, ok := s.router.args[qq.SQL]
		if !ok || arg >= len(qq.Arguments) {
			continue
		}
		ids := uuidsOf(qq.Arguments[arg])
		if len(ids) == 0 {
			continue
		}
		if h == nil || time.Since(h.at) > periodRefresh || (compareUUID(ids[0], h.newest()) >= 0 && time.Since(h.at) > periodStale) {
			s.readPeriodsSoon()
			if h == nil {
				return
			}
		}
		if suffix, ok := h.common(ids); ok {
			qq.SQL = s.router.variant(qq.SQL, suffix)
		}
	}
}

// uuidsOf reads the run ids of a routed statement's argument.
func uuidsOf(arg any) [][16]byte {
	switch v := arg.(type) {
	case [][16]byte:
		return v
	case []uuid.UUID:
		out := make([][16]byte, len(v))
		for i, id := range v {
			out[i] = id
		}
		return out
	case uuid.UUID:
		return [][16]byte{v}
	case [16]byte:
		return [][16]byte{v}
	}
	return nil
}

// readPeriodsSoon reads the periods in the background, unless a read is
// under way.
func (s *Store) readPeriodsSoon() {
	if !s.router.reading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.router.reading.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := s.readPeriods(ctx, s.pool); err != nil {
			s.log.Debug("durable: reading the history's periods", "error", err)
		}
	}()
}

// readPeriods reads the periods from history_partitions, for the store
// to route its statements with, and returns them. The statements it
// rewrote for periods no longer there are forgotten.
func (s *Store) readPeriods(ctx context.Context, q querier) (*historyPeriods, error) {
	forgot := s.router.forgot.Load()
	h, err := s.periodsIn(ctx, q)
	if err != nil {
		return nil, err
	}
	s.router.mu.Lock()
	if s.router.forgot.Load() == forgot {
		s.router.periods.Store(h)
	}
	s.router.mu.Unlock()
	s.router.variants.Range(func(k, _ any) bool {
		if suffix := k.(routeKey).suffix; suffix != "default" && !slices.ContainsFunc(h.list, func(p historyPeriod) bool { return p.suffix == suffix }) {
			s.router.variants.Delete(k)
		}
		return true
	})
	return h, nil
}

// periodsIn reads the periods from history_partitions.
func (s *Store) periodsIn(ctx context.Context, q querier) (*historyPeriods, error) {
	rows, err := q.Query(ctx, s.q.historyPeriods)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	h := &historyPeriods{at: time.Now()}
	for rows.Next() {
		var p historyPeriod
		if err := rows.Scan(p16(&p.lo), p16(&p.hi), &p.suffix); err != nil {
			return nil, err
		}
		if !periodSuffix.MatchString(p.suffix) || p.suffix != suffixOf(timeOf(p.lo)) {
			// The name goes into statements as it is: only the names
			// suffixOf makes are taken.
			return nil, fmt.Errorf("pgstore: history_partitions lists a period named %q, which durable does not make", p.suffix)
		}
		h.list = append(h.list, p)
	}
	return h, rows.Err()
}

// forgetPeriods drops what the store knows of the periods after a
// statement named a partition that is gone (dropped since the store read
// the periods): the next statements use the parent tables until the
// periods are read again.
func (s *Store) forgetPeriods(err error) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		s.router.mu.Lock()
		s.router.forgot.Add(1)
		s.router.periods.Store(nil)
		s.router.mu.Unlock()
	}
}

// historyMigration is the migration that partitioned the history.
const historyMigration = 17

// schemaLevel is the newest migration this code embeds, which its
// workers record (workers.schema_level).
var schemaLevel = sync.OnceValue(func() int {
	all, err := migrations()
	if err != nil || len(all) == 0 {
		return 0
	}
	return all[len(all)-1].version
})

// historyLock is how long the leader waits for the first lock of a
// partition change (lockHistoryTasks) before it gives up until its next
// try: the statements that queue behind its request wait as long.
// historyLockRest is how long it waits for each lock after that one, while
// it holds tasks: a transaction that holds the table it waits for may be
// waiting for tasks (lockHistoryTasks in sql/history.sql), so it gives way
// soon.
const (
	historyLock     = 200 * time.Millisecond
	historyLockRest = 50 * time.Millisecond
)

// lockHistory takes the locks of a period change in a transaction of
// historyTx: tasks within historyLock, then the other partitioned tables
// and the fragment then (the rest of what the change locks), each within
// historyLockRest.
func (s *Store) lockHistory(ctx context.Context, tx pgx.Tx, then string) error {
	return execSimple(ctx, tx,
		render(s.schema, sqlFragment("lockHistoryTasks")),
		fmt.Sprintf("SET LOCAL lock_timeout = %d", historyLockRest.Milliseconds()),
		render(s.schema, sqlFragment("lockHistoryParents")),
		render(s.schema, then),
		fmt.Sprintf("SET LOCAL lock_timeout = %d", historyLock.Milliseconds()))
}

// maintainHistory drops the periods that ended more than retention before
// now, moving the runs they still hold (in flight, or created or settled
// less than retention ago) to the default partitions first, and, when
// create is set, creates the partitions of the periods ahead (up to two
// periods of length historyPeriodFor(retention) past now). It reports how
// many settled runs it deleted, and whether a period that expired a whole
// period ago or more is still there (its drop keeps waiting for locks):
// its runs are then to be deleted row by row.
func (s *Store) maintainHistory(ctx context.Context, at time.Time, retention time.Duration, create bool) (deleted int, overdue bool, err error) {
	period := historyPeriodFor(retention)
	var now time.Time
	var old bool
	if err := s.pool.QueryRow(ctx, s.q.historyNow, historyMigration).Scan(&now, &old); err != nil {
		return 0, false, err
	}
	if old && create {
		create = false
		s.logEvery(&s.router.noted, slog.LevelInfo, "durable: no new history period while a worker's engine predates migration 017 (a rolling deploy under way, or its record not yet expired)")
	}
	if !at.IsZero() {
		now = at
	}
	h, err := s.readPeriods(ctx, s.pool)
	if err != nil {
		return 0, false, err
	}
	if err := s.dropGone(ctx); err != nil {
		return 0, false, err
	}
	if err := s.clearFree(ctx); err != nil {
		return 0, false, err
	}
	for _, p := range h.list {
		if timeOf(p.hi).Add(retention).After(now) {
			break
		}
		var n int
		err := s.retryLocks(ctx, func() (err error) {
			n, err = s.dropPeriod(ctx, p, now.Add(-retention))
			return err
		})
		if lockTimedOut(err) { // the next pass tries again
			overdue = !timeOf(p.hi).Add(retention + period).After(now)
			if overdue {
				s.warnHistory("durable: dropping an expired history period keeps waiting for its locks (a long transaction on the history's tables?); its runs are deleted row by row meanwhile",
					"period", p.suffix)
			} else {
				s.log.Debug("durable: dropping a history period waited too long for its locks; next pass", "period", p.suffix)
			}
			break
		}
		if err != nil {
			return deleted, overdue, err
		}
		deleted += n
	}
	for range 3 {
		if !create || retention <= 0 {
			break
		}
		h, err := s.knownPeriods(ctx)
		if err != nil {
			return deleted, overdue, err
		}
		newest := timeOf(h.newest())
		if len(h.list) > 0 && !newest.Before(now.Add(2*period)) {
			break
		}
		lo := newest
		if len(h.list) == 0 || lo.Before(now) {
			// The next period: the one under way has runs in the default
			// partition already, which would have to move (history.go,
			// createPeriod).
			lo = now.Truncate(period).Add(period)
		}
		hi := lo.Truncate(period).Add(period)
		err = s.retryLocks(ctx, func() error {
			return s.createPeriod(ctx, historyPeriod{lo: boundOf(lo), hi: boundOf(hi), suffix: suffixOf(lo)}, !lo.Before(now.Add(freeAhead)))
		})
		if lockTimedOut(err) { // the next pass tries again
			if len(h.list) > 0 && !newest.After(now) { // runs now go where no period takes them
				s.log.Warn("durable: the history's next period waited too long for its locks; new runs go to the default partition until a pass creates it",
					"period", suffixOf(lo))
			}
			break
		}
		if err != nil {
			return deleted, overdue, err
		}
	}
	return deleted, overdue, nil
}

// knownPeriods is what the store knows of the periods, read again when it
// knows nothing (a statement found a partition gone: forgetPeriods).
func (s *Store) knownPeriods(ctx context.Context) (*historyPeriods, error) {
	if h := s.router.periods.Load(); h != nil {
		return h, nil
	}
	return s.readPeriods(ctx, s.pool)
}

// historyWarnEvery is how often at most the store warns that the history's
// periods cannot be kept as they should (warnHistory).
const historyWarnEvery = 10 * time.Minute

// warnHistory logs a warning about the history's periods, at most once
// every historyWarnEvery: the leader's retention tries every pass.
func (s *Store) warnHistory(msg string, args ...any) {
	s.logEvery(&s.router.warned, slog.LevelWarn, msg, args...)
}

// logEvery logs msg at level unless it logged through last (Unix
// nanoseconds) less than historyWarnEvery ago.
func (s *Store) logEvery(last *atomic.Int64, level slog.Level, msg string, args ...any) {
	now := time.Now().UnixNano()
	was := last.Load()
	if was != 0 && time.Duration(now-was) < historyWarnEvery || !last.CompareAndSwap(was, now) {
		return
	}
	s.log.Log(context.Background(), level, msg, args...)
}

// createPeriod creates a period's partitions, unless a period overlapping
// it exists (another store made it meanwhile).
//
// It locks the partitioned tables (lockHistory), but not the
// periods' partitions, so that the statements naming those go on. A
// period is created ahead of its time, when the default partition holds
// none of its rows, and none moves. Attaching it must prove that: the
// default partitions are first given a constraint that excludes the
// period's range, validated while the statements go on (freeDefaults), so
// that PostgreSQL need not read them under the lock (a second per million
// runs they hold, as after an upgrade). Should they hold some of its rows
// (a caller's run ID that falls in its range, a clock far ahead), the rows
// move under an exclusive lock on the whole tables, which waits for every
// statement on them.
//
// The constraint is given only to a period that begins at least freeAhead
// after now (free): while it is there, a run that falls in the period's
// range cannot be recorded in the default partition, and a period that
// begins sooner may be reached by the clock (periods shorter than a
// minute) before it is attached.
func (s *Store) createPeriod(ctx context.Context, p historyPeriod, free bool) (err error) {
	var proved, held, made bool
	if err := s.preparePeriod(ctx, p); err != nil {
		return err
	}
	if free {
		defer func() {
			if err != nil {
				// Best effort: the next pass clears what is left.
				_ = s.clearFree(ctx)
			}
		}()
		if proved, err = s.freeDefaults(ctx, p); err != nil {
			return err
		}
	}
	var locked time.Time
	err = s.historyTx(ctx, func(tx pgx.Tx, h *historyPeriods) error {
		if overlaps(h, p) {
			return nil
		}
		locked = time.Now()
		if err := s.lockHistory(ctx, tx, sqlFragment("lockHistoryDefaults")); err != nil {
			return err
		}
		if !proved {
			if err := tx.QueryRow(ctx, s.q.defaultHolds, p16(&p.lo), p16(&p.hi)).Scan(&held); err != nil || held {
				return err
			}
		}
		made = true
		return s.attachPeriod(ctx, tx, p, false)
	})
	if made && err == nil {
		s.logPeriod("durable: history period made", time.Since(locked), "period", p.suffix)
	}
	if err != nil || !held {
		return err
	}
	return s.historyTx(ctx, func(tx pgx.Tx, h *historyPeriods) error {
		if overlaps(h, p) {
			return nil
		}
		if err := s.lockHistory(ctx, tx, sqlFragment("lockHistoryTables")); err != nil {
			return err
		}
		return s.attachPeriod(ctx, tx, p, true)
	})
}

// freeDefaults gives each default partition a constraint excluding the
// run ids of the period p (freeConstraint), and validates it: true when it
// holds. The constraint is added in a transaction of its own (a brief
// exclusive lock of the default partitions) and validated in a second,
// which reads them while the statements go on; attachPeriod drops it once
// the period's partitions take the range. It drops first the constraints
// of a creation that did not finish; one whose rows break it is dropped
// too (false: the rows move, createPeriod).
//
// While it is there, a run recorded in the default partition with an id
// in the period's range (one far ahead of the clock) fails, as a transient
// error (transient).
func (s *Store) freeDefaults(ctx context.Context, p historyPeriod) (bool, error) {
	schema := pgx.Identifier{s.schema}.Sanitize()
	exists := false
	err := s.historyTx(ctx, func(tx pgx.Tx, h *historyPeriods) error {
		if exists = overlaps(h, p); exists {
			return nil
		}
		if err := s.dropFree(ctx, tx); err != nil {
			return err
		}
		var stmts []string
		for _, t := range historyTables {
			stmts = append(stmts, fmt.Sprintf(`ALTER TABLE %[1]s.%[2]s_default ADD CONSTRAINT %[3]s CHECK (%[4]s < '%[5]s' OR %[4]s >= '%[6]s') NOT VALID`,
				schema, t.name, pgx.Identifier{freeConstraint(t.name, p.suffix)}.Sanitize(), t.key, p.lo, p.hi))
		}
		return execSimple(ctx, tx, stmts...)
	})
	if err != nil || exists {
		return false, err
	}
	err = s.historyTx(ctx, func(tx pgx.Tx, h *historyPeriods) error {
		// A validation waits for no statement but a VACUUM of the table.
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '5s'"); err != nil {
			return err
		}
		var stmts []string
		for _, t := range historyTables {
			stmts = append(stmts, fmt.Sprintf(`ALTER TABLE %[1]s.%[2]s_default VALIDATE CONSTRAINT %[3]s`,
				schema, t.name, pgx.Identifier{freeConstraint(t.name, p.suffix)}.Sanitize()))
		}
		return execSimple(ctx, tx, stmts...)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" {
		return false, s.historyTx(ctx, func(tx pgx.Tx, _ *historyPeriods) error { return s.dropFree(ctx, tx) })
	}
	return err == nil, err
}

// freeAhead is how far ahead of the clock a period must begin for its
// creation to prove the default partitions free of its rows beforehand
// (createPeriod).
const freeAhead = time.Minute

// freeConstraint names the constraint of the default partition of table
// that excludes the run ids of the period suffix (freeDefaults).
func freeConstraint(table, suffix string) string {
	return table + "_default_free_" + suffix
}

// freeConstraintName matches the names freeConstraint makes.
var freeConstraintName = regexp.MustCompile(`^(runs|tasks|events)_default_free_p[0-9]{8}t[0-9]{6}$`)

// clearFree drops the constraints of freeDefaults that a creation left
// (it gave way, failed or died between adding them and the attach): left
// there, the clock reaches their period, and every run whose id falls in it
// is refused by the default partitions until a creation of that period
// succeeds. Each pass starts with it, and a creation that fails ends with
// it; with nothing left, it is one read of the catalog.
func (s *Store) clearFree(ctx context.Context) error {
	found, err := s.freeConstraints(ctx, s.pool)
	if err != nil || len(found) == 0 {
		return err
	}
	return s.historyTx(ctx, func(tx pgx.Tx, _ *historyPeriods) error { return s.dropFree(ctx, tx) })
}

// freeConstraintRow is a constraint of freeDefaults, with its table.
type freeConstraintRow struct{ Table, Name string }

// freeConstraints lists the constraints of freeDefaults there are.
func (s *Store) freeConstraints(ctx context.Context, q querier) ([]freeConstraintRow, error) {
	rows, err := q.Query(ctx, s.q.freeConstraints, s.schema)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[freeConstraintRow])
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(found, func(c freeConstraintRow) bool { return !freeConstraintName.MatchString(c.Name) }), nil
}

// dropFree drops the default partitions' constraints of freeDefaults.
func (s *Store) dropFree(ctx context.Context, tx pgx.Tx) error {
	found, err := s.freeConstraints(ctx, tx)
	if err != nil {
		return err
	}
	schema := pgx.Identifier{s.schema}.Sanitize()
	var stmts []string
	for _, c := range found {
		// IF EXISTS: the drop of a partitioned table's removed its
		// partition's inherited copy.
		stmts = append(stmts, fmt.Sprintf(`ALTER TABLE %s.%s DROP CONSTRAINT IF EXISTS %s`, schema, pgx.Identifier{c.Table}.Sanitize(), pgx.Identifier{c.Name}.Sanitize()))
	}
	return execSimple(ctx, tx, stmts...)
}

func overlaps(h *historyPeriods, p historyPeriod) bool {
	for _, o := range h.list {
		if compareUUID(o.lo, p.hi) < 0 && compareUUID(p.lo, o.hi) < 0 {
			return true
		}
	}
	return false
}

// preparePeriod creates a period's tables, with the indexes of the
// partitioned tables, before they are attached (attachPeriod): that needs
// no lock the statements wait for, and the attach then only adopts them.
// A table left by a creation that did not finish is taken as it is (no
// statement reaches a table that is not attached).
func (s *Store) preparePeriod(ctx context.Context, p historyPeriod) error {
	return s.historyTx(ctx, func(tx pgx.Tx, h *historyPeriods) error {
		if overlaps(h, p) {
			return nil
		}
		schema := pgx.Identifier{s.schema}.Sanitize()
		var stmts []string
		for _, t := range historyTables {
			stmts = append(stmts,
				fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s.%[2]s_%[3]s (LIKE %[1]s.%[2]s INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING INDEXES) WITH (fillfactor = %[4]d)`,
					schema, t.name, p.suffix, t.fillfactor))
		}
		// The roles that may use the partitioned tables may use the
		// period's partitions, which the stores name directly (a role
		// with only DML rights: docs/operating.md).
		rows, err := tx.Query(ctx, s.q.tableGrants, s.schema)
		if err != nil {
			return err
		}
		type grant struct{ Table, Privilege, Grantee string }
		grants, err := pgx.CollectRows(rows, pgx.RowToStructByPos[grant])
		if err != nil {
			return err
		}
		for _, g := range grants {
			stmts = append(stmts, fmt.Sprintf(`GRANT %s ON %s.%s TO %s`, g.Privilege, schema, pgx.Identifier{g.Table + "_" + p.suffix}.Sanitize(), g.Grantee))
		}
		return execSimple(ctx, tx, stmts...)
	})
}

// attachPeriod attaches a period's partitions (preparePeriod made them),
// moving into them the rows of its range the default partitions hold when
// move is set.
func (s *Store) attachPeriod(ctx context.Context, tx pgx.Tx, p historyPeriod, move bool) error {
	schema := pgx.Identifier{s.schema}.Sanitize()
	// One statement at a time, in the simple protocol: a batch would
	// prepare the statements naming the partitions before they exist, and
	// the store's statement cache has no use for them.
	var stmts []string
	for _, t := range historyTables {
		if move {
			stmts = append(stmts,
				fmt.Sprintf(`WITH m AS (DELETE FROM %[1]s.%[2]s_default WHERE %[4]s >= '%[5]s' AND %[4]s < '%[6]s' RETURNING *) INSERT INTO %[1]s.%[2]s_%[3]s SELECT * FROM m`,
					schema, t.name, p.suffix, t.key, p.lo, p.hi))
		}
		stmts = append(stmts,
			fmt.Sprintf(`ALTER TABLE %[1]s.%[2]s ATTACH PARTITION %[1]s.%[2]s_%[3]s FOR VALUES FROM ('%[4]s') TO ('%[5]s')`,
				schema, t.name, p.suffix, p.lo, p.hi))
	}
	if err := execSimple(ctx, tx, stmts...); err != nil {
		return err
	}
	// The period's partitions take its range: the default partitions'
	// constraints excluding it (freeDefaults) have done their work.
	if err := s.dropFree(ctx, tx); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, s.q.insertHistoryPeriod, p16(&p.lo), p16(&p.hi), p.suffix)
	return err
}

// execSimple executes statements one at a time in the simple protocol.
func execSimple(ctx context.Context, tx pgx.Tx, stmts ...string) error {
	for _, st := range stmts {
		if _, err := tx.Exec(ctx, st, pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
	}
	return nil
}

// historyTables are the partitioned tables: their names, the column of
// their run ids, and their partitions' fillfactor (migration 012).
var historyTables = []struct {
	name, key  string
	fillfactor int
}{{"runs", "id", 40}, {"tasks", "run_id", 40}, {"events", "run_id", 100}}

// dropPeriod drops a period's partitions, unless another store did. The
// runs not settled before the cutoff (or created after it) go to the
// default partitions first, with their tasks and events; the keys, signals
// and inbox rows of the others go with them.
//
// Two transactions. The first, under the partitioned tables' lock,
// detaches the partitions, moves the runs kept and renames the partitions
// (a statement that named one, waiting for its lock, then no longer finds
// it: a transient error, and the store reads the periods again). The
// second drops them: the files of a large period take a second or more to
// unlink at commit, which nothing waits for there. A drop that never
// happens (the process died) is made by the next pass (dropGone).
func (s *Store) dropPeriod(ctx context.Context, p historyPeriod, cutoff time.Time) (int, error) {
	var deleted, moved int
	var gone []string
	start := time.Now()
	err := s.historyTx(ctx, func(tx pgx.Tx, h *historyPeriods) error {
		if !slices.Contains(h.list, p) {
			return nil
		}
		schema := pgx.Identifier{s.schema}.Sanitize()
		var detach, rename []string
		for _, t := range historyTables {
			part := t.name + "_" + p.suffix
			detach = append(detach, fmt.Sprintf(`ALTER TABLE %[1]s.%[2]s DETACH PARTITION %[1]s.%[3]s`, schema, t.name, part))
			rename = append(rename, fmt.Sprintf(`ALTER TABLE %[1]s.%[2]s RENAME TO %[2]s_gone`, schema, part))
			gone = append(gone, part+"_gone")
		}
		// The locks DETACH takes (the partitioned table, then its default
		// partition), all of them first (lockHistory).
		if err := s.lockHistory(ctx, tx, sqlFragment("lockHistoryDefaults")); err != nil {
			return err
		}
		if err := execSimple(ctx, tx, detach...); err != nil {
			return err
		}
		period := func(fragment string) string {
			return render(s.schema, strings.ReplaceAll(fragment, "{{period}}", p.suffix))
		}
		var kept []uuid.UUID
		var held int
		if err := tx.QueryRow(ctx, period(sqlFragment("keptRuns")), pgx.QueryExecModeDescribeExec, cutoff).Scan(&kept, &held); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, period(sqlFragment("dropPeriod")), pgx.QueryExecModeDescribeExec, p16(&p.lo), p16(&p.hi), kept).Scan(&moved); err != nil {
			return err
		}
		deleted = held - moved
		if err := execSimple(ctx, tx, rename...); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q.deleteHistoryPeriod, p16(&p.lo))
		return err
	})
	if err != nil || gone == nil {
		return deleted, err
	}
	locked := time.Since(start)
	if err := s.dropTables(ctx, gone); err != nil {
		return deleted, err
	}
	s.logPeriod("durable: history period dropped", locked, "period", p.suffix, "deleted", deleted, "kept", moved,
		"took", time.Since(start).Round(time.Millisecond))
	return deleted, nil
}

// historySlow is how long a period change may hold the partitioned tables
// before its log line is a warning: every statement naming them waited.
const historySlow = time.Second

// logPeriod logs a period change that held the partitioned tables for
// locked: at debug level, or as a warning when it held them historySlow
// or longer.
func (s *Store) logPeriod(msg string, locked time.Duration, args ...any) {
	args = append(args, "locked", locked.Round(time.Millisecond))
	if locked >= historySlow {
		s.log.Warn(msg, args...)
		return
	}
	s.log.Debug(msg, args...)
}

// dropGone drops the partitions of periods that a drop detached and
// renamed but did not drop (dropPeriod's second transaction).
func (s *Store) dropGone(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, s.q.goneTables, s.schema)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(names) == 0 {
		return err
	}
	return s.dropTables(ctx, names)
}

// dropTables drops the detached tables names, which no statement reaches.
func (s *Store) dropTables(ctx context.Context, names []string) error {
	schema := pgx.Identifier{s.schema}.Sanitize()
	var stmts []string
	for _, n := range names {
		stmts = append(stmts, fmt.Sprintf(`DROP TABLE IF EXISTS %s.%s`, schema, pgx.Identifier{n}.Sanitize()))
	}
	_, err := s.pool.Exec(ctx, strings.Join(stmts, "; "), pgx.QueryExecModeSimpleProtocol)
	return err
}

// historyTx runs fn in a transaction of its own, fenced by the leader's
// term when ctx carries one, holding the history's advisory lock (so that
// two stores never change the periods at once) and giving fn the periods
// as they are then; each lock is waited for at most historyLock (the
// table locks of a change: lockHistory). The store
// reads the periods again after it, whether it committed or not.
func (s *Store) historyTx(ctx context.Context, fn func(pgx.Tx, *historyPeriods) error) error {
	defer func() { _, _ = s.readPeriods(ctx, s.pool) }()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	b := &pgx.Batch{}
	plans, args := s.plans(ctx)
	b.Queue(plans, args...)
	b.Queue(fmt.Sprintf("SET LOCAL lock_timeout = %d", historyLock.Milliseconds()))
	b.Queue(s.q.lockHistory, "durable history "+s.schema)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	h, err := s.periodsIn(ctx, tx)
	if err != nil {
		return err
	}
	if err := fn(tx, h); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// retryLocks calls fn until it succeeds, fails otherwise than by a lock
// wait past historyLock, or has waited historyTries times, pausing a
// little longer each time: a busy moment passes, and a pass that gives up
// leaves the period to the next (a period is made well ahead).
func (s *Store) retryLocks(ctx context.Context, fn func() error) error {
	var err error
	for try := range historyTries {
		if err = fn(); !lockTimedOut(err) || try == historyTries-1 {
			return err
		}
		if !sleep.For(ctx, time.Duration(try+1)*historyLock/2) {
			return ctx.Err()
		}
	}
	return err
}

// historyTries is how many times a pass tries to lock the history's tables
// for one period.
const historyTries = 5

// lockTimedOut reports whether err is a lock wait that exceeded
// lock_timeout (historyLock).
func lockTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// isRunIDTaken reports whether err is the unique_violation of a run id: of
// runs' primary key, which names the partition's index (runs_pkey in the
// default partition, runs_p20261129t000000_pkey in a period's).
func isRunIDTaken(err *pgconn.PgError) bool {
	c := err.ConstraintName
	return err.Code == "23505" && (c == "runs_pkey" || strings.HasPrefix(c, "runs_") && strings.HasSuffix(c, "_pkey"))
}

// sendBatch sends b through q with its routed statements naming their
// period's partitions (route); a statement naming a partition dropped
// since the store read the periods fails, and the store forgets them.
func (s *Store) sendBatch(ctx context.Context, q interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, b *pgx.Batch) pgx.BatchResults {
	s.route(b)
	return routedResults{q.SendBatch(ctx, b), s}
}

type routedResults struct {
	pgx.BatchResults
	s *Store
}

func (r routedResults) Close() error {
	err := r.BatchResults.Close()
	if err != nil {
		r.s.forgetPeriods(err)
	}
	return err
}
