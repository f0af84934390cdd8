package memstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/effectivelabs/durable/store"
)

var _ store.TxFinisher = (*Store)(nil)

// Tx is the transaction the in-memory store gives a transactional step
// (durable.TxStep), the counterpart of a database transaction: the step
// registers its effects with OnCommit, and they run as the step's outcome
// is recorded, and never if it is not (the step failed, or its claim is no
// longer current). They run with the store locked, as part of the
// recording, so that whoever sees the outcome sees their effects: an effect
// must not call the store or an engine on it. A Tx is valid while its step
// runs.
type Tx struct {
	mu      sync.Mutex
	effects []func()
	closed  bool
}

// OnCommit adds f to the effects that run if the step's outcome is
// recorded, in the order they were added. After the step returned it does
// nothing.
func (t *Tx) OnCommit(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed && f != nil {
		t.effects = append(t.effects, f)
	}
}

// close ends the transaction and returns its effects.
func (t *Tx) close() []func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	effects := t.effects
	t.effects = nil
	return effects
}

// FinishTx implements store.TxFinisher: fn gets a *Tx, whose effects run
// when the outcome fn returns is applied (FinishApplied), in the same
// critical section.
func (s *Store) FinishTx(ctx context.Context, p *store.FinishTxParams, fn func(ctx context.Context, tx any) (store.Outcome, bool)) (store.FinishResult, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.FinishResult{}, false, err
	}
	tx := &Tx{}
	o, record := fn(ctx, tx)
	effects := tx.close()
	if !record {
		return store.FinishResult{}, false, nil
	}
	var panicked any
	res, err := s.finishTasks(ctx, &store.FinishTasksParams{Now: p.Now, Outcomes: []store.Outcome{o}}, func(res []store.FinishResult) {
		if res[0].Status != store.FinishApplied {
			return
		}
		defer func() { panicked = recover() }() // the store stays usable
		for _, f := range effects {
			f()
		}
	})
	switch {
	case err != nil:
		return store.FinishResult{}, false, err
	case panicked != nil:
		return store.FinishResult{}, false, fmt.Errorf("memstore: an OnCommit effect panicked after the outcome was recorded: %v", panicked)
	}
	return res[0], true, nil
}
