package durabletest_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/effectivelabs/durable/durabletest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// TestMain fails the package if a test leaves a goroutine behind (a kit
// on PostgreSQL, outside a bubble, is checked this way), and says when the
// PostgreSQL tests were skipped.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.NoteSkipped()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// kits runs fn with a kit in memory and with a kit on PostgreSQL (the
// URL from DURABLE_TEST_DATABASE_URL: skipped without it, failed under
// CI=true), each in a subtest.
func kits(t *testing.T, opts durabletest.Options, fn func(t *testing.T, k *durabletest.Kit)) {
	t.Helper()
	t.Run("memory", func(t *testing.T) { durabletest.RunOptions(t, opts, fn) })
	t.Run("postgres", func(t *testing.T) {
		opts := opts
		opts.DatabaseURL = pgtest.URL(t)
		durabletest.RunOptions(t, opts, fn)
	})
}

// onPostgres runs fn with a kit on PostgreSQL (see kits).
func onPostgres(t *testing.T, opts durabletest.Options, fn func(t *testing.T, k *durabletest.Kit)) {
	t.Helper()
	opts.DatabaseURL = pgtest.URL(t)
	durabletest.RunOptions(t, opts, fn)
}
