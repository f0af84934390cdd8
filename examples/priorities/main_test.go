package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// The high-priority run triggered last is claimed first; the newsletters
// follow, all of them, in the same order on both stores: the first, whose
// slot the password reset took, moves to the reset's slot, last
// (docs/semantics.md, "Priority").
func TestPriorities(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "sent first: password-reset\n")
		require.Contains(t, out, "then: newsletter-2, newsletter-3, newsletter-4, newsletter-1\n")
	})
}
