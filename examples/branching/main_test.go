package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// The small refund takes the automatic branch, and the manual branch is
// skipped whole (notify-reviewer by the cascade); the large one the other
// way round; report runs after either.
func TestBranching(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, `o-1 (2500 cents): refunded o-1
  check            COMPLETED
  auto-refund      COMPLETED
  manual-review    SKIPPED
  notify-reviewer  SKIPPED
  report           COMPLETED
o-2 (90000 cents): mailed: review opened for o-2
  check            COMPLETED
  auto-refund      SKIPPED
  manual-review    COMPLETED
  notify-reviewer  COMPLETED
  report           COMPLETED
`)
	})
}
