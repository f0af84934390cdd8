package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// The high-priority run triggered last is claimed first; the newsletters
// follow, all of them.
func TestPriorities(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "sent first: password-reset\n")
		require.Regexp(t, `then: (newsletter-\d, ){3}newsletter-\d\n`, out)
		for _, n := range []string{"newsletter-1", "newsletter-2", "newsletter-3", "newsletter-4"} {
			require.Contains(t, out, n)
		}
	})
}
