package dag

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// IdemKey names an idempotency key: unique per workflow and tenant.
type IdemKey struct{ Workflow, Tenant, Key string }

// KeyOf returns the idempotency key of a new run, and false when it has
// none.
func KeyOf(nr *store.NewRun) (IdemKey, bool) {
	return IdemKey{nr.Workflow, nr.Tenant, nr.IdempotencyKey}, nr.IdempotencyKey != ""
}

// Dedupe decides which new runs of one CreateRuns call are duplicates: of
// a recorded run with the same idempotency key (byKey) or the same ID,
// workflow and tenant (byID), or of a run earlier in the call. A run whose
// ID is taken by a run of another workflow or tenant fails the call with
// ErrRunExists. Both stores apply it to what they hold, so that they answer
// alike.
func Dedupe(runs []store.NewRun, byID func(uuid.UUID) (workflow, tenant string, ok bool),
	byKey func(IdemKey) (uuid.UUID, bool)) (*store.CreateRunsResult, error) {
	res := &store.CreateRunsResult{Runs: make([]store.CreatedRun, len(runs))}
	batch := make(map[uuid.UUID]*store.NewRun, len(runs))
	batchKeys := make(map[IdemKey]uuid.UUID)
	for i := range runs {
		nr := &runs[i]
		res.Runs[i].ID = nr.ID
		k, keyed := KeyOf(nr)
		if keyed {
			if id, ok := byKey(k); ok {
				res.Runs[i] = store.CreatedRun{ID: id, Duplicate: true}
				continue
			}
			if id, ok := batchKeys[k]; ok {
				res.Runs[i] = store.CreatedRun{ID: id, Duplicate: true}
				continue
			}
		}
		wf, tenant, taken := byID(nr.ID)
		if !taken {
			if other, ok := batch[nr.ID]; ok {
				wf, tenant, taken = other.Workflow, other.Tenant, true
			}
		}
		if !taken {
			batch[nr.ID] = nr
			if keyed {
				batchKeys[k] = nr.ID
			}
			continue
		}
		if !SameRun(wf, tenant, nr) {
			return nil, fmt.Errorf("run %s: %w", nr.ID, durabletype.ErrRunExists)
		}
		res.Runs[i].Duplicate = true
	}
	return res, nil
}
