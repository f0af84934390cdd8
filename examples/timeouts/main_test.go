package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// The hung attempt times out and the retry completes; the step nobody
// serves fails its run at the queue timeout; the run past its deadline
// fails and its wait is cancelled.
func TestTimeouts(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "charge: COMPLETED after 2 attempts, the first cancelled by its timeout: true\n")
		require.Contains(t, out, "export: FAILED at step write-file: no worker claimed the step within its queue timeout of 200ms\n"+
			"approval: FAILED: run deadline exceeded (the wait is CANCELLED)\n")
	})
}
