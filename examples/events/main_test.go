package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// An event sent to a waiting step, an event sent before the wait (found by
// the lookback), and no event (the wait times out and is skipped).
func TestEvents(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "o-1: step confirmed is WAITING for \"confirm:o-1\"\n"+
			"o-1: event delivered to 1 waiting step\n"+
			"o-1: COMPLETED, confirmed COMPLETED: shipped, confirmed by ada\n"+
			"o-2: event delivered to 0 waiting steps, and kept\n"+
			"o-2: COMPLETED, confirmed COMPLETED: shipped, confirmed by bob\n"+
			"o-3: COMPLETED, confirmed SKIPPED: not shipped: no confirmation\n")
	})
}
