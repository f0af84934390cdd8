package dag

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// TestActionsHaveTransitions: every operator action has its transition,
// so that a new action is refused by no store and needs no driver code.
func TestActionsHaveTransitions(t *testing.T) {
	t.Parallel()
	for _, a := range durabletype.RunActions {
		require.Contains(t, transitions, a, "action %s has no transition in act.go", a)
	}
	require.Len(t, transitions, len(durabletype.RunActions), "a transition for an action durabletype does not list")
	require.ErrorIs(t, CheckAction(&store.ActOnRunsParams{Action: "no-such-action"}), durabletype.ErrInvalidRun)
	require.ErrorIs(t, CheckAction(&store.ActOnRunsParams{Action: durabletype.ActionUpgrade}), durabletype.ErrInvalidRun,
		"an upgrade names its shape")
}

// TestAct: the per-run rule of every action, in its order: not found (or
// another tenant's), another version, a status that does not allow the
// action, then the transition's own refusals; one change holds every run
// the call changed.
func TestAct(t *testing.T) {
	t.Parallel()
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{st("a"), st("b", "a")}, OnFailure: &durabletype.OnFailureSpec{Retry: once()}}
	running := func() *Run { r := start(t, sh); r.Rec.Version = "1"; return r }
	completed := func() *Run {
		r := running()
		claimAndFinish(t, r, "a", store.OutcomeComplete, 1)
		claimAndFinish(t, r, "b", store.OutcomeComplete, 2)
		require.True(t, r.Rec.Settled())
		return r
	}
	failing := func() *Run { // FAILED, its on-failure handler queued
		r := running()
		claimAndFinish(t, r, "a", store.OutcomeFail, 1)
		require.Equal(t, durabletype.RunFailed, r.Rec.Status)
		require.False(t, r.Rec.Settled())
		return r
	}
	to := &durabletype.Shape{Version: "2", Steps: []durabletype.StepSpec{st("a"), st("b", "a"), st("c", "b")}, OnFailure: &durabletype.OnFailureSpec{Retry: once()}}
	other := running()
	other.Rec.Tenant = "u"
	tests := []struct {
		name string
		p    store.ActOnRunsParams
		r    *Run
		want error // nil: applied
	}{
		{"cancel running", store.ActOnRunsParams{Action: durabletype.ActionCancel}, running(), nil},
		{"cancel completed", store.ActOnRunsParams{Action: durabletype.ActionCancel}, completed(), durabletype.ErrRunSettled},
		{"cancel failing", store.ActOnRunsParams{Action: durabletype.ActionCancel}, failing(), nil},
		{"cancel not found", store.ActOnRunsParams{Action: durabletype.ActionCancel}, nil, durabletype.ErrRunNotFound},
		{"cancel another tenant's", store.ActOnRunsParams{Action: durabletype.ActionCancel, Tenant: "t"}, other, durabletype.ErrRunNotFound},
		{"cancel another version", store.ActOnRunsParams{Action: durabletype.ActionCancel, Version: "9"}, running(), durabletype.ErrVersionMismatch},
		{"replay running", store.ActOnRunsParams{Action: durabletype.ActionReplay}, running(), durabletype.ErrRunNotSettled},
		{"replay failing", store.ActOnRunsParams{Action: durabletype.ActionReplay}, failing(), durabletype.ErrRunNotSettled},
		{"replay completed", store.ActOnRunsParams{Action: durabletype.ActionReplay}, completed(), durabletype.ErrNothingToReplay},
		{"replay completed from a step", store.ActOnRunsParams{Action: durabletype.ActionReplay, FromStep: "b"}, completed(), nil},
		{"upgrade running", store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Version: "1", To: to}, running(), nil},
		{"upgrade completed", store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Version: "1", To: to}, completed(), durabletype.ErrRunSettled},
		{"upgrade completed at another version", store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Version: "0", To: to}, completed(), durabletype.ErrVersionMismatch},
		{"upgrade failing", store.ActOnRunsParams{Action: durabletype.ActionUpgrade, Version: "1", To: to}, failing(), durabletype.ErrIncompatible},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := uuid.New()
			if tt.r != nil {
				id = tt.r.Rec.ID
			}
			tt.p.IDs = []uuid.UUID{id}
			c := NewChange(t0.Add(time.Hour))
			res, err := c.Act(&tt.p, func(uuid.UUID) *Run { return tt.r })
			require.NoError(t, err)
			require.Len(t, res, 1)
			require.Equal(t, id, res[0].ID)
			if tt.want != nil {
				require.ErrorIs(t, res[0].Err, tt.want)
				require.Empty(t, c.Runs, "a refused run is not in the change")
				return
			}
			require.NoError(t, res[0].Err)
			require.Equal(t, []*Run{tt.r}, c.Runs)
		})
	}

	// One change for the call; a run named twice meets the first's change.
	a, b := running(), completed()
	runs := map[uuid.UUID]*Run{a.Rec.ID: a, b.Rec.ID: b}
	c := NewChange(t0.Add(time.Hour))
	res, err := c.Act(&store.ActOnRunsParams{Action: durabletype.ActionCancel, IDs: []uuid.UUID{a.Rec.ID, b.Rec.ID, a.Rec.ID}, Reason: "r"},
		func(id uuid.UUID) *Run { return runs[id] })
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.ErrorIs(t, res[1].Err, durabletype.ErrRunSettled)
	require.ErrorIs(t, res[2].Err, durabletype.ErrRunSettled, "cancelled by the first")
	require.Equal(t, []*Run{a}, c.Runs)
	require.True(t, c.Effects[a].Cancelled)

	_, err = c.Act(&store.ActOnRunsParams{Action: "no-such-action", IDs: []uuid.UUID{a.Rec.ID}}, func(uuid.UUID) *Run {
		t.Fatal("an invalid call loads no run")
		return nil
	})
	require.ErrorIs(t, err, durabletype.ErrInvalidRun)
}
