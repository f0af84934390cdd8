package durable

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLegacyFingerprint pins the legacy fingerprint of a workflow with a
// step of every kind and an on-failure handler (TestFingerprintOfEveryKind
// pins its fingerprint): the version that releases before fingerprint 2
// gave it, which runs they started are pinned to and engines of this
// release serve (registered.legacy). It must never change, or an upgrade
// of the library would strand those runs.
func TestLegacyFingerprint(t *testing.T) {
	t.Parallel()
	child := NewWorkflow[int]("kid")
	res := Step(child, "r", func(ctx Context, n int) (int, error) { return n, nil })
	wf := NewWorkflow[int]("kinds")
	list := Step(wf, "list", func(ctx Context, n int) ([]int, error) { return []int{n}, nil })
	Sleep(wf, "nap", time.Minute, After(list))
	WaitForEvent[string](wf, "event", func(ctx Context, n int) (string, error) { return "k", nil }, After(list))
	WaitForSignal[string](wf, "signal", "go", After(list))
	Child(wf, "child", child, res, func(ctx Context, n int) (int, error) { return n, nil }, After(list))
	Map(wf, "map", list, func(ctx Context, x int) (int, error) { return x, nil })
	wf.OnFailure(func(ctx Context, n int, f Failure) error { return nil })
	require.Equal(t, "f4ee7acabe78", wf.def.legacyVersion())
	require.Equal(t, "86bedc8bbdae", wf.Version())

	// None for a version set by hand, or accepted explicitly.
	wf.WithVersion("v1")
	require.Empty(t, wf.def.legacyVersion())
	other := NewWorkflow[int]("kinds")
	Step(other, "a", func(ctx Context, n int) (int, error) { return n, nil })
	legacy := other.def.legacyVersion()
	require.Len(t, legacy, fingerprintLen)
	other.Accepts(legacy)
	require.Empty(t, other.def.legacyVersion())

	// AcceptsRunsOf accepts an older definition's version and its legacy
	// version.
	next := NewWorkflow[int]("kinds")
	a := Step(next, "a", func(ctx Context, n int) (int, error) { return n, nil })
	Step(next, "b", func(ctx Context, n int) (int, error) { return n, nil }, After(a))
	old := NewWorkflow[int]("kinds")
	Step(old, "a", func(ctx Context, n int) (int, error) { return n, nil })
	next.AcceptsRunsOf(old)
	require.Equal(t, []string{old.Version(), legacy}, next.def.accepts)
	require.False(t, slices.Contains(next.def.accepts, next.Version()))
}
