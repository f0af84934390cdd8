package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// The cheapest carrier is booked once, however many times the body runs;
// a confirmed trip and a trip whose wait timed out, compensated.
func TestFunctions(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "t-1: COMPLETED {Status:confirmed Carrier:coach Ref:coach-PAR-LYS By:ada}\n"+
			"  the body ran more than once: true; the booking call ran 1 time\n"+
			"  main                     COMPLETED\n"+
			"  quote-rail#0             COMPLETED\n"+
			"  quote-coach#1            COMPLETED\n"+
			"  quote-air#2              COMPLETED\n"+
			"  book#3                   COMPLETED\n"+
			"  hold#4                   COMPLETED\n"+
			"  await-confirmation#5     COMPLETED\n"+
			"t-2: COMPLETED {Status:cancelled Carrier:coach Ref:coach-PAR-NCE By:}\n"+
			"  the body ran more than once: true; the booking call ran 1 time\n"+
			"  main                     COMPLETED\n"+
			"  quote-rail#0             COMPLETED\n"+
			"  quote-coach#1            COMPLETED\n"+
			"  quote-air#2              COMPLETED\n"+
			"  book#3                   COMPLETED\n"+
			"  hold#4                   COMPLETED\n"+
			"  await-confirmation#5     FAILED\n"+
			"  cancel-booking#6         COMPLETED\n")
	})
}
