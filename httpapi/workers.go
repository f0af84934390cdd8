package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/effectivelabs/durable"
)

// workerInfo is a worker of GET /api/v1/workers.
type workerInfo struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	LastSeen  time.Time `json:"last_seen"`
	Workflows []string  `json:"workflows"`
	// Versions lists the versions it serves, Accepts those whose runs it
	// moves to a version it serves, as "workflow@version". (A worker
	// older than versions lists none: it serves every version.)
	Versions    []string `json:"versions"`
	Accepts     []string `json:"accepts"`
	Concurrency int      `json:"concurrency"`
	InFlight    int      `json:"in_flight"`
	Leader      bool     `json:"leader"`
	Live        bool     `json:"live"`
	DeadAfter   string   `json:"dead_after"`
}

// unservedFlow is a version of a workflow with ready steps that no live
// worker serves.
type unservedFlow struct {
	Workflow string `json:"workflow"`
	// Version is the version the runs are pinned to ("" for runs started
	// before versions).
	Version string `json:"version"`
	Ready   int    `json:"ready"`
}

// workersJSON is the answer of GET /api/v1/workers.
type workersJSON struct {
	Workers  []workerInfo   `json:"workers"`
	Unserved []unservedFlow `json:"unserved"`
}

// listWorkers answers GET /api/v1/workers: the live workers (every one
// with all=true) and the workflows with ready steps that none of the live
// ones serves. The fleet is shown to every authenticated caller (workflow
// names are not tenant data: GET /api/v1/workflows shows them too); the
// ready counts behind "unserved" are the caller's tenant's only.
func (h *Handler) listWorkers(w http.ResponseWriter, r *http.Request, sc scope) error {
	q := r.URL.Query()
	all := false
	for name := range q {
		if name != "all" {
			return badRequest("invalid_filter", "unknown query parameter "+strconv.Quote(name))
		}
	}
	if v := q.Get("all"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("invalid_filter", "all: want true or false")
		}
		all = b
	}
	ws, err := h.e.Workers(r.Context())
	if err != nil {
		return err
	}
	st, err := sc.ops.Stats(r.Context(), durable.StatsOptions{})
	if err != nil {
		return err
	}
	out := workersJSON{Workers: []workerInfo{}, Unserved: []unservedFlow{}}
	for _, x := range ws {
		if !x.Live && !all {
			continue
		}
		wfs := x.Workflows
		if wfs == nil {
			wfs = []string{}
		}
		out.Workers = append(out.Workers, workerInfo{
			ID: x.ID, Host: x.Host, Version: x.Version, StartedAt: x.StartedAt.UTC(), LastSeen: x.LastSeen.UTC(),
			Workflows: wfs, Versions: versionNames(x.Versions), Accepts: versionNames(x.Accepts), Concurrency: x.Concurrency, InFlight: x.InFlight, Leader: x.Leader, Live: x.Live,
			DeadAfter: x.DeadAfter.String(),
		})
	}
	for _, u := range durable.UnservedQueues(ws, st) {
		out.Unserved = append(out.Unserved, unservedFlow{Workflow: u.Workflow, Version: u.Version, Ready: u.Ready})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// versionNames names versions as "workflow@version".
func versionNames(vs []durable.WorkflowVersion) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out
}

// unservedCheck returns a function reporting whether a run of a version of
// a workflow that has not settled is unserved (no live worker serves or
// accepts that version), or nil when the store keeps no registry of
// workers. It lists the workers once.
func (h *Handler) unservedCheck(ctx context.Context) (func(workflow, version string) bool, error) {
	ws, err := h.e.Workers(ctx)
	if errors.Is(err, durable.ErrWorkersUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return func(workflow, version string) bool {
		return !slices.ContainsFunc(ws, func(w durable.WorkerInfo) bool { return w.ServesVersion(workflow, version) })
	}, nil
}
