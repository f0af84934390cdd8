package pgstore

import (
	"reflect"
	"time"

	"github.com/effectivelabs/durable/store"
)

// Statements returns every statement of the store for schema, by the name of
// its field in queries, for the tests in pgstore_test.
func Statements(schema string) map[string]string {
	q := newQueries(schema)
	v := reflect.ValueOf(q)
	out := make(map[string]string, v.NumField())
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			out[v.Type().Field(i).Name] = f.String()
		}
	}
	for _, fv := range []reflect.Value{reflect.ValueOf(q.flowQueries), reflect.ValueOf(q.waitQueries)} {
		for i := range fv.NumField() {
			out[fv.Type().Field(i).Name] = fv.Field(i).String()
		}
	}
	return out
}

// ListQuery returns the query ListRuns runs for p, with its arguments, and
// whether it reads the runs in flight (planned with sorts allowed).
func ListQuery(s *Store, p *store.ListRunsParams) (string, []any, bool, error) { return s.listQuery(p) }

// SetHealthInterval sets how often a leader of s checks its election
// connection (and refreshes its worker record).
func SetHealthInterval(s *Store, d time.Duration) { s.health = d }
