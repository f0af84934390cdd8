package durable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// ErrWaitsUnsupported is returned by Waits on a store that cannot list
// waits in one read (it does not implement store.WaitLister): read each
// run with Get instead.
var ErrWaitsUnsupported = errors.New("durable: store cannot list the waits of runs")

// StepWait is a step of a run in flight that waits: WAITING (for an
// event, a signal, a child run or a map step's items), SLEEPING, or QUEUED
// until a retry's backoff or a delayed start ends.
type StepWait struct {
	// Step is the step's name (OnFailureStep for the on-failure handler).
	Step  string
	Kind  durabletype.TaskKind
	State durabletype.TaskState
	// EventKey is the key a WaitForEvent step waits for, Signal the name
	// of the signal a WaitForSignal step waits for.
	EventKey, Signal string
	// ChildRunID is the child run a Child step waits for.
	ChildRunID uuid.UUID
	// DueAt is when a sleep wakes, or a backoff or a delayed start ends.
	DueAt time.Time
	// Attempts is the number of the step's latest attempt.
	Attempts int
	// Items and ItemsLeft count a map step's items and those not
	// completed.
	Items, ItemsLeft int
}

// Waits returns, by run, the steps of the runs ids that wait, in the
// order of each run's steps, in one read of the store: what a listing of
// runs shows beside each run in flight. A run that waits for nothing, has
// settled or is not found has no entry. It fails with ErrWaitsUnsupported
// on a store that cannot list waits.
func (e *Engine) Waits(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]StepWait, error) {
	return e.all().Waits(ctx, ids)
}

// Waits is Engine.Waits within the tenant: the runs of other tenants have
// no entry.
func (v *TenantRuns) Waits(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]StepWait, error) {
	wl, ok := v.e.store.(store.WaitLister)
	if !ok {
		return nil, ErrWaitsUnsupported
	}
	out := map[uuid.UUID][]StepWait{}
	if len(ids) == 0 || v.empty() {
		return out, nil
	}
	res, err := wl.ListWaits(ctx, &store.ListWaitsParams{RunIDs: ids, Tenant: v.tenant})
	if err != nil {
		return nil, fmt.Errorf("durable: waits: %w", err)
	}
	for id, ws := range res {
		steps := make([]StepWait, len(ws))
		for i, w := range ws {
			sw := StepWait{Step: dag.DisplayName(w.Name), Kind: w.Kind, State: w.State, ChildRunID: w.Child, DueAt: w.DueAt,
				Attempts: w.Attempt, Items: w.Items, ItemsLeft: w.Left}
			if key, signal := dag.ParseWaitKey(w.WaitKey); signal {
				sw.Signal = key
			} else {
				sw.EventKey = key
			}
			steps[i] = sw
		}
		out[id] = steps
	}
	return out, nil
}
