package pgstore

import (
	"fmt"
	"reflect"
	"time"

	"github.com/effectivelabs/durable/store"
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

// SetHealthInterval sets how often a leader of s checks its election
// connection (and refreshes its worker record).
func SetHealthInterval(s *Store, d time.Duration) { s.health = d }
