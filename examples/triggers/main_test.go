package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// A second trigger with the same key is a duplicate of the first, one run
// exists; the delayed run waits, queued with a due time, then completes
// after its delay.
func TestTriggers(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "first trigger: duplicate=false; second: duplicate=true, same run: true\n"+
			"runs with the key: 1\n"+
			"delayed run: RUNNING, its step QUEUED with a due time: true\n"+
			"delayed run: COMPLETED; its step started no sooner than the delay: true\n")
	})
}
