package durable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/service/registrar"
	"github.com/effectivelabs/durable/store"
)

// WorkerInfo describes a worker: an engine that was started on the store
// (Engine.Start) and has not stopped gracefully since.
type WorkerInfo struct {
	// ID is the engine's Config.WorkerID.
	ID string
	// Host is the host name of the engine's machine.
	Host string
	// Version labels the engine's code (Config.Version).
	Version string
	// StartedAt is when the engine started; LastSeen when it last
	// refreshed its record. Both are on the store's clock.
	StartedAt time.Time
	LastSeen  time.Time
	// Workflows lists the workflows the engine serves (registered), sorted.
	Workflows []string
	// Versions lists the versions of those workflows it serves, sorted by
	// workflow, then version. (A worker older than versions lists none: it
	// serves every version of its workflows.)
	Versions []WorkflowVersion
	// Accepts lists the versions whose runs it moves to a version it
	// serves (Workflow.Accepts), sorted.
	Accepts []WorkflowVersion
	// Concurrency is the most steps the engine runs at once.
	Concurrency int
	// InFlight counts the steps the engine ran when it last refreshed its
	// record (at most dag.MaxWorkerRefresh, 15s, ago while it is live).
	InFlight int
	// Leader is set when the engine is live and holds the leadership now
	// (fires timers, rescues dead workers' steps), as the store's election
	// says, not as the engine last reported: a leader killed without a
	// word is not listed beside the next one (on PostgreSQL, the worker
	// holding the leader's lease, until it expires). At most one worker is
	// listed as the leader; for a moment around a change of leader, none
	// may be.
	Leader bool
	// Live is set while the engine was seen within its DeadAfter: after
	// that its running steps are rescued, and it is shown as dead until
	// it comes back or its record is pruned, a day later.
	Live bool
	// DeadAfter is the engine's Config.DeadAfter, its liveness window.
	DeadAfter time.Duration
}

// Serves reports whether the worker is live and serves workflow, at any
// version.
func (w *WorkerInfo) Serves(workflow string) bool {
	return w.Live && dag.Serves(w.Workflows, workflow)
}

// ServesVersion reports whether the worker is live and serves the runs of
// workflow pinned to version: it registered that version (a worker older
// than versions serves every version), or accepts it and moves them to one
// it serves.
func (w *WorkerInfo) ServesVersion(workflow, version string) bool {
	if !w.Live || !dag.Serves(w.Workflows, workflow) {
		return false
	}
	if len(w.Versions) == 0 {
		return true
	}
	return slices.Contains(w.Versions, WorkflowVersion{workflow, version}) || slices.Contains(w.Accepts, WorkflowVersion{workflow, version}) ||
		(version == "" && slices.ContainsFunc(w.Versions, func(v WorkflowVersion) bool { return v.Workflow == workflow }))
}

// WorkflowVersion names one version of a workflow.
type WorkflowVersion struct {
	Workflow string
	Version  string
}

// String returns "workflow@version", as worker records and the CLI name
// a version.
func (v WorkflowVersion) String() string { return dag.Queue(v.Workflow, v.Version) }

// versionsOf splits a worker record's queue names into its workflows and
// their versions.
func versionsOf(queues []string) (workflows []string, versions []WorkflowVersion) {
	for _, q := range queues {
		w, v, bare := dag.SplitQueue(q)
		workflows = append(workflows, w)
		if !bare && v != "" {
			versions = append(versions, WorkflowVersion{w, v})
		}
	}
	slices.Sort(workflows)
	return slices.Compact(workflows), versions
}

// ErrWorkersUnsupported is returned by Engine.Workers and Engine.Unserved
// on a store that keeps no registry of workers (it does not implement
// store.WorkerRegistry).
var ErrWorkersUnsupported = errors.New("durable: store does not keep a registry of workers")

func (e *Engine) registry() (store.WorkerRegistry, error) {
	r, ok := e.store.(store.WorkerRegistry)
	if !ok {
		return nil, ErrWorkersUnsupported
	}
	return r, nil
}

// Workers lists the workers of the store, live or not (dead workers are
// kept for a day, unless they stopped gracefully), ordered by ID.
// Liveness is judged on the store's clock.
func (e *Engine) Workers(ctx context.Context) ([]WorkerInfo, error) {
	r, err := e.registry()
	if err != nil {
		return nil, err
	}
	res, err := r.ListWorkers(ctx, &store.ListWorkersParams{Now: e.now()})
	if err != nil {
		return nil, fmt.Errorf("durable: list workers: %w", err)
	}
	out := make([]WorkerInfo, len(res.Workers))
	for i, w := range res.Workers {
		out[i] = WorkerInfo{
			ID: w.ID, Host: w.Host, Version: w.Version, StartedAt: w.StartedAt, LastSeen: w.LastSeen,
			Concurrency: w.Concurrency, InFlight: w.InFlight,
			Leader: w.Leader && w.Live, Live: w.Live, DeadAfter: w.DeadAfter,
		}
		out[i].Workflows, out[i].Versions = versionsOf(w.Workflows)
		_, out[i].Accepts = versionsOf(w.Accepts)
	}
	return out, nil
}

// Unserved returns those of workflows that no live worker serves, in the
// order given and without repeats: their queued steps wait until a worker
// that serves them starts. It lists the workers once (Workers).
func (e *Engine) Unserved(ctx context.Context, workflows ...string) ([]string, error) {
	ws, err := e.Workers(ctx)
	if err != nil {
		return nil, err
	}
	return Unserved(ws, workflows...), nil
}

// Unserved returns those of workflows that none of workers serves
// (WorkerInfo.Serves), in the order given and without repeats.
func Unserved(workers []WorkerInfo, workflows ...string) []string {
	var out []string
	for _, wf := range workflows {
		if slices.Contains(out, wf) {
			continue
		}
		if !slices.ContainsFunc(workers, func(w WorkerInfo) bool { return w.Serves(wf) }) {
			out = append(out, wf)
		}
	}
	return out
}

// UnservedWorkflow is a version of a workflow with ready steps that no
// live worker serves: its runs wait until a worker that serves (or
// accepts) that version starts, or until they are moved to another
// version (Engine.UpgradeRuns).
type UnservedWorkflow struct {
	// Workflow is the workflow's name.
	Workflow string
	// Version is the version its runs are pinned to ("" for runs started
	// before versions).
	Version string
	// Ready counts its ready steps, over the tenants st covered.
	Ready int
}

// UnservedQueues returns the versions of workflows with ready steps in
// st (Engine.Stats) that none of workers serves (WorkerInfo.ServesVersion),
// with their ready steps summed over tenants, sorted by workflow and
// version.
func UnservedQueues(workers []WorkerInfo, st *durabletype.Stats) []UnservedWorkflow {
	ready := map[WorkflowVersion]int{}
	var queues []WorkflowVersion
	for _, q := range st.Queues {
		if q.Ready <= 0 {
			continue
		}
		k := WorkflowVersion{q.Workflow, q.Version}
		if _, ok := ready[k]; !ok {
			queues = append(queues, k)
		}
		ready[k] += q.Ready
	}
	slices.SortFunc(queues, func(a, b WorkflowVersion) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.Version, b.Version))
	})
	var out []UnservedWorkflow
	for _, k := range queues {
		if !slices.ContainsFunc(workers, func(w WorkerInfo) bool { return w.ServesVersion(k.Workflow, k.Version) }) {
			out = append(out, UnservedWorkflow{Workflow: k.Workflow, Version: k.Version, Ready: ready[k]})
		}
	}
	return out
}

// workerRecord is this engine's record as of now.
func (e *Engine) workerRecord(rt *runtime) store.Worker {
	e.mu.Lock()
	sv := e.reg.record()
	e.mu.Unlock()
	return e.recordOf(rt, sv)
}

// recordOf is this engine's record as of now, serving sv.
func (e *Engine) recordOf(rt *runtime, sv served) store.Worker {
	inFlight := rt.steps.Len()
	return store.Worker{
		ID: e.cfg.WorkerID, Host: rt.host, Version: e.cfg.Version, Workflows: sv.workflows, Accepts: sv.accepts,
		Concurrency: e.cfg.Concurrency, InFlight: inFlight, Leader: rt.leading(), DeadAfter: e.cfg.DeadAfter,
	}
}

// newRegistrar returns the registrar of rt: on a store that keeps a
// registry of workers, it keeps this engine's record there, refreshed
// every dag.WorkerRefresh(DeadAfter); on another, it does nothing.
func (e *Engine) newRegistrar(rt *runtime) *registrar.Registrar {
	cfg := registrar.Config{
		WorkerID: e.cfg.WorkerID, Interval: dag.WorkerRefresh(e.cfg.DeadAfter), Now: e.now, Logger: e.log,
		Record: func() store.Worker { return e.workerRecord(rt) },
	}
	if r, err := e.registry(); err == nil {
		cfg.Registry = r
		if lr, ok := e.store.(store.LeaderRefresher); ok {
			cfg.LeaderRefresh = lr.LeaderRefresh()
		}
	}
	return registrar.New(cfg)
}

// hostname is the host name recorded with this engine's worker record.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// buildVersion is the default Config.Version: the main module's version as
// the Go toolchain recorded it, or, for a build without one, the first 12
// digits of its VCS revision.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := bi.Main.Version
	if v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value[:min(len(s.Value), 12)]
		}
	}
	return v
}
