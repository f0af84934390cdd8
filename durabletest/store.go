package durabletest

import (
	"context"
	"sync/atomic"

	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// watch is what the kit's store tells the kit: changed, when a call may
// have changed a run; inflight and calls, which calls that may change a
// run are under way (the kit on PostgreSQL reads a quiet database only
// when none was, before, during or after its reads: see Kit.quietNow).
//
// Every change of a run's state is one of these calls, so a kit waiting
// for a state looks again exactly at the instants where it may have been
// reached, and never wakes for the engine's idle polls.
type watch struct {
	changed  chan struct{}
	inflight atomic.Int64 // calls under way
	calls    atomic.Int64 // calls begun and ended: two per call
}

func newWatch() *watch { return &watch{changed: make(chan struct{}, 1)} }

// touch says that a run may have changed.
func (w *watch) touch() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// begin counts a call under way.
func (w *watch) begin() {
	w.inflight.Add(1)
	w.calls.Add(1)
}

// end counts a call ended, calling touch first if it changed something.
func (w *watch) end(changed bool) {
	if changed {
		w.touch()
	}
	w.calls.Add(1)
	w.inflight.Add(-1)
}

// observe runs call between begin and end, and returns what it returned;
// changed tells from its result whether it changed something.
func observe[R any](w *watch, call func() (R, error), changed func(R) bool) (R, error) {
	w.begin()
	res, err := call()
	w.end(err == nil && changed(res))
	return res, err
}

func always[R any](R) bool { return true }

// memObserved is the in-memory kit's store: a memstore.Store whose calls
// that may change a run are watched. Embedding the store passes on every
// optional interface the engine looks for (Listener, Elector, Scheduler,
// WorkerRegistry, ...).
type memObserved struct {
	*memstore.Store
	w *watch
}

// pgObserved is the kit's store on PostgreSQL, watched as memObserved is.
type pgObserved struct {
	*pgstore.Store
	w *watch
}

var (
	_ store.TxFinisher = (*memObserved)(nil)
	_ store.TxFinisher = (*pgObserved)(nil)
	_ store.TxCreator  = (*pgObserved)(nil)
	_ store.TxSender   = (*pgObserved)(nil)
)

// The watched calls, for each store.

func (s *memObserved) CreateRuns(ctx context.Context, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	return observe(s.w, func() (*store.CreateRunsResult, error) { return s.Store.CreateRuns(ctx, p) }, always)
}

func (s *pgObserved) CreateRuns(ctx context.Context, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	return observe(s.w, func() (*store.CreateRunsResult, error) { return s.Store.CreateRuns(ctx, p) }, always)
}

func (s *memObserved) CreateRunsTx(ctx context.Context, tx any, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	return observe(s.w, func() (*store.CreateRunsResult, error) { return s.Store.CreateRunsTx(ctx, tx, p) }, always)
}

func (s *pgObserved) CreateRunsTx(ctx context.Context, tx any, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	return observe(s.w, func() (*store.CreateRunsResult, error) { return s.Store.CreateRunsTx(ctx, tx, p) }, always)
}

func claimed(c []*store.ClaimedTask) bool { return len(c) > 0 }

func (s *memObserved) ClaimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	return observe(s.w, func() ([]*store.ClaimedTask, error) { return s.Store.ClaimTasks(ctx, p) }, claimed)
}

func (s *pgObserved) ClaimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	return observe(s.w, func() ([]*store.ClaimedTask, error) { return s.Store.ClaimTasks(ctx, p) }, claimed)
}

func (s *memObserved) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	return observe(s.w, func() ([]store.FinishResult, error) { return s.Store.FinishTasks(ctx, p) }, always)
}

func (s *pgObserved) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	return observe(s.w, func() ([]store.FinishResult, error) { return s.Store.FinishTasks(ctx, p) }, always)
}

// finishTx is a TxFinisher's call, watched: the step's transaction is open
// while it lasts, and the outcome recorded (and delivered) when it ends.
func finishTx(w *watch, ts store.TxFinisher, ctx context.Context, p *store.FinishTxParams, fn func(ctx context.Context, tx any) (store.Outcome, bool)) (store.FinishResult, bool, error) {
	w.begin()
	res, recorded, err := ts.FinishTx(ctx, p, fn)
	w.end(true)
	return res, recorded, err
}

func (s *memObserved) FinishTx(ctx context.Context, p *store.FinishTxParams, fn func(ctx context.Context, tx any) (store.Outcome, bool)) (store.FinishResult, bool, error) {
	return finishTx(s.w, s.Store, ctx, p, fn)
}

func (s *pgObserved) FinishTx(ctx context.Context, p *store.FinishTxParams, fn func(ctx context.Context, tx any) (store.Outcome, bool)) (store.FinishResult, bool, error) {
	return finishTx(s.w, s.Store, ctx, p, fn)
}

func fired(r *store.FireTimersResult) bool { return r.Fired > 0 || len(r.Settled) > 0 }

func (s *memObserved) FireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
	return observe(s.w, func() (*store.FireTimersResult, error) { return s.Store.FireTimers(ctx, p) }, fired)
}

func (s *pgObserved) FireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
	return observe(s.w, func() (*store.FireTimersResult, error) { return s.Store.FireTimers(ctx, p) }, fired)
}

func rescued(r *store.RescueTasksResult) bool { return len(r.Rescued) > 0 || len(r.Settled) > 0 }

func (s *memObserved) RescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	return observe(s.w, func() (*store.RescueTasksResult, error) { return s.Store.RescueTasks(ctx, p) }, rescued)
}

func (s *pgObserved) RescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	return observe(s.w, func() (*store.RescueTasksResult, error) { return s.Store.RescueTasks(ctx, p) }, rescued)
}

func (s *memObserved) ActOnRuns(ctx context.Context, p *store.ActOnRunsParams) ([]store.RunActionResult, error) {
	return observe(s.w, func() ([]store.RunActionResult, error) { return s.Store.ActOnRuns(ctx, p) }, always)
}

func (s *pgObserved) ActOnRuns(ctx context.Context, p *store.ActOnRunsParams) ([]store.RunActionResult, error) {
	return observe(s.w, func() ([]store.RunActionResult, error) { return s.Store.ActOnRuns(ctx, p) }, always)
}

func (s *memObserved) SendEvents(ctx context.Context, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	return observe(s.w, func() (*store.SendEventsResult, error) { return s.Store.SendEvents(ctx, p) }, always)
}

func (s *pgObserved) SendEvents(ctx context.Context, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	return observe(s.w, func() (*store.SendEventsResult, error) { return s.Store.SendEvents(ctx, p) }, always)
}

func (s *memObserved) SendEventsTx(ctx context.Context, tx any, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	return observe(s.w, func() (*store.SendEventsResult, error) { return s.Store.SendEventsTx(ctx, tx, p) }, always)
}

func (s *pgObserved) SendEventsTx(ctx context.Context, tx any, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	return observe(s.w, func() (*store.SendEventsResult, error) { return s.Store.SendEventsTx(ctx, tx, p) }, always)
}

func (s *memObserved) Signal(ctx context.Context, p *store.SignalParams) (*store.SignalResult, error) {
	return observe(s.w, func() (*store.SignalResult, error) { return s.Store.Signal(ctx, p) }, always)
}

func (s *pgObserved) Signal(ctx context.Context, p *store.SignalParams) (*store.SignalResult, error) {
	return observe(s.w, func() (*store.SignalResult, error) { return s.Store.Signal(ctx, p) }, always)
}

func applied(r *store.ApplyInboxResult) bool { return r.Applied > 0 }

func (s *memObserved) ApplyInbox(ctx context.Context, p *store.ApplyInboxParams) (*store.ApplyInboxResult, error) {
	return observe(s.w, func() (*store.ApplyInboxResult, error) { return s.Store.ApplyInbox(ctx, p) }, applied)
}

func (s *pgObserved) ApplyInbox(ctx context.Context, p *store.ApplyInboxParams) (*store.ApplyInboxResult, error) {
	return observe(s.w, func() (*store.ApplyInboxResult, error) { return s.Store.ApplyInbox(ctx, p) }, applied)
}

func firedSchedules(r *store.FireSchedulesResult) bool { return len(r.Fired) > 0 }

func (s *memObserved) FireSchedules(ctx context.Context, p *store.FireSchedulesParams) (*store.FireSchedulesResult, error) {
	return observe(s.w, func() (*store.FireSchedulesResult, error) { return s.Store.FireSchedules(ctx, p) }, firedSchedules)
}

func (s *pgObserved) FireSchedules(ctx context.Context, p *store.FireSchedulesParams) (*store.FireSchedulesResult, error) {
	return observe(s.w, func() (*store.FireSchedulesResult, error) { return s.Store.FireSchedules(ctx, p) }, firedSchedules)
}

func (s *memObserved) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (*store.PruneRunsResult, error) {
	return observe(s.w, func() (*store.PruneRunsResult, error) { return s.Store.PruneRuns(ctx, p) }, always)
}

func (s *pgObserved) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (*store.PruneRunsResult, error) {
	return observe(s.w, func() (*store.PruneRunsResult, error) { return s.Store.PruneRuns(ctx, p) }, always)
}
