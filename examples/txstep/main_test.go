package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// On PostgreSQL, the payment's first attempt rolls its row back, the
// second writes it: one row; a rolled-back trigger starts no run. In
// memory the example says it needs PostgreSQL.
func TestTxStep(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		if strings.HasSuffix(t.Name(), "/memory") {
			require.True(t, strings.HasPrefix(out, "txstep needs PostgreSQL: set DURABLE_DATABASE_URL"), out)
			return
		}
		require.Regexp(t, `COMPLETED: payment of o-\d+ recorded on attempt 2\n`+
			`payment rows for the order: 1\n`+
			`runs of the rolled-back order: 0\n`, out)
	})
}
