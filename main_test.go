package durable_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// TestMain fails the package if any test leaves a goroutine behind (tests in
// synctest bubbles are also checked by synctest itself), and says when the
// PostgreSQL tests were skipped.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.NoteSkipped()
	if code == 0 {
		// goleak.Find retries for a while, so closing goroutines can exit.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
