package durablejson

import (
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// RunList is the document of GET /api/v1/runs and "durable runs list
// --json": a page of runs, newest first.
type RunList struct {
	Runs []Run `json:"runs"`
	// Next continues the listing ("" on the last page); NextCursor is the
	// same, absent on the last page. (The CLI's cursor is its own: it
	// keeps the times a listing's relative filters meant.)
	Next       string `json:"next"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Run is a run in a listing (durabletype.RunSummary).
type Run struct {
	ID       uuid.UUID `json:"id"`
	Workflow string    `json:"workflow"`
	// Version is the version of the workflow the run is pinned to; empty
	// for a run started before versions.
	Version string                `json:"version"`
	Tenant  string                `json:"tenant"`
	Status  durabletype.RunStatus `json:"status"`
	// FailedStep and Error say why the run failed or was cancelled.
	FailedStep string     `json:"failed_step"`
	Error      string     `json:"error"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// ParentID and ParentStep link a child run to its parent run and the
	// step that started it; absent for other runs.
	ParentID   *uuid.UUID `json:"parent_id,omitempty"`
	ParentStep string     `json:"parent_step,omitempty"`
	// Unserved is set for a run in flight whose version of its workflow
	// no live worker serves (or accepts).
	Unserved bool `json:"unserved,omitempty"`
	// Waits are what the steps of a run in flight wait for (the API's
	// include=waits); absent for a run that waits for nothing.
	Waits []RunWait `json:"waits,omitempty"`
	// HasChildren is set for a run that started child runs (the API's
	// include=children).
	HasChildren bool `json:"has_children,omitempty"`
}

// RunWait is what one step of a run in flight waits for.
type RunWait struct {
	Step string `json:"step"`
	// For is "event", "signal", "child", "items", "sleep", "retry" (a
	// retry's backoff) or "start" (a delayed start).
	For        string     `json:"for"`
	EventKey   string     `json:"event_key,omitempty"`
	Signal     string     `json:"signal,omitempty"`
	ChildRunID *uuid.UUID `json:"child_run_id,omitempty"`
	// DueAt is when a sleep wakes, a backoff or a delayed start ends, or
	// a wait times out.
	DueAt *time.Time `json:"due_at,omitempty"`
	// Attempts is the step's latest attempt (a retry's backoff follows it).
	Attempts int `json:"attempts,omitempty"`
	// Items and ItemsLeft count a map step's items and those not finished.
	Items     int `json:"items,omitempty"`
	ItemsLeft int `json:"items_left,omitempty"`
}

// NewRunList builds the document of a page of runs with the cursor of
// the next page. unserved, when not nil, says whether no live worker
// serves a version of a workflow (Unserved); it is asked of runs in
// flight only.
func NewRunList(runs []durabletype.RunSummary, next string, unserved func(workflow, version string) bool) *RunList {
	out := &RunList{Runs: make([]Run, len(runs)), Next: next, NextCursor: next}
	for i, r := range runs {
		out.Runs[i] = NewRun(r)
		out.Runs[i].Unserved = unserved != nil && r.Status.InFlight() && unserved(r.Workflow, r.Version)
	}
	return out
}

// NewRun builds the listing of one run.
func NewRun(r durabletype.RunSummary) Run {
	out := Run{
		ID: r.ID, Workflow: r.Workflow, Version: r.Version, Tenant: r.Tenant, Status: r.Status, FailedStep: r.FailedStep,
		Error: r.Error, CreatedAt: r.CreatedAt.UTC(), FinishedAt: Time(r.FinishedAt),
	}
	if r.ParentID != uuid.Nil {
		id := r.ParentID
		out.ParentID, out.ParentStep = &id, dag.DisplayName(r.ParentStep)
	}
	return out
}

// InFlight reports whether any of runs is in flight: only those can be
// unserved, so a page of settled runs needs no look at the workers.
func InFlight(runs []durabletype.RunSummary) bool {
	return slices.ContainsFunc(runs, func(r durabletype.RunSummary) bool { return r.Status.InFlight() })
}

// Unserved returns the check of NewRunList for the workers ws
// (Engine.Workers): true when none of them serves or accepts the version.
func Unserved(ws []durable.WorkerInfo) func(workflow, version string) bool {
	return func(workflow, version string) bool {
		return !slices.ContainsFunc(ws, func(w durable.WorkerInfo) bool { return w.ServesVersion(workflow, version) })
	}
}
