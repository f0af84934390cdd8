package bench

import (
	"os"
	"testing"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.NoteSkipped()
	os.Exit(code)
}
