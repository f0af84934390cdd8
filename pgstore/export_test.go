package pgstore

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
	"github.com/effectivelabs/durable/store/storetest"
)

// Statements returns every statement of the store for schema, by the name of
// its field in queries, for the tests in pgstore_test.
func Statements(schema string) map[string]string {
	q := newQueries(schema)
	return queryFields(&q)
}

// queryFields returns the string fields of q and of the structs embedded
// in it, by name.
func queryFields(q *queries) map[string]string {
	out := map[string]string{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			f, sf := v.Field(i), v.Type().Field(i)
			switch {
			case sf.Anonymous && f.Kind() == reflect.Struct:
				walk(f)
			case f.Kind() == reflect.String:
				out[sf.Name] = f.String()
			default:
				panic(fmt.Sprintf("pgstore: queries.%s is a %s, not a statement", sf.Name, f.Type()))
			}
		}
	}
	walk(reflect.ValueOf(q).Elem())
	return out
}

// ListQuery returns the query ListRuns runs for p, with its arguments, and
// whether it reads the runs in flight (planned with sorts allowed).
func ListQuery(s *Store, p *store.ListRunsParams) (string, []any, bool, error) { return s.listQuery(p) }

// SetLeaderLease sets the leader's lease of s (Config.LeaderLease), below
// its minimum too; call it before Lead.
func SetLeaderLease(s *Store, d time.Duration) { s.lease = d }

// DriverUnit opens one unit of the PostgreSQL driver (dag.Tx) for the
// driver suite (storetest.Driver), as a transition does (transact): in a
// transaction of the store's own, the runs of ids are locked and loaded
// into a new change at now, and fn runs with the unit's Tx, the change
// and the loaded runs (by ID). The Tx writes without committing; the
// transaction commits when fn returns nil and rolls back otherwise. Once
// committed, the messages the change left for other runs are applied, as
// after a transition.
func DriverUnit(ctx context.Context, s *Store, now time.Time, ids []uuid.UUID,
	fn func(tx dag.Tx, c *dag.Change, runs map[uuid.UUID]*dag.Run) error) error {
	b := &pgx.Batch{}
	var l loader
	l.queue(&s.q, b, &plan{ids: ids})
	own, err := s.beginOwn(ctx, b)
	if err != nil {
		return err
	}
	defer own.close(ctx)
	if err := own.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	c := newChange(dag.Timestamp(now))
	if err := l.build(ctx, s, own, c); err != nil {
		return err
	}
	if err := fn(&pgTx{s: s, q: own, c: c}, c.Change, c.byID); err != nil {
		return err
	}
	if err := own.send(ctx, &pgx.Batch{}, true); err != nil {
		return err
	}
	s.deliver(ctx, c.Now, c.inboxRuns, nil)
	return nil
}

// Queues returns the store's queue entries, for the driver suite: the
// ready queue in the order of fair ids, and the parked tasks of each
// concurrency key, oldest first.
func Queues(ctx context.Context, s *Store) (*storetest.DriverQueues, error) {
	rows, err := s.pool.Query(ctx, "SELECT run_id, name FROM "+s.schema+".ready ORDER BY id, workflow")
	if err != nil {
		return nil, err
	}
	q := &storetest.DriverQueues{Parked: map[string][]storetest.QueueEntry{}}
	var key string
	var e storetest.QueueEntry
	if _, err := pgx.ForEachRow(rows, []any{&e.RunID, &e.Step}, func() error {
		q.Ready = append(q.Ready, e)
		return nil
	}); err != nil {
		return nil, err
	}
	rows, err = s.pool.Query(ctx, "SELECT key, run_id, name FROM "+s.schema+".concurrency_waiting ORDER BY key, seq")
	if err != nil {
		return nil, err
	}
	_, err = pgx.ForEachRow(rows, []any{&key, &e.RunID, &e.Step}, func() error {
		q.Parked[key] = append(q.Parked[key], e)
		return nil
	})
	return q, err
}

// Acquire takes the leader's lease for id once, as a candidate of s would,
// returning its term (0 when the lease is held); nothing renews it: the
// lease of a leader that froze at once.
func Acquire(ctx context.Context, s *Store, id string) (int64, error) {
	term, _, err := s.acquire(ctx, s.pool, id)
	return term, err
}

// Renew renews the lease of term once, as the leader of s would,
// reporting whether the lease was still term's.
func Renew(ctx context.Context, s *Store, term int64) (bool, error) {
	return s.renew(ctx, s.pool, term)
}

// ErrOtherChange is the error of a Write passed a change other than its
// unit's.
var ErrOtherChange = errOtherChange

// Recycle recycles one queue table now, whatever its size.
func Recycle(ctx context.Context, s *Store, table string) (bool, error) { return s.recycle(ctx, table) }

// MigrateLockKey is the advisory lock key Migrate takes for schema.
func MigrateLockKey(schema string) int64 { return lockKey("migrate", schema) }

// CacheVariant makes s keep the SQL of a routed statement for the period
// suffix, as routing a statement there does.
func CacheVariant(s *Store, suffix string) {
	s.router.variant(s.q.taskCompleted, suffix)
}

// VariantSuffixes lists the periods whose routed statements s keeps.
func VariantSuffixes(s *Store) []string {
	var out []string
	s.router.variants.Range(func(k, _ any) bool {
		out = append(out, k.(routeKey).suffix)
		return true
	})
	return out
}

// ReadRecords runs the routed statement that reads a function run's
// records (queryRouted) for run, and reads its rows.
func ReadRecords(ctx context.Context, s *Store, run uuid.UUID) error {
	rows, err := s.queryRouted(ctx, s.pool, s.q.funcRecords, [][16]byte{run})
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	rows.Close()
	return rows.Err()
}

// KnowsPeriods reports whether s routes with periods it read.
func KnowsPeriods(s *Store) bool { return s.router.periods.Load() != nil }
