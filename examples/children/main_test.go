package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// The checkout's child run prints the label its parent mails, and the two
// runs link to each other.
func TestChildren(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "checkout COMPLETED: mailed label o-1: 1200 g to 1 Main St\n"+
			"child run: workflow shipping, COMPLETED, tenant tenant-1, started by step \"ship\" of the checkout: true\n"+
			"children of the checkout: 1\n")
	})
}
