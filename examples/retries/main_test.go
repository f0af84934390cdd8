package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// The flaky charge completes on its third attempt after backoffs of 50ms
// and 100ms; the Terminal error fails its run after one attempt.
func TestRetries(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "COMPLETED: charged 4200 cents on attempt 3\n"+
			"  attempt 1 failed (attempt 1: payment provider timed out), retried after 50ms\n"+
			"  attempt 2 failed (attempt 2: payment provider timed out), retried after 100ms\n"+
			"FAILED: step charge-card FAILED after 1 attempt: card declined: expired\n")
	})
}
