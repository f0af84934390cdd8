package durable

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/store"
)

// Run starts a run of w for tenant with input in on engine e, waits until
// it has settled, and returns its result. For a run that failed it returns
// the result and a *RunError (matching ErrRunFailed) naming the step that
// failed and its error. The engines that execute the run may be e or any
// other engine sharing its store. If ctx ends while Run waits, the run goes
// on and Run returns a *WaitError holding its ID. On a stopped engine Run
// starts nothing and returns ErrEngineStopped.
func (w *Workflow[I]) Run(ctx context.Context, e *Engine, tenant string, in I) (*RunResult, error) {
	id, err := w.RunNoWait(ctx, e, tenant, in)
	if err != nil {
		return nil, err
	}
	res, err := e.Wait(ctx, id)
	if err != nil {
		return nil, err
	}
	return res, res.Err
}

// RunNoWait starts a run of w for tenant with input in and returns its ID
// without waiting. Wait or Get it later by that ID. On a stopped engine it
// starts nothing and returns ErrEngineStopped.
func (w *Workflow[I]) RunNoWait(ctx context.Context, e *Engine, tenant string, in I) (uuid.UUID, error) {
	ids, err := w.RunManyNoWait(ctx, e, []Trigger[I]{{Tenant: tenant, Input: in}})
	if err != nil {
		return uuid.Nil, err
	}
	return ids[0], nil
}

// RunNoWaitTx is RunNoWait inside tx, a transaction of the caller's, so
// that the run is started if and only if tx commits: save an order and start
// its workflow in one transaction. tx must be the store's transaction type
// (pgx.Tx for pgstore); a store without transactions returns
// ErrTxUnsupported.
func (w *Workflow[I]) RunNoWaitTx(ctx context.Context, e *Engine, tx any, tenant string, in I) (uuid.UUID, error) {
	if e.isStopped() {
		return uuid.Nil, ErrEngineStopped
	}
	tc, ok := e.store.(store.TxCreator)
	if !ok {
		return uuid.Nil, ErrTxUnsupported
	}
	p, err := w.prepare(e, []Trigger[I]{{Tenant: tenant, Input: in}})
	if err != nil {
		return uuid.Nil, err
	}
	if err := tc.CreateRunsTx(ctx, tx, p); err != nil {
		return uuid.Nil, fmt.Errorf("durable: starting run: %w", err)
	}
	return p.Runs[0].ID, nil
}

// Trigger is one run to start with RunManyNoWait.
type Trigger[I any] struct {
	// Tenant is the tenant the run belongs to (1-200 bytes of UTF-8).
	Tenant string
	// Input is the run's input.
	Input I
}

// RunManyNoWait starts many runs of w in one atomic store call (all or
// none) and returns their IDs in order. On a stopped engine it starts
// nothing and returns ErrEngineStopped.
func (w *Workflow[I]) RunManyNoWait(ctx context.Context, e *Engine, triggers []Trigger[I]) ([]uuid.UUID, error) {
	if e.isStopped() {
		return nil, ErrEngineStopped
	}
	p, err := w.prepare(e, triggers)
	if err != nil {
		return nil, err
	}
	if err := e.store.CreateRuns(ctx, p); err != nil {
		return nil, fmt.Errorf("durable: starting runs: %w", err)
	}
	e.wakeClaims()
	ids := make([]uuid.UUID, len(p.Runs))
	for i := range p.Runs {
		ids[i] = p.Runs[i].ID
	}
	return ids, nil
}

func (w *Workflow[I]) prepare(e *Engine, triggers []Trigger[I]) (*store.CreateRunsParams, error) {
	shape, err := w.def.freeze()
	if err != nil {
		return nil, err
	}
	p := &store.CreateRunsParams{Now: e.now(), Runs: make([]store.NewRun, len(triggers))}
	for i, t := range triggers {
		if !dag.ValidTenant(t.Tenant) {
			return nil, fmt.Errorf("%w: %s", ErrInvalidTenant, dag.Quote(t.Tenant))
		}
		b, err := e.cfg.Codec.Marshal(t.Input)
		if err != nil {
			return nil, fmt.Errorf("%w: input: %w", ErrEncode, err)
		}
		if _, err := w.def.decodeInput(e.cfg.Codec, b); err != nil {
			return nil, fmt.Errorf("%w: input does not decode back into its type: %w", ErrEncode, err)
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("durable: run id: %w", err)
		}
		keys, err := w.def.keys(t.Input)
		if err != nil {
			return nil, err
		}
		p.Runs[i] = store.NewRun{ID: id, Workflow: w.def.name, Tenant: t.Tenant, Input: b, Shape: shape, Keys: keys}
	}
	return p, nil
}

// Get returns the current state of a run without waiting.
func (e *Engine) Get(ctx context.Context, id uuid.UUID) (*RunResult, error) {
	run, err := e.store.GetRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("durable: run %s: %w", id, err)
	}
	return e.result(ctx, run)
}

func (e *Engine) result(ctx context.Context, run *store.Run) (*RunResult, error) {
	tasks, err := e.store.ListTasks(ctx, run.ID)
	if err != nil {
		return nil, fmt.Errorf("durable: run %s: %w", run.ID, err)
	}
	return newRunResult(run, tasks, e.cfg.Codec), nil
}

// Events returns a run's event log in order.
func (e *Engine) Events(ctx context.Context, id uuid.UUID) ([]Event, error) {
	evs, err := e.store.ListEvents(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("durable: run %s: %w", id, err)
	}
	out := make([]Event, len(evs))
	for i, ev := range evs {
		out[i] = *ev
	}
	return out, nil
}

// Wait waits until a run has settled and returns its result. Unlike Run it
// returns a nil error for a run that failed; check the result's Status or
// Err. While the engine is started it is woken by the store's
// notifications; otherwise it polls. If ctx ends first it returns a
// *WaitError.
func (e *Engine) Wait(ctx context.Context, id uuid.UUID) (*RunResult, error) {
	wake, unwatch := e.watch(id)
	defer unwatch()
	delay := 10 * time.Millisecond
	for {
		run, err := e.store.GetRun(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil, &WaitError{RunID: id, Err: ctx.Err()}
			}
			return nil, fmt.Errorf("durable: run %s: %w", id, err)
		}
		if run.Settled() {
			return e.result(ctx, run)
		}
		limit := time.Second
		if e.notifying.Load() {
			limit = 10 * time.Second
		}
		t := time.NewTimer(delay)
		select {
		case <-wake:
			delay = 10 * time.Millisecond
		case <-t.C:
			delay = min(2*delay, limit)
		case <-ctx.Done():
			t.Stop()
			return nil, &WaitError{RunID: id, Err: ctx.Err()}
		}
		t.Stop()
	}
}

func (e *Engine) watch(id uuid.UUID) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	e.waitMu.Lock()
	if e.waiters[id] == nil {
		e.waiters[id] = map[chan struct{}]struct{}{}
	}
	e.waiters[id][ch] = struct{}{}
	e.waitMu.Unlock()
	return ch, func() {
		e.waitMu.Lock()
		delete(e.waiters[id], ch)
		if len(e.waiters[id]) == 0 {
			delete(e.waiters, id)
		}
		e.waitMu.Unlock()
	}
}

func (e *Engine) wakeWaiters(id uuid.UUID) {
	e.waitMu.Lock()
	defer e.waitMu.Unlock()
	for ch := range e.waiters[id] {
		signal(ch)
	}
}

func (e *Engine) wakeAllWaiters() {
	e.waitMu.Lock()
	defer e.waitMu.Unlock()
	for _, set := range e.waiters {
		for ch := range set {
			signal(ch)
		}
	}
}
