package durable_test

import (
	"context"
	"sync"

	"github.com/effectivelabs/durable/store"
)

// hookStore wraps a store so that a test can step into its calls: each hook,
// when set, replaces the call (and may call the inner store itself). It
// passes on the optional interfaces the engine looks for (Listener,
// Elector, TxCreator, Checker, Clocked) as the inner store has them.
type hookStore struct {
	store.Store

	mu        sync.Mutex
	finish    func(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error)
	heartbeat func(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error)
	onCreate  func(p *store.CreateRunsParams)
}

func (s *hookStore) hooks() (
	func(context.Context, *store.FinishTasksParams) ([]store.FinishResult, error),
	func(context.Context, *store.HeartbeatParams) (*store.HeartbeatResult, error),
	func(*store.CreateRunsParams),
) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finish, s.heartbeat, s.onCreate
}

// setFinish sets (nil: clears) the FinishTasks hook.
func (s *hookStore) setFinish(f func(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finish = f
}

// setHeartbeat sets (nil: clears) the Heartbeat hook.
func (s *hookStore) setHeartbeat(f func(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heartbeat = f
}

// setOnCreate sets (nil: clears) a function told of every creation of runs
// (CreateRuns and CreateRunsTx) before it happens.
func (s *hookStore) setOnCreate(f func(p *store.CreateRunsParams)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCreate = f
}

func (s *hookStore) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	if f, _, _ := s.hooks(); f != nil {
		return f(ctx, p)
	}
	return s.Store.FinishTasks(ctx, p)
}

func (s *hookStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	if _, f, _ := s.hooks(); f != nil {
		return f(ctx, p)
	}
	return s.Store.Heartbeat(ctx, p)
}

func (s *hookStore) CreateRuns(ctx context.Context, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	if _, _, f := s.hooks(); f != nil {
		f(p)
	}
	return s.Store.CreateRuns(ctx, p)
}

func (s *hookStore) CreateRunsTx(ctx context.Context, tx any, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	if _, _, f := s.hooks(); f != nil {
		f(p)
	}
	return s.Store.(store.TxCreator).CreateRunsTx(ctx, tx, p)
}

func (s *hookStore) Listen(ctx context.Context, deliver func(store.Notification)) error {
	return s.Store.(store.Listener).Listen(ctx, deliver)
}

func (s *hookStore) Lead(ctx context.Context, id string, lead func(ctx context.Context)) error {
	return s.Store.(store.Elector).Lead(ctx, id, lead)
}

func (s *hookStore) Check(ctx context.Context) error {
	if c, ok := s.Store.(store.Checker); ok {
		return c.Check(ctx)
	}
	return nil
}

func (s *hookStore) KeepsTime() bool {
	c, ok := s.Store.(store.Clocked)
	return ok && c.KeepsTime()
}
