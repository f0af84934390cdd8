package durabletest

import (
	"context"

	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

// observed is the kit's in-memory store: a memstore.Store that says, on
// changed, when a call may have changed a run. Every change of a run's
// state is one of these calls, so a kit waiting for a state looks again
// exactly at the instants where it may have been reached, and never wakes
// for the engine's idle polls. Embedding the store passes on every
// optional interface the engine looks for (Listener, Elector, Scheduler,
// WorkerRegistry, ...).
type observed struct {
	*memstore.Store
	changed chan struct{}
}

func newObserved() *observed {
	return &observed{Store: memstore.New(), changed: make(chan struct{}, 1)}
}

// touch says that a run may have changed.
func (s *observed) touch() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// touchIf calls touch when changed is true, and returns its arguments.
func touchIf[R any](s *observed, res R, err error, changed func(R) bool) (R, error) {
	if err == nil && changed(res) {
		s.touch()
	}
	return res, err
}

func always[R any](R) bool { return true }

func (s *observed) CreateRuns(ctx context.Context, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	res, err := s.Store.CreateRuns(ctx, p)
	return touchIf(s, res, err, always)
}

func (s *observed) CreateRunsTx(ctx context.Context, tx any, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	res, err := s.Store.CreateRunsTx(ctx, tx, p)
	return touchIf(s, res, err, always)
}

func (s *observed) ClaimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	res, err := s.Store.ClaimTasks(ctx, p)
	return touchIf(s, res, err, func(c []*store.ClaimedTask) bool { return len(c) > 0 })
}

func (s *observed) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	res, err := s.Store.FinishTasks(ctx, p)
	return touchIf(s, res, err, always)
}

func (s *observed) FireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
	res, err := s.Store.FireTimers(ctx, p)
	return touchIf(s, res, err, func(r *store.FireTimersResult) bool { return r.Fired > 0 || len(r.Settled) > 0 })
}

func (s *observed) RescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	res, err := s.Store.RescueTasks(ctx, p)
	return touchIf(s, res, err, func(r *store.RescueTasksResult) bool { return len(r.Rescued) > 0 || len(r.Settled) > 0 })
}

func (s *observed) ActOnRuns(ctx context.Context, p *store.ActOnRunsParams) ([]store.RunActionResult, error) {
	res, err := s.Store.ActOnRuns(ctx, p)
	return touchIf(s, res, err, always)
}

func (s *observed) SendEvents(ctx context.Context, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	res, err := s.Store.SendEvents(ctx, p)
	return touchIf(s, res, err, always)
}

func (s *observed) SendEventsTx(ctx context.Context, tx any, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	res, err := s.Store.SendEventsTx(ctx, tx, p)
	return touchIf(s, res, err, always)
}

func (s *observed) Signal(ctx context.Context, p *store.SignalParams) (*store.SignalResult, error) {
	res, err := s.Store.Signal(ctx, p)
	return touchIf(s, res, err, always)
}

func (s *observed) ApplyInbox(ctx context.Context, p *store.ApplyInboxParams) (*store.ApplyInboxResult, error) {
	res, err := s.Store.ApplyInbox(ctx, p)
	return touchIf(s, res, err, func(r *store.ApplyInboxResult) bool { return r.Applied > 0 })
}

func (s *observed) FireSchedules(ctx context.Context, p *store.FireSchedulesParams) (*store.FireSchedulesResult, error) {
	res, err := s.Store.FireSchedules(ctx, p)
	return touchIf(s, res, err, func(r *store.FireSchedulesResult) bool { return len(r.Fired) > 0 })
}

func (s *observed) PruneRuns(ctx context.Context, p *store.PruneRunsParams) (*store.PruneRunsResult, error) {
	res, err := s.Store.PruneRuns(ctx, p)
	return touchIf(s, res, err, always)
}
