package inflight

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/store"
)

var (
	errCancelled = errors.New("cancelled")
	errTimedOut  = errors.New("timed out")
	errLost      = errors.New("lost")
)

// running adds a step under ref to s and returns its context.
func running(t *testing.T, s *Steps, ref store.TaskRef) context.Context {
	ctx, cancel := context.WithCancelCause(t.Context())
	t.Cleanup(func() { cancel(nil) })
	s.Add(ref, cancel)
	return ctx
}

// A heartbeat's answer stops each step it names with the cause it names;
// the others run on.
func TestHeartbeatCauses(t *testing.T) {
	s := New(Causes{RunCancelled: errCancelled, TimedOut: errTimedOut, ClaimLost: errLost})
	run := uuid.New()
	refs := []store.TaskRef{{RunID: run, Step: "a"}, {RunID: run, Step: "b"}, {RunID: run, Step: "c"}, {RunID: run, Step: "d"}}
	ctxs := make([]context.Context, len(refs))
	for i, ref := range refs {
		ctxs[i] = running(t, s, ref)
	}
	require.Equal(t, 4, s.Len())
	require.ElementsMatch(t, refs, s.Refs())

	s.Heartbeat(&store.HeartbeatResult{Cancelled: refs[:1], TimedOut: refs[1:2], Lost: refs[2:3]})
	require.ErrorIs(t, context.Cause(ctxs[0]), errCancelled)
	require.ErrorIs(t, context.Cause(ctxs[1]), errTimedOut)
	require.ErrorIs(t, context.Cause(ctxs[2]), errLost)
	require.NoError(t, ctxs[3].Err())
	require.True(t, s.WasCancelled(refs[0]))
	require.False(t, s.WasCancelled(refs[1]))
	require.False(t, s.WasCancelled(refs[3]))

	// The first cause stays: a step told its run was cancelled is not
	// told later that its claim was lost.
	s.Heartbeat(&store.HeartbeatResult{Lost: refs[:1]})
	require.True(t, s.WasCancelled(refs[0]))
}

// A cancelled run stops its steps, and only its own, at once.
func TestRunCancelled(t *testing.T) {
	s := New(Causes{RunCancelled: errCancelled, TimedOut: errTimedOut, ClaimLost: errLost})
	a, b := uuid.New(), uuid.New()
	ctxA := running(t, s, store.TaskRef{RunID: a, Step: "s"})
	// Rescued from this engine and claimed by it again: two claims of one
	// task, both stopped.
	ctxA2 := running(t, s, store.TaskRef{RunID: a, Step: "s", Token: 1})
	ctxB := running(t, s, store.TaskRef{RunID: b, Step: "s"})
	s.RunCancelled(a)
	require.ErrorIs(t, context.Cause(ctxA), errCancelled)
	require.ErrorIs(t, context.Cause(ctxA2), errCancelled)
	require.NoError(t, ctxB.Err())
}

// Lose stops one step; Forget forgets the steps of recorded outcomes, and
// a forgotten step is no longer stopped by anything.
func TestLoseAndForget(t *testing.T) {
	s := New(Causes{RunCancelled: errCancelled, TimedOut: errTimedOut, ClaimLost: errLost})
	ref := store.TaskRef{RunID: uuid.New(), Step: "s"}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	f := s.Add(ref, cancel)
	s.Lose(f, errTimedOut)
	s.Lose(f, errLost)
	require.ErrorIs(t, context.Cause(ctx), errTimedOut)

	other := store.TaskRef{RunID: uuid.New(), Step: "t"}
	otherCtx := running(t, s, other)
	s.Forget([]store.Outcome{{Task: other}, {Task: ref}})
	require.Zero(t, s.Len())
	require.Empty(t, s.Refs())
	s.RunCancelled(other.RunID)
	require.NoError(t, otherCtx.Err(), "forgotten")
}
