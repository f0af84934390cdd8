package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// Six messages at a limit of two per window: all are sent, in three
// windows or more, never more than two in one.
func TestRateLimit(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Regexp(t, `6 messages sent, in [3-6] windows of 500ms\n`+
			`most started in one window: [12] \(the limit is 2\)\n`+
			`messages held back for a later window: true\n`, out)
	})
}
