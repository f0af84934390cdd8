package durable_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// This file holds the fault-injecting store wrapper of TestSimulation
// (sim_test.go): each simulated engine talks to the shared in-memory store
// through its own simFaultStore.

// The injected errors are what a real store reports for a lost connection:
// transient (durabletype.ErrTransient), so callers may try again.
var (
	errSimInjected    = durabletype.Transient(errors.New("sim: injected store error"))
	errSimAmbiguous   = durabletype.Transient(errors.New("sim: injected store error after the call took effect"))
	errSimPartitioned = durabletype.Transient(errors.New("sim: engine partitioned from the store"))
)

// simOp names the store calls that faults are injected into. CreateRuns
// (triggers come from a fault-free client) and the reads the checks use
// (GetRun, ListTasks, ListEvents) get none.
type simOp int

const (
	simOpClaim simOp = iota
	simOpFinish
	simOpHeartbeat
	simOpFire
	simOpRescue
	simOpFinishTx
	simNumOps
)

var simOpNames = [simNumOps]string{"ClaimTasks", "FinishTasks", "Heartbeat", "FireTimers", "RescueTasks", "FinishTx"}

// simFaultRates are one engine's fault probabilities.
type simFaultRates struct {
	// Fail is the probability that a call fails.
	Fail float64
	// Ambiguous is the share of failures that happen after the call was
	// delegated (it took effect, the caller sees an error).
	Ambiguous float64
	// Replay is the probability that FinishTasks is called a second time
	// with the same outcomes, ReplayLater the share of those replays made
	// a little later (in virtual time) rather than at once.
	Replay, ReplayLater float64
	// HeartbeatDelay is the probability that a heartbeat is held for longer
	// than DeadAfter before it reaches the store.
	HeartbeatDelay float64
}

func (r simFaultRates) String() string {
	return fmt.Sprintf("fail=%.3f ambiguous=%.2f replay=%.2f(later %.2f) hbdelay=%.3f",
		r.Fail, r.Ambiguous, r.Replay, r.ReplayLater, r.HeartbeatDelay)
}

// simFaultStats counts what a simFaultStore did.
type simFaultStats struct {
	Before, After   [simNumOps]int // injected errors, before / after delegating
	HiddenClaims    int            // tasks claimed by a call whose caller saw an error
	Replays         int            // FinishTasks calls replayed at once
	LateReplays     int            // ... and a little later
	HeartbeatDelays int
	Applied         int // FinishTasks results as the engine's own calls saw them
	Duplicate       int
	Stale           int
	ReplayDuplicate int // results of the replays
	ReplayStale     int
	// Outcomes of functions' bodies applied (by FinishTasks or FinishTx,
	// the engine's own calls): checkpoints (records while the body runs
	// on) and suspensions (records and waits); replays that carried one.
	Checkpoints     int
	Suspends        int
	ReplayedRecords int
	// FinishTx (TxSteps): transactions that failed to begin (the step never
	// ran) or to commit (it ran, nothing was kept), both counted in
	// Before[simOpFinishTx]; outcomes the step did not ask to record
	// (it failed: rolled back); and the results of those recorded.
	TxBeginFailed      int
	TxCommitFailed     int
	TxNotRecorded      int
	TxApplied          int
	TxDuplicate        int
	TxStale            int
	LeaderTerms        int
	Partitioned        bool
	PartitionedLeading bool // the engine was leading when it was cut off
}

// simFaultStore wraps the shared store for one engine and injects that
// engine's faults: transient errors (before or after delegating), replayed
// outcomes, heartbeats held past DeadAfter, and from a chosen moment a
// permanent partition, after which every call fails and its notifications
// and leadership end.
//
// Each fault decision is drawn from a PCG source seeded with the engine's
// seed and the number of the call of that kind (the n-th FinishTasks of
// engine 2 always gets the same decision), so the plan does not depend on
// how calls of different kinds interleave.
type simFaultStore struct {
	inner     store.Store
	name      string
	seed      uint64
	rates     simFaultRates
	deadAfter time.Duration

	partCtx context.Context // done once the engine is partitioned
	cutOff  context.CancelFunc
	healed  atomic.Bool // see heal

	mu         sync.Mutex
	calls      [simNumOps]uint64
	stats      simFaultStats
	leading    int
	violations []string

	replays sync.WaitGroup // late replays still to happen
}

var (
	_ store.Store      = (*simFaultStore)(nil)
	_ store.Listener   = (*simFaultStore)(nil)
	_ store.Elector    = (*simFaultStore)(nil)
	_ store.TxCreator  = (*simFaultStore)(nil)
	_ store.Checker    = (*simFaultStore)(nil)
	_ store.TxFinisher = (*simFaultStore)(nil)
)

// newSimFaultStore must be called inside the bubble (its partition context
// belongs to it).
func newSimFaultStore(inner store.Store, name string, seed uint64, rates simFaultRates, deadAfter time.Duration) *simFaultStore {
	f := &simFaultStore{inner: inner, name: name, seed: seed, rates: rates, deadAfter: deadAfter}
	f.partCtx, f.cutOff = context.WithCancel(context.Background())
	return f
}

// partition cuts the engine off from the store for good.
func (f *simFaultStore) partition() {
	f.mu.Lock()
	if f.stats.Partitioned {
		f.mu.Unlock()
		return
	}
	f.stats.Partitioned = true
	f.stats.PartitionedLeading = f.leading > 0
	f.mu.Unlock()
	f.cutOff()
}

func (f *simFaultStore) cut() bool { return f.partCtx.Err() != nil && !f.healed.Load() }

// heal lets a partitioned engine reach the store again. It is not a fault
// of the plan: the test only uses it once the seed has already failed
// because the engine's Stop wedged, so that the engine can finish and the
// bubble end cleanly instead of aborting the remaining seeds.
func (f *simFaultStore) heal() { f.healed.Store(true) }

func (f *simFaultStore) snapshot() (simFaultStats, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats, slices.Clone(f.violations)
}

func (f *simFaultStore) violation(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.violations = append(f.violations, f.name+": "+fmt.Sprintf(format, args...))
}

type simFault int

const (
	simNoFault simFault = iota
	simFailBefore
	simFailAfter
)

// decide draws the fault of the next call of kind op, and returns the
// source for that call's further decisions.
func (f *simFaultStore) decide(op simOp) (simFault, *rand.Rand) {
	f.mu.Lock()
	n := f.calls[op]
	f.calls[op]++
	f.mu.Unlock()
	r := rand.New(rand.NewPCG(f.seed, uint64(op)<<48|n))
	if r.Float64() >= f.rates.Fail {
		return simNoFault, r
	}
	if r.Float64() < f.rates.Ambiguous {
		return simFailAfter, r
	}
	return simFailBefore, r
}

// before reports the error to return without delegating, if any.
func (f *simFaultStore) before(op simOp, flt simFault) error {
	if f.cut() {
		return errSimPartitioned
	}
	if flt == simFailBefore {
		f.mu.Lock()
		f.stats.Before[op]++
		f.mu.Unlock()
		return errSimInjected
	}
	return nil
}

// after reports the error to return although the call was delegated and
// took effect, if any: the injected ambiguous failure, or the partition if
// it began during the call.
func (f *simFaultStore) after(op simOp, flt simFault) error {
	if f.cut() {
		return errSimPartitioned
	}
	if flt == simFailAfter {
		f.mu.Lock()
		f.stats.After[op]++
		f.mu.Unlock()
		return errSimAmbiguous
	}
	return nil
}

// CreateRuns implements store.Store; no faults (triggers come from the
// client), but a partitioned engine cannot reach the store.
func (f *simFaultStore) CreateRuns(ctx context.Context, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.CreateRuns(ctx, p)
}

// ClaimTasks implements store.Store. An ambiguous failure leaves the tasks
// claimed but unknown to the engine: only a rescue after DeadAfter frees them.
func (f *simFaultStore) ClaimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	flt, _ := f.decide(simOpClaim)
	if err := f.before(simOpClaim, flt); err != nil {
		return nil, err
	}
	res, err := f.inner.ClaimTasks(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := f.after(simOpClaim, flt); err != nil {
		f.mu.Lock()
		f.stats.HiddenClaims += len(res)
		f.mu.Unlock()
		return nil, err
	}
	return res, nil
}

// FinishTasks implements store.Store, sometimes replaying the call (at once
// or later). A replay must never apply anything: every outcome it carries
// was already applied, or is a duplicate or stale.
func (f *simFaultStore) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	flt, r := f.decide(simOpFinish)
	if err := f.before(simOpFinish, flt); err != nil {
		return nil, err
	}
	res, err := f.inner.FinishTasks(ctx, p)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	for i, x := range res {
		switch x.Status {
		case store.FinishApplied:
			f.stats.Applied++
			f.countRecords(p.Outcomes[i].Kind)
		case store.FinishDuplicate:
			f.stats.Duplicate++
		case store.FinishStale:
			f.stats.Stale++
		}
	}
	f.mu.Unlock()
	f.maybeReplay(r, p)
	if err := f.after(simOpFinish, flt); err != nil {
		return nil, err
	}
	return res, nil
}

// countRecords counts an applied outcome of a function's body; f.mu is
// held.
func (f *simFaultStore) countRecords(k store.OutcomeKind) {
	switch k {
	case store.OutcomeCheckpoint:
		f.stats.Checkpoints++
	case store.OutcomeSuspend:
		f.stats.Suspends++
	}
}

// maybeReplay replays outcomes already recorded with FinishTasks, at once
// or a little later, with the probability the engine's rates give: those
// of functions' bodies too, a checkpoint's records (store.OutcomeCheckpoint)
// while the body may still run under the same claim.
func (f *simFaultStore) maybeReplay(r *rand.Rand, p *store.FinishTasksParams) {
	if r.Float64() >= f.rates.Replay {
		return
	}
	cp := &store.FinishTasksParams{Now: p.Now, Outcomes: slices.Clone(p.Outcomes)}
	f.mu.Lock()
	for _, o := range cp.Outcomes {
		if o.Kind == store.OutcomeCheckpoint || o.Kind == store.OutcomeSuspend {
			f.stats.ReplayedRecords++
		}
	}
	f.mu.Unlock()
	if r.Float64() < f.rates.ReplayLater {
		delay := time.Duration(r.Int64N(int64(3*f.deadAfter))) + time.Millisecond
		f.mu.Lock()
		f.stats.LateReplays++
		f.mu.Unlock()
		f.replays.Go(func() {
			time.Sleep(delay)
			f.replay(cp)
		})
		return
	}
	f.mu.Lock()
	f.stats.Replays++
	f.mu.Unlock()
	f.replay(cp)
}

func (f *simFaultStore) replay(p *store.FinishTasksParams) {
	res, err := f.inner.FinishTasks(context.Background(), p)
	if err != nil {
		f.violation("replayed FinishTasks failed: %v", err)
		return
	}
	for i, x := range res {
		o := p.Outcomes[i]
		switch x.Status {
		case store.FinishApplied:
			f.violation("a replayed outcome was applied again: run %s step %s token %d kind %d",
				o.Task.RunID, o.Task.Step, o.Task.Token, o.Kind)
		case store.FinishDuplicate:
			f.mu.Lock()
			f.stats.ReplayDuplicate++
			f.mu.Unlock()
		case store.FinishStale:
			f.mu.Lock()
			f.stats.ReplayStale++
			f.mu.Unlock()
		}
	}
}

// FinishTx implements store.TxFinisher with the faults of a database
// transaction: it fails to begin (the step never runs); it fails to commit
// (the step ran, its writes and outcome are rolled back: the inner store is
// told not to record, so the Tx's effects never run); or it commits and the
// answer is lost (the outcome is applied and its effects have run, but the
// caller sees an error, and must find out by recording a failure that the
// store reports as a duplicate). A partition that begins while the step
// runs fails the commit, one that begins during the commit loses its
// answer. A recorded outcome may be replayed with FinishTasks, which must
// never apply it again.
func (f *simFaultStore) FinishTx(ctx context.Context, p *store.FinishTxParams, fn func(ctx context.Context, tx any) (store.Outcome, bool)) (store.FinishResult, bool, error) {
	tf, ok := f.inner.(store.TxFinisher)
	if !ok {
		return store.FinishResult{}, false, durable.ErrTxUnsupported
	}
	flt, r := f.decide(simOpFinishTx)
	if f.cut() {
		return store.FinishResult{}, false, errSimPartitioned
	}
	if flt == simFailBefore && r.Float64() < 0.5 {
		f.mu.Lock()
		f.stats.Before[simOpFinishTx]++
		f.stats.TxBeginFailed++
		f.mu.Unlock()
		return store.FinishResult{}, false, errSimInjected
	}
	var o store.Outcome
	var record, rolledBack bool
	res, recorded, err := tf.FinishTx(ctx, p, func(ctx context.Context, tx any) (store.Outcome, bool) {
		o, record = fn(ctx, tx)
		if record && (flt == simFailBefore || f.cut()) {
			rolledBack = true // the commit fails: nothing is kept
			return o, false
		}
		return o, record
	})
	switch {
	case err != nil:
		return store.FinishResult{}, false, err
	case rolledBack:
		if f.cut() {
			return store.FinishResult{}, false, errSimPartitioned
		}
		f.mu.Lock()
		f.stats.Before[simOpFinishTx]++
		f.stats.TxCommitFailed++
		f.mu.Unlock()
		return store.FinishResult{}, false, errSimInjected
	case !recorded:
		// The step failed: rolled back, for the engine to record.
		f.mu.Lock()
		f.stats.TxNotRecorded++
		f.mu.Unlock()
		return res, false, nil
	}
	f.mu.Lock()
	switch res.Status {
	case store.FinishApplied:
		f.stats.TxApplied++
		f.countRecords(o.Kind)
	case store.FinishDuplicate:
		f.stats.TxDuplicate++
	case store.FinishStale:
		f.stats.TxStale++
	}
	f.mu.Unlock()
	f.maybeReplay(r, &store.FinishTasksParams{Now: p.Now, Outcomes: []store.Outcome{o}})
	if err := f.after(simOpFinishTx, flt); err != nil {
		return store.FinishResult{}, false, err
	}
	return res, true, nil
}

// Heartbeat implements store.Store; a heartbeat may be held for longer than
// DeadAfter first, so that the claims it vouches for are rescued meanwhile.
func (f *simFaultStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	flt, r := f.decide(simOpHeartbeat)
	if f.cut() {
		return nil, errSimPartitioned
	}
	if r.Float64() < f.rates.HeartbeatDelay {
		d := f.deadAfter + time.Duration(r.Int64N(int64(f.deadAfter))) + time.Millisecond
		f.mu.Lock()
		f.stats.HeartbeatDelays++
		f.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if err := f.before(simOpHeartbeat, flt); err != nil {
		return nil, err
	}
	res, err := f.inner.Heartbeat(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := f.after(simOpHeartbeat, flt); err != nil {
		return nil, err
	}
	return res, nil
}

// FireTimers implements store.Store.
func (f *simFaultStore) FireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
	flt, _ := f.decide(simOpFire)
	if err := f.before(simOpFire, flt); err != nil {
		return nil, err
	}
	res, err := f.inner.FireTimers(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := f.after(simOpFire, flt); err != nil {
		return nil, err
	}
	return res, nil
}

// RescueTasks implements store.Store.
func (f *simFaultStore) RescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	flt, _ := f.decide(simOpRescue)
	if err := f.before(simOpRescue, flt); err != nil {
		return nil, err
	}
	res, err := f.inner.RescueTasks(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := f.after(simOpRescue, flt); err != nil {
		return nil, err
	}
	return res, nil
}

// GetRun implements store.Store (no faults).
func (f *simFaultStore) GetRun(ctx context.Context, id uuid.UUID) (*store.Run, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.GetRun(ctx, id)
}

// ListTasks implements store.Store (no faults).
func (f *simFaultStore) ListTasks(ctx context.Context, id uuid.UUID) ([]*store.Task, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.ListTasks(ctx, id)
}

// ListEvents implements store.Store (no faults).
func (f *simFaultStore) ListEvents(ctx context.Context, id uuid.UUID) ([]*durabletype.Event, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.ListEvents(ctx, id)
}

// ListRuns implements store.Store (no faults).
func (f *simFaultStore) ListRuns(ctx context.Context, p *store.ListRunsParams) (*store.ListRunsResult, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.ListRuns(ctx, p)
}

// ActOnRuns implements store.Store (no faults).
func (f *simFaultStore) ActOnRuns(ctx context.Context, p *store.ActOnRunsParams) ([]store.RunActionResult, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.ActOnRuns(ctx, p)
}

// Stats implements store.Store (no faults).
func (f *simFaultStore) Stats(ctx context.Context, p *store.StatsParams) (*durabletype.Stats, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.Stats(ctx, p)
}

// PruneRuns implements store.Store (no faults).
func (f *simFaultStore) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (*store.PruneRunsResult, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.PruneRuns(ctx, p)
}

// SendEvents implements store.Store (no faults).
func (f *simFaultStore) SendEvents(ctx context.Context, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.SendEvents(ctx, p)
}

// Signal implements store.Store (no faults).
func (f *simFaultStore) Signal(ctx context.Context, p *store.SignalParams) (*store.SignalResult, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.Signal(ctx, p)
}

// ApplyInbox implements store.Store (no faults).
func (f *simFaultStore) ApplyInbox(ctx context.Context, p *store.ApplyInboxParams) (*store.ApplyInboxResult, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.ApplyInbox(ctx, p)
}

// PruneEvents implements store.Store (no faults).
func (f *simFaultStore) PruneEvents(ctx context.Context, p *store.PruneEventsParams) (*store.PruneEventsResult, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	return f.inner.PruneEvents(ctx, p)
}

// untilCut returns ctx, also cancelled when the engine is partitioned.
func (f *simFaultStore) untilCut(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(f.partCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// Listen implements store.Listener: the inner store's notifications until
// the partition. Without an inner Listener it delivers nothing, which the
// engine treats like a store without notifications (it keeps polling at
// PollInterval).
func (f *simFaultStore) Listen(ctx context.Context, deliver func(store.Notification)) error {
	if f.cut() {
		return errSimPartitioned
	}
	lctx, done := f.untilCut(ctx)
	defer done()
	var err error
	if l, ok := f.inner.(store.Listener); ok {
		err = l.Listen(lctx, deliver)
	} else {
		<-lctx.Done()
		err = lctx.Err()
	}
	if f.cut() {
		return errSimPartitioned
	}
	return err
}

// Lead implements store.Elector: the inner store's election until the
// partition, when leadership is given up (so another engine takes over) and
// Lead returns. Without an inner Elector every engine leads, as the engine
// does with a store that elects nobody.
func (f *simFaultStore) Lead(ctx context.Context, id string, lead func(ctx context.Context)) error {
	if f.cut() {
		return errSimPartitioned
	}
	lctx, done := f.untilCut(ctx)
	defer done()
	term := func(ctx context.Context) {
		f.mu.Lock()
		f.leading++
		f.stats.LeaderTerms++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.leading--
			f.mu.Unlock()
		}()
		lead(ctx)
	}
	var err error
	if el, ok := f.inner.(store.Elector); ok {
		err = el.Lead(lctx, id, term)
	} else {
		term(lctx)
		err = lctx.Err()
	}
	if f.cut() {
		return errSimPartitioned
	}
	return err
}

// CreateRunsTx implements store.TxCreator when the inner store does.
func (f *simFaultStore) CreateRunsTx(ctx context.Context, tx any, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	if f.cut() {
		return nil, errSimPartitioned
	}
	if tc, ok := f.inner.(store.TxCreator); ok {
		return tc.CreateRunsTx(ctx, tx, p)
	}
	return nil, durable.ErrTxUnsupported
}

// Check implements store.Checker: the inner store's check, if it has one.
func (f *simFaultStore) Check(ctx context.Context) error {
	if f.cut() {
		return errSimPartitioned
	}
	if c, ok := f.inner.(store.Checker); ok {
		return c.Check(ctx)
	}
	return nil
}
