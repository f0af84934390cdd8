package durable

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Run starts a run of w for tenant with input in on engine e, waits until
// it has settled, and returns its result. For a run that failed it returns
// the result and a *RunError (matching ErrRunFailed) naming the step that
// failed and its error. The engines that execute the run may be e or any
// other engine sharing its store. If ctx ends while Run waits, the run goes
// on and Run returns a *WaitError holding its ID. On a stopped engine Run
// starts nothing and returns ErrEngineStopped. A trigger that duplicates an
// earlier one (WithIdempotencyKey, WithRunID) waits for the earlier run.
func (w *Workflow[I]) Run(ctx context.Context, e *Engine, tenant string, in I, opts ...TriggerOption) (*RunResult, error) {
	id, err := w.RunNoWait(ctx, e, tenant, in, opts...)
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
// starts nothing and returns ErrEngineStopped. On an engine not started
// yet it records the run, which waits in the store until an engine that
// registered w (this one, once started) runs it. A trigger that duplicates
// an earlier one returns the earlier run's ID (Start says which it was).
func (w *Workflow[I]) RunNoWait(ctx context.Context, e *Engine, tenant string, in I, opts ...TriggerOption) (uuid.UUID, error) {
	st, err := w.Start(ctx, e, tenant, in, opts...)
	return st.RunID, err
}

// RunNoWaitTx is RunNoWait inside tx, a transaction of the caller's, so
// that the run is started if and only if tx commits: save an order and start
// its workflow in one transaction. tx must be the store's transaction type
// (pgx.Tx for pgstore); a store without transactions returns
// ErrTxUnsupported.
func (w *Workflow[I]) RunNoWaitTx(ctx context.Context, e *Engine, tx any, tenant string, in I, opts ...TriggerOption) (uuid.UUID, error) {
	st, err := w.StartTx(ctx, e, tx, tenant, in, opts...)
	return st.RunID, err
}

// Started says what a trigger did.
type Started struct {
	// RunID is the run's ID: the new run's, or for a duplicate the run
	// that was triggered before with the same idempotency key or run ID.
	RunID uuid.UUID
	// Duplicate is set when the trigger started nothing because it
	// duplicates an earlier one (WithIdempotencyKey, WithRunID).
	Duplicate bool
	// Warning, when set, says that the run was started at a version of
	// its workflow that no live worker serves while live workers serve
	// other versions of it: the run waits until a worker of its version
	// starts or it is moved to another version. It is only checked by an
	// engine that does not serve that version itself (a process that only
	// triggers runs), from the workers as read at most a minute ago; the
	// engine also logs it, once a minute at most (docs/operating.md,
	// "Deploys").
	Warning string
}

// Start starts a run of w for tenant with input in, like RunNoWait, and
// says whether it was a duplicate of an earlier trigger.
func (w *Workflow[I]) Start(ctx context.Context, e *Engine, tenant string, in I, opts ...TriggerOption) (Started, error) {
	st, err := w.StartMany(ctx, e, []Trigger[I]{{Tenant: tenant, Input: in, Options: opts}})
	if err != nil {
		return Started{}, err
	}
	return st[0], nil
}

// StartTx is Start inside tx, a transaction of the caller's (see
// RunNoWaitTx). A run that another transaction triggers at the same moment
// with the same idempotency key is waited for: if that transaction
// commits, this trigger is its duplicate, without aborting tx.
func (w *Workflow[I]) StartTx(ctx context.Context, e *Engine, tx any, tenant string, in I, opts ...TriggerOption) (Started, error) {
	if e.isStopped() {
		return Started{}, ErrEngineStopped
	}
	tc, ok := e.store.(store.TxCreator)
	if !ok {
		return Started{}, ErrTxUnsupported
	}
	p, err := w.prepare(ctx, e, []Trigger[I]{{Tenant: tenant, Input: in, Options: opts}})
	if err != nil {
		return Started{}, err
	}
	res, err := tc.CreateRunsTx(ctx, tx, p)
	if err != nil {
		return Started{}, fmt.Errorf("durable: starting run: %w", err)
	}
	return e.warnStarted(ctx, w.def.name, p, started(res))[0], nil
}

// Trigger is one run to start with RunManyNoWait or StartMany.
type Trigger[I any] struct {
	// Tenant is the tenant the run belongs to (1-200 bytes of UTF-8).
	Tenant string
	// Input is the run's input.
	Input I
	// Options configure the run (WithIdempotencyKey, WithPriority, ...).
	Options []TriggerOption
}

// RunManyNoWait starts many runs of w in one atomic store call (all or
// none) and returns their IDs in order. On a stopped engine it starts
// nothing and returns ErrEngineStopped. A trigger that duplicates an
// earlier one (or one earlier in triggers) gets the earlier run's ID.
func (w *Workflow[I]) RunManyNoWait(ctx context.Context, e *Engine, triggers []Trigger[I]) ([]uuid.UUID, error) {
	st, err := w.StartMany(ctx, e, triggers)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, len(st))
	for i := range st {
		ids[i] = st[i].RunID
	}
	return ids, nil
}

// StartMany is RunManyNoWait saying, for each trigger, whether it was a
// duplicate.
func (w *Workflow[I]) StartMany(ctx context.Context, e *Engine, triggers []Trigger[I]) ([]Started, error) {
	if e.isStopped() {
		return nil, ErrEngineStopped
	}
	p, err := w.prepare(ctx, e, triggers)
	if err != nil {
		return nil, err
	}
	res, err := e.store.CreateRuns(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("durable: starting runs: %w", err)
	}
	e.wakeClaims()
	return e.warnStarted(ctx, w.def.name, p, started(res)), nil
}

// warnStarted sets the Warning of the runs of workflow in st that p
// started (not the duplicates), and returns st.
func (e *Engine) warnStarted(ctx context.Context, workflow string, p *store.CreateRunsParams, st []Started) []Started {
	if len(p.Runs) == 0 || p.Runs[0].Shape == nil || !slices.ContainsFunc(st, func(s Started) bool { return !s.Duplicate }) {
		return st
	}
	warning := e.startWarning(ctx, workflow, p.Runs[0].Shape.Version)
	for i := range st {
		if !st[i].Duplicate {
			st[i].Warning = warning
		}
	}
	return st
}

func started(res *store.CreateRunsResult) []Started {
	out := make([]Started, len(res.Runs))
	for i, r := range res.Runs {
		out[i] = Started{RunID: r.ID, Duplicate: r.Duplicate}
	}
	return out
}

// prepare makes the new runs of triggers; with tracing, each records the
// span active in ctx as its trace parent.
func (w *Workflow[I]) prepare(ctx context.Context, e *Engine, triggers []Trigger[I]) (*store.CreateRunsParams, error) {
	shape, err := e.shapeOf(w.def)
	if err != nil {
		return nil, err
	}
	traceParent := e.tel.traceParent(ctx)
	p := &store.CreateRunsParams{Now: e.now(), Runs: make([]store.NewRun, len(triggers))}
	for i, t := range triggers {
		if err := dag.TenantRule.Check("tenant", t.Tenant); err != nil {
			return nil, err
		}
		o, err := applyTrigger(t.Options)
		if err != nil {
			return nil, err
		}
		b, err := e.cfg.Codec.Marshal(t.Input)
		if err != nil {
			return nil, fmt.Errorf("%w: input: %w", ErrEncode, err)
		}
		if err := e.checkInput("the input", b); err != nil {
			return nil, err
		}
		if _, err := w.def.decodeInput(e.cfg.Codec, b); err != nil {
			return nil, fmt.Errorf("%w: input does not decode back into its type: %w", ErrEncode, err)
		}
		if p.Runs[i], err = w.def.newRun(shape, t.Tenant, b, t.Input, o); err != nil {
			return nil, err
		}
		p.Runs[i].TraceParent = traceParent
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

// Events returns a run's event log in order. Events of a map step's items
// name them "step[k]".
func (e *Engine) Events(ctx context.Context, id uuid.UUID) ([]durabletype.Event, error) {
	evs, err := e.store.ListEvents(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("durable: run %s: %w", id, err)
	}
	out := make([]durabletype.Event, len(evs))
	for i, ev := range evs {
		out[i] = *ev
		out[i].Step = dag.DisplayName(ev.Step) // an item as "step[k]", as RunResult names it
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
