package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// A signal to a waiting run, after a refused one; a signal sent before
// the step waits.
func TestSignals(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "draft-7: step approved is WAITING for the signal \"approve\"\n"+
			"draft-7: a number as the approval is refused: true\n"+
			"draft-7: COMPLETED - published draft-7.pdf, approved by bob (\"ship it\")\n"+
			"draft-8: COMPLETED - published draft-8.pdf, approved by carol (\"fine\")\n")
	})
}
