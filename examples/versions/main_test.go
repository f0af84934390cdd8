package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// The run started by deploy 1 moves to deploy 2's version and completes
// with the step deploy 2 added.
func TestVersions(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		v1, v2 := publishWorkflow(1).Version(), publishWorkflow(2).Version()
		require.NotEqual(t, v1, v2)
		require.Contains(t, out, "deploy 1: version "+v1+"; its run waits for approval\n"+
			"deploy 2: version "+v2+", accepts "+v1+"\n"+
			"the run moved to version "+v2+"\n"+
			"run COMPLETED\n"+
			"  approved           COMPLETED \"ada\"\n"+
			"  publish            COMPLETED \"post-7 published, approved by ada\"\n"+
			"  notify-subscribers COMPLETED \"subscribers told of post-7\"\n")
	})
}
