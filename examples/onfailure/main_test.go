package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// The good file's run completes and no handler runs; the broken file's
// run fails at parse, load is cancelled, and the handler runs once with
// the failure.
func TestOnFailure(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "good.csv: COMPLETED\n"+
			"  reserve-space  COMPLETED\n"+
			"  parse          COMPLETED\n"+
			"  load           COMPLETED\n"+
			"broken.csv: FAILED at step parse: line 3: 4 fields, want 5\n"+
			"  reserve-space  COMPLETED\n"+
			"  parse          FAILED\n"+
			"  load           CANCELLED\n"+
			"  @on_failure    COMPLETED\n"+
			"alerts: 1\n"+
			"  import of broken.csv failed at parse (line 3: 4 fields, want 5); freed bucket/broken.csv\n")
	})
}
