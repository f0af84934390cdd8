package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletest"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// TestTrial is the example: the workflow with its production durations, in
// virtual time. It takes milliseconds.
func TestTrial(t *testing.T) {
	durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
		flow := newTrialFlow(Production)
		id := durabletest.Start(k, flow.wf, Trial{Email: "ada@example.com"})

		// The welcome mail went out; the trial sleeps. 2 days later it
		// still does, and nothing was charged.
		k.WaitStep(id, flow.trial, durabletype.TaskSleeping)
		k.Advance(2 * 24 * time.Hour)
		res := k.Get(id)
		durabletest.RequireState(t, res, flow.trial, durabletype.TaskSleeping)
		durabletest.RequireState(t, res, flow.charge, durabletype.TaskPending)

		// Settle lets time pass until the run settles: the trial's last
		// day, the failed charge, its hour of backoff, the retry.
		res = k.Settle(id)
		durabletest.RequireCompleted(t, res)
		durabletest.RequireAttempts(t, res, flow.charge, 2)
		durabletest.RequireOutput(t, res, flow.receipt, "receipt for ch_ada@example.com")
		require.Equal(t, Production.Trial+Production.ChargeBackoff, res.FinishedAt.Sub(res.CreatedAt),
			"the run took the trial and the backoff, exactly, of virtual time")
	})
}

// TestRun runs the program, in real time, on both stores.
func TestRun(t *testing.T) {
	exampletest.Run(t, run, func(t *testing.T, out string) {
		require.Contains(t, out, "COMPLETED: receipt for ch_ada@example.com (charge took 2 attempts)\n")
	})
}
