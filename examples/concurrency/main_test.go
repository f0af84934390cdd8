package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// Every charge completes, never two of one customer at once.
func TestConcurrency(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "8 of 8 charges completed\n"+
			"most charges of ada running at once: 1\n"+
			"most charges of bob running at once: 1\n")
	})
}
