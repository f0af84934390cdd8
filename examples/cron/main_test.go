package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// Two engines declaring the same schedules make one of each; the Paris
// schedule's next slot is at 09:00 there; the pulse fires runs.
func TestCron(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "schedule pulse          \"* * * * * *\"    declared=true\n"+
			"schedule weekday-report \"0 9 * * MON-FRI\" declared=true\n"+
			"weekday-report's next slot, in Paris: 09:00\n"+
			"the pulse fired two slots, a whole number of seconds apart: true\n"+
			"the last slot's run: COMPLETED, tenant tenant-1, build's output \"pulse report built\"\n")
	})
}
