package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// Each line is picked by its own task, the lamp's retried alone; the slip
// lists them in the order of the lines.
func TestMap(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "COMPLETED: o-1: 2 x tea, 1 x lamp, 4 x mug\n"+
			"  item 0 COMPLETED after 1 attempt(s)\n"+
			"  item 1 COMPLETED after 2 attempt(s)\n"+
			"  item 2 COMPLETED after 1 attempt(s)\n")
	})
}
