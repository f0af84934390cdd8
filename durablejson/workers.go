package durablejson

import (
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// Workers is the document of GET /api/v1/workers and "durable workers
// --json": the workers, and the workflow versions with ready steps that no
// live worker serves or accepts.
type Workers struct {
	// At is when the workers were read: ages are taken at it.
	At       time.Time      `json:"at"`
	Workers  []Worker       `json:"workers"`
	Unserved []UnservedFlow `json:"unserved"`
}

// Worker is one worker (durable.WorkerInfo).
type Worker struct {
	ID string `json:"id"`
	// Host is the host name of its machine; Version labels its code
	// (Config.Version).
	Host      string    `json:"host"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	LastSeen  time.Time `json:"last_seen"`
	// LastSeenAge is how long before At it was last seen, in seconds.
	LastSeenAge float64  `json:"last_seen_age_s"`
	Workflows   []string `json:"workflows"`
	// Versions lists the versions it serves, Accepts those whose runs it
	// moves to a version it serves, as "workflow@version". (A worker
	// older than versions lists none: it serves every version.)
	Versions    []string `json:"versions"`
	Accepts     []string `json:"accepts"`
	Concurrency int      `json:"concurrency"`
	InFlight    int      `json:"in_flight"`
	Leader      bool     `json:"leader"`
	Live        bool     `json:"live"`
	// DeadAfter is how long after it was last seen it counts as dead, as
	// a Go duration ("30s"); DeadAfterSeconds is the same in seconds.
	DeadAfter        string  `json:"dead_after"`
	DeadAfterSeconds float64 `json:"dead_after_s"`
}

// UnservedFlow is a version of a workflow with ready steps that no live
// worker serves or accepts.
type UnservedFlow struct {
	Workflow string `json:"workflow"`
	// Version is the version the runs are pinned to ("" for runs started
	// before versions).
	Version string `json:"version"`
	Ready   int    `json:"ready"`
}

// NewWorkers builds the document of the workers ws (the live ones only
// unless all) read at now, with st (Engine.Stats) for the unserved
// versions.
func NewWorkers(ws []durable.WorkerInfo, st *durabletype.Stats, now time.Time, all bool) *Workers {
	out := &Workers{At: now.UTC(), Workers: []Worker{}, Unserved: []UnservedFlow{}}
	for _, w := range ws {
		if !w.Live && !all {
			continue
		}
		wfs := w.Workflows
		if wfs == nil {
			wfs = []string{}
		}
		out.Workers = append(out.Workers, Worker{
			ID: w.ID, Host: w.Host, Version: w.Version, StartedAt: w.StartedAt.UTC(), LastSeen: w.LastSeen.UTC(),
			LastSeenAge: max(now.Sub(w.LastSeen), 0).Seconds(), Workflows: wfs,
			Versions: VersionNames(w.Versions), Accepts: VersionNames(w.Accepts), Concurrency: w.Concurrency,
			InFlight: w.InFlight, Leader: w.Leader, Live: w.Live,
			DeadAfter: w.DeadAfter.String(), DeadAfterSeconds: w.DeadAfter.Seconds(),
		})
	}
	for _, u := range durable.UnservedQueues(ws, st) {
		out.Unserved = append(out.Unserved, UnservedFlow{Workflow: u.Workflow, Version: u.Version, Ready: u.Ready})
	}
	return out
}

// VersionNames names versions as "workflow@version", never null.
func VersionNames(vs []durable.WorkflowVersion) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out
}
