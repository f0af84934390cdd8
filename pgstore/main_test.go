package pgstore_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.ClosePool()
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
