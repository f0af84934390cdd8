package durable_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

// The root package reports the rules the core decides (internal/core/dag)
// in its own words; these tests pin what a user sees.

// TestFingerprintOfEveryKind pins the fingerprint of a workflow with a
// step of every kind (code, sleep, event, signal, child, map) and an
// on-failure handler: a run is
// pinned to its version, so the kind a fingerprint records for a step
// (dag.KindOf of the step's spec) must not change from one release to
// the next, or a rolling deploy would strand every run in flight.
func TestFingerprintOfEveryKind(t *testing.T) {
	t.Parallel()
	child := durable.NewWorkflow[int]("kid")
	res := durable.Step(child, "r", func(ctx durable.Context, n int) (int, error) { return n, nil })
	wf := durable.NewWorkflow[int]("kinds")
	list := durable.Step(wf, "list", func(ctx durable.Context, n int) ([]int, error) { return []int{n}, nil })
	durable.Sleep(wf, "nap", time.Minute, durable.After(list))
	durable.WaitForEvent[string](wf, "event", func(ctx durable.Context, n int) (string, error) { return "k", nil }, durable.After(list))
	durable.WaitForSignal[string](wf, "signal", "go", durable.After(list))
	durable.Child(wf, "child", child, res, func(ctx durable.Context, n int) (int, error) { return n, nil }, durable.After(list))
	durable.Map(wf, "map", list, func(ctx durable.Context, x int) (int, error) { return x, nil })
	wf.OnFailure(func(ctx durable.Context, n int, f durable.Failure) error { return nil })
	require.Equal(t, "86bedc8bbdae", wf.Version())
	// The legacy fingerprint of the same workflow (the version releases
	// before fingerprint 2 gave it) is pinned by TestLegacyFingerprint.
}

// TestSkipOnTimeoutNeedsATimeout: the core's shape check refuses a wait
// skipped on a timeout it does not have, and the root reports it once, as
// the options that set it.
func TestSkipOnTimeoutNeedsATimeout(t *testing.T) {
	t.Parallel()
	wf := durable.NewWorkflow[int]("wf")
	durable.WaitForEvent[int](wf, "a", func(ctx durable.Context, n int) (string, error) { return "k", nil }, durable.SkipOnTimeout())
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
	require.NoError(t, err)
	err = e.Register(wf)
	require.ErrorIs(t, err, durable.ErrInvalidOption)
	var de *durable.DefinitionError
	require.True(t, errors.As(err, &de))
	require.Equal(t, &durable.DefinitionError{Workflow: "wf", Step: "a", Err: durable.ErrInvalidOption, Detail: "SkipOnTimeout needs WithWaitTimeout"}, de)
	require.EqualError(t, err, `durable: workflow "wf": step "a": option does not apply here: SkipOnTimeout needs WithWaitTimeout`)
}
