// Package exampletest runs an example's run function in the example's test,
// on the in-memory store and on PostgreSQL (DURABLE_TEST_DATABASE_URL, a
// schema of its own; skipped without it, except under CI=true, where the
// test fails instead).
package exampletest

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/effectivelabs/durable/examples/internal/example"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// Main is an example test's TestMain: it closes the shared pool and says
// when the PostgreSQL tests were skipped.
func Main(m *testing.M) {
	code := m.Run()
	pgtest.ClosePool()
	pgtest.NoteSkipped()
	os.Exit(code)
}

// Timeout bounds one run of an example.
const Timeout = 2 * time.Minute

// Run runs run on each store, in parallel subtests "memory" and
// "postgres", and hands check what it printed.
func Run(t *testing.T, run func(ctx context.Context, out io.Writer, db example.DB) error, check func(t *testing.T, out string)) {
	t.Helper()
	for _, name := range []string{"memory", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var db example.DB
			if name == "postgres" {
				db = DB(t)
			}
			ctx, cancel := context.WithTimeout(t.Context(), Timeout)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, &out, db); err != nil {
				t.Fatalf("run: %v\noutput:\n%s", err, out.String())
			}
			t.Logf("output:\n%s", out.String())
			check(t, out.String())
		})
	}
}

// DB returns a PostgreSQL database of the test: the test database and a
// schema that does not exist yet (the example creates it), dropped when
// the test ends.
func DB(t *testing.T) example.DB {
	t.Helper()
	url := pgtest.URL(t)
	return example.DB{URL: url, Schema: pgtest.EmptySchema(t, pgtest.Pool(t))}
}
