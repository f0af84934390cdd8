package pgstore

import (
	"time"

	"github.com/effectivelabs/durable/store"
)

// Statements returns every statement of the store for schema, by the name of
// its field in queries, for the tests in pgstore_test.
func Statements(schema string) map[string]string {
	q := newQueries(schema)
	out := map[string]string{}
	for name, sql := range queryFields(&q) {
		out[name] = *sql
	}
	return out
}

// ListQuery returns the query ListRuns runs for p, with its arguments, and
// whether it reads the runs in flight (planned with sorts allowed).
func ListQuery(s *Store, p *store.ListRunsParams) (string, []any, bool, error) { return s.listQuery(p) }

// SetHealthInterval sets how often a leader of s checks its election
// connection (and refreshes its worker record).
func SetHealthInterval(s *Store, d time.Duration) { s.health = d }
