package store

import (
	"context"
	"time"
)

// WorkerRegistry is implemented by stores that keep a record of each
// engine working on them (a worker), so that operators can see which
// workers are live and what they serve. Both stores of the module
// implement it; an engine on a store without it registers nothing and
// Engine.Workers fails.
//
// An engine registers at Start, refreshes its record every
// dag.WorkerRefresh(DeadAfter) (and at once when its leadership changes),
// and removes it at a graceful Stop. A record is live while it was seen
// within its DeadAfter (dag.WorkerLive), the window after which the
// worker's running steps are rescued. Records of workers that died keep
// being listed, not live, until the leader prunes them
// (dag.WorkerPruneAfter).
type WorkerRegistry interface {
	// RegisterWorker creates or replaces the record of p.Worker.ID, with
	// LastSeen set to Now. StartedAt is set to Now when the record is
	// created or p.Started is set, and kept otherwise. It fails with
	// ErrInvalidWorker for an invalid ID (dag.ValidWorker), a negative
	// count or a DeadAfter that is not positive.
	RegisterWorker(ctx context.Context, p *RegisterWorkerParams) error

	// RemoveWorker deletes a worker's record; an unknown ID is not an
	// error.
	RemoveWorker(ctx context.Context, p *RemoveWorkerParams) error

	// ListWorkers returns every worker's record, ordered by ID, with Live
	// set by dag.WorkerLive at Now (on the store's clock when Now is
	// zero). A store that is also an Elector sets Leader on the record of
	// the worker that leads now (holds the leadership Lead hands out, as
	// of the call) and on no other, whatever the records say: a leader
	// that died without a word is not listed beside the next one. A store
	// without an Elector lists Leader as registered.
	ListWorkers(ctx context.Context, p *ListWorkersParams) (*ListWorkersResult, error)

	// PruneWorkers deletes the records that dag.WorkerPrunable says may
	// go at Now and reports how many it deleted.
	PruneWorkers(ctx context.Context, p *PruneWorkersParams) (*PruneWorkersResult, error)
}

// LeaderRefresher is implemented by stores whose Elector refreshes the
// leader's worker record (its LastSeen) while it leads, on a statement it
// makes anyway (pgstore: the health check of the leader's connection,
// every 5s). An engine that leads on such a store, and would refresh its
// record less often than the store does, refreshes it only when the
// record changes (its steps in flight), so that leading costs the
// database nothing more than before the registry.
type LeaderRefresher interface {
	// LeaderRefresh reports how often the store refreshes the leader's
	// record; 0 if it does not.
	LeaderRefresh() time.Duration
}

// Worker is the record of one engine working on a store.
type Worker struct {
	// ID is the engine's Config.WorkerID.
	ID string
	// Host is the host name of the engine's machine.
	Host string
	// Version labels the engine's code (Config.Version).
	Version string
	// Workflows lists what the engine serves, sorted: each workflow
	// version it registered as dag.Queue(workflow, version). An entry
	// without a version (a bare name, recorded by an engine older than
	// versions) serves every version of the workflow.
	Workflows []string
	// Accepts lists, the same way, the versions whose runs the engine
	// moves to a version it serves (durable's Workflow.Accepts), sorted.
	Accepts []string
	// Concurrency is the most steps the engine runs at once.
	Concurrency int
	// InFlight counts the steps the engine ran when it last refreshed its
	// record.
	InFlight int
	// Leader is set while the engine leads. Registered, it is what the
	// engine last reported; listed by a store that is an Elector, it says
	// whether the worker holds the leadership now (see ListWorkers).
	Leader bool
	// DeadAfter is the engine's liveness window (Config.DeadAfter).
	DeadAfter time.Duration
	// StartedAt is when the engine registered at its start; LastSeen when
	// it last refreshed its record. Both are on the store's clock.
	StartedAt time.Time
	LastSeen  time.Time
	// Live is set by ListWorkers (dag.WorkerLive).
	Live bool
}

// RegisterWorkerParams are the parameters of WorkerRegistry.RegisterWorker.
type RegisterWorkerParams struct {
	Now time.Time
	// Worker is the record; its StartedAt, LastSeen and Live are ignored.
	Worker Worker
	// Started marks the registration of an engine's start: StartedAt is
	// set to Now even if a record of the ID exists (a process restarted
	// under the same ID).
	Started bool
}

// RemoveWorkerParams are the parameters of WorkerRegistry.RemoveWorker.
type RemoveWorkerParams struct {
	ID string
}

// ListWorkersParams are the parameters of WorkerRegistry.ListWorkers.
type ListWorkersParams struct {
	Now time.Time
}

// ListWorkersResult is the result of WorkerRegistry.ListWorkers.
type ListWorkersResult struct {
	// Workers are the records, ordered by ID.
	Workers []Worker
	// Now is the time Live was judged at, on the store's clock.
	Now time.Time
}

// PruneWorkersParams are the parameters of WorkerRegistry.PruneWorkers.
type PruneWorkersParams struct {
	Now time.Time
}

// PruneWorkersResult is the result of WorkerRegistry.PruneWorkers.
type PruneWorkersResult struct {
	Deleted int
}
