package durablejson

import (
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// WorkflowList is the document of GET /api/v1/workflows and "durable
// workflows --json": the workflows, each with its versions.
type WorkflowList struct {
	Workflows []Workflow `json:"workflows"`
}

// Workflow is a workflow that the engine registers, the store records
// runs of or a live worker serves, with its versions (GET
// /api/v1/workflows/{name}).
type Workflow struct {
	Name string `json:"name"`
	// Kind is "function" for a durable function (its one step is its
	// body, of kind "func"), else "workflow".
	Kind string `json:"kind"`
	// Version is the version whose DAG Steps draws: the one the engine
	// starts (the newest it registers), else the newest known.
	Version string `json:"version"`
	// Registered is set when the engine registers the workflow: it can
	// start it by name.
	Registered bool           `json:"registered"`
	Steps      []WorkflowStep `json:"steps"`
	OnFailure  bool           `json:"on_failure"`
	ChildOnly  bool           `json:"child_only,omitempty"`
	// Unserved is set when one of its versions is.
	Unserved bool `json:"unserved,omitempty"`
	// Versions are its versions, newest first.
	Versions []WorkflowVersion `json:"versions"`
}

// WorkflowVersion is one version of a workflow (durable.VersionInfo).
type WorkflowVersion struct {
	// Workflow is the workflow's name, as the Workflow holding it has it.
	Workflow string `json:"workflow"`
	Version  string `json:"version"`
	// Newest is set on the version the engine starts by name.
	Newest bool `json:"newest"`
	// Registered is set when the engine registers the version.
	Registered bool `json:"registered"`
	// Accepts are the older versions whose runs it accepts, when
	// registered; never null.
	Accepts []string `json:"accepts"`
	// LegacyOf, when set, is the version registered here whose legacy
	// version (the fingerprint releases before fingerprint 2 gave it)
	// this is: its runs are served as runs of that version.
	LegacyOf string `json:"legacy_of,omitempty"`
	// Input is the Go type of its input; empty when its DAG is unknown.
	Input string `json:"input"`
	// Steps is the version's DAG, as registered or as its runs recorded
	// it; null when neither is known (a version that only a live worker
	// lists).
	Steps     []WorkflowStep `json:"steps"`
	OnFailure bool           `json:"on_failure"`
	// InFlight counts its runs not settled, Ready their steps waiting for
	// a worker.
	InFlight   int      `json:"in_flight"`
	Ready      int      `json:"ready"`
	Workers    []string `json:"workers"`
	AcceptedBy []string `json:"accepted_by"`
	// Unserved is set when runs of the version are in flight and no live
	// worker serves or accepts it: they wait.
	Unserved bool `json:"unserved"`
	// RecordedAt is when a run first recorded the version; null when none
	// did (or they were pruned).
	RecordedAt *time.Time `json:"recorded_at"`
}

// WorkflowStep is one step of a workflow's DAG (durable.StepInfo).
type WorkflowStep struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Parents []string `json:"parents"`
	// Output is the Go type of its output.
	Output string `json:"output"`
	// Sleep is how long a sleep step sleeps, as a Go duration ("1h0m0s");
	// SleepSeconds is the same in seconds.
	Sleep        string  `json:"sleep,omitempty"`
	SleepSeconds float64 `json:"sleep_s,omitempty"`
	Signal       string  `json:"signal,omitempty"`
	Child        string  `json:"child,omitempty"`
	MapOver      string  `json:"map_over,omitempty"`
	// Retired is set on a step kept only for the record of runs that
	// moved to a version that does not run it; absent unless set.
	Retired bool `json:"retired,omitempty"`
}

// NewWorkflowList builds the document of the workflows named name (every
// one when empty) that the engine registers (registered: Engine.Workflows)
// or that vs (Engine.Versions, newest first) lists: the registered ones
// first, in the engine's order, then the others by name.
func NewWorkflowList(registered []durable.WorkflowInfo, vs []durable.VersionInfo, name string) *WorkflowList {
	out := &WorkflowList{Workflows: []Workflow{}}
	at := map[string]int{}
	for _, wf := range registered {
		if name == "" || wf.Name == name {
			at[wf.Name] = len(out.Workflows)
			out.Workflows = append(out.Workflows, Workflow{Name: wf.Name, Version: wf.Version, Registered: true,
				Steps: newWorkflowSteps(wf.Steps), OnFailure: wf.OnFailure, ChildOnly: wf.ChildOnly})
		}
	}
	for i := range vs {
		v := &vs[i]
		k, ok := at[v.Workflow]
		if !ok {
			k = len(out.Workflows)
			at[v.Workflow] = k
			out.Workflows = append(out.Workflows, Workflow{Name: v.Workflow})
		}
		w := &out.Workflows[k]
		w.Versions = append(w.Versions, NewWorkflowVersion(v))
		w.Unserved = w.Unserved || v.Unserved()
		if !w.Registered && w.Steps == nil && v.Steps != nil {
			// Not registered: the newest version whose DAG is known.
			w.Version, w.Steps, w.OnFailure = v.Version, newWorkflowSteps(v.Steps), v.OnFailure
		}
	}
	for i := range out.Workflows {
		w := &out.Workflows[i]
		if w.Steps == nil {
			w.Steps = []WorkflowStep{}
		}
		if w.Versions == nil {
			w.Versions = []WorkflowVersion{}
		}
		w.Kind = StepsKind(w.Steps)
		if w.Version == "" && len(w.Versions) > 0 {
			w.Version = w.Versions[0].Version
		}
	}
	return out
}

// NewWorkflowVersion builds the document of one version of a workflow.
func NewWorkflowVersion(v *durable.VersionInfo) WorkflowVersion {
	return WorkflowVersion{
		Workflow: v.Workflow, Version: v.Version, Newest: v.Newest, Registered: v.Registered, Accepts: nonNil(v.Accepts),
		LegacyOf: v.LegacyOf, Input: v.Input, Steps: newWorkflowSteps(v.Steps), OnFailure: v.OnFailure, InFlight: v.InFlight, Ready: v.Ready,
		Workers: nonNil(v.Workers), AcceptedBy: nonNil(v.AcceptedBy), Unserved: v.Unserved(), RecordedAt: Time(v.RecordedAt),
	}
}

// newWorkflowSteps builds the documents of a DAG's steps: nil for an
// unknown DAG.
func newWorkflowSteps(steps []durable.StepInfo) []WorkflowStep {
	if steps == nil {
		return nil
	}
	out := make([]WorkflowStep, len(steps))
	for i, s := range steps {
		out[i] = WorkflowStep{Name: s.Name, Kind: string(s.Kind), Parents: nonNil(s.Parents), Output: s.Output,
			Signal: s.Signal, Child: s.Child, MapOver: s.MapOver, Retired: s.Retired}
		if s.Sleep > 0 {
			out[i].Sleep, out[i].SleepSeconds = s.Sleep.String(), s.Sleep.Seconds()
		}
	}
	return out
}

// StepsKind returns the kind of the workflow whose DAG is steps:
// "function" for a durable function's (one step, its body), else
// "workflow".
func StepsKind(steps []WorkflowStep) string {
	if len(steps) == 1 && steps[0].Kind == string(durabletype.KindFunc) {
		return KindFunction
	}
	return KindWorkflow
}

// nonNil returns s, or an empty list for nil (a JSON list, never null).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
