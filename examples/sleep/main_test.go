package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// The run sleeps through its first engine's stop and completes on the
// second, no sooner than its sleep's length.
func TestSleep(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "step trial is SLEEPING until its due time (2s after it began)\n"+
			"the engine stopped; the run sleeps on in the store\n"+
			"COMPLETED: trial-ended mail to ada@example.com\n"+
			"slept at least the trial's length: true\n")
	})
}
