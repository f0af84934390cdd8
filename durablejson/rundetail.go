package durablejson

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// RunDetail is the document of GET /api/v1/runs/{id} (and of the answers
// to cancel and replay) and of "durable runs show --json": a run with its
// steps, its parent and its child runs.
type RunDetail struct {
	ID       uuid.UUID `json:"id"`
	Workflow string    `json:"workflow"`
	// Kind is "function" for a run of a durable function, else
	// "workflow".
	Kind string `json:"kind"`
	// Version is the version of the workflow the run is pinned to; empty
	// for a run started before versions.
	Version string                `json:"version"`
	Tenant  string                `json:"tenant"`
	Status  durabletype.RunStatus `json:"status"`
	// Error says why the run failed or was cancelled (null otherwise);
	// FailedStep is its step, by the name "runs list" uses.
	Error      *RunError `json:"error"`
	FailedStep string    `json:"failed_step"`
	// Input is the run's input when it is JSON; InputBase64 is it in
	// base64 when it is not; InputOmitted is its size in bytes when it was
	// left out for its size.
	Input        json.RawMessage `json:"input,omitempty"`
	InputBase64  string          `json:"input_base64,omitempty"`
	InputOmitted int             `json:"input_omitted,omitempty"`
	CreatedAt    time.Time       `json:"created_at"`
	FinishedAt   *time.Time      `json:"finished_at"`
	// IdempotencyKey is the key the run was started with, if any.
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	Priority       int        `json:"priority"`
	Deadline       *time.Time `json:"deadline"`
	// Parent links a child run to its parent run (null for other runs);
	// ParentID and ParentStep are its run and step by the names "runs
	// list" uses.
	Parent     *Parent    `json:"parent"`
	ParentID   *uuid.UUID `json:"parent_id,omitempty"`
	ParentStep string     `json:"parent_step,omitempty"`
	// Children are the run's child runs (up to MaxChildren), in the order
	// of the steps that started them, then oldest first; MoreChildren is
	// set when there are more.
	Children     []Run `json:"children"`
	MoreChildren bool  `json:"more_children,omitempty"`
	// Unserved is set for a run not settled whose version of its
	// workflow no live worker serves (or accepts): its queued steps wait
	// for a worker that serves it, or for the run to move to another
	// version; UpgradeTo then names a version it could move to, if any.
	Unserved  bool   `json:"unserved,omitempty"`
	UpgradeTo string `json:"upgrade_to,omitempty"`
	// Steps are the run's steps: of a function's run, its body ("main",
	// of kind "func") and its on-failure handler, if any.
	Steps []Step `json:"steps"`
	// Calls are the calls of a function's run, by number (absent for
	// other runs).
	Calls []Call `json:"calls,omitzero"`
	// Events is the run's event log, when asked for ("runs show
	// --events", GET /api/v1/runs/{id}?include=events); absent when
	// empty.
	Events []Event `json:"events,omitempty"`
}

// RunError is why a run failed or was cancelled (durable.RunError).
type RunError struct {
	// Step is the step that failed, empty for a run cancelled as a whole.
	Step    string `json:"step,omitempty"`
	Message string `json:"message"`
}

// Parent links a child run to its parent: the run, its step that started
// the child, and the child's step whose output is the result.
type Parent struct {
	RunID  uuid.UUID `json:"run_id"`
	Step   string    `json:"step"`
	Result string    `json:"result"`
}

// Step is one step of a run, or one item of a map step.
type Step struct {
	Name    string                `json:"name"`
	Kind    durabletype.TaskKind  `json:"kind"`
	Parents []string              `json:"parents"`
	State   durabletype.TaskState `json:"state"`
	// Retired is set on a step kept only for the run's record: the run
	// moved to a version that does not run it; absent unless set.
	Retired  bool   `json:"retired,omitempty"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error"`
	// DueAt is when a sleep wakes, a backoff or a delayed start ends, or
	// a wait times out; null for a step that does not wait.
	DueAt      *time.Time `json:"due_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Output, OutputBase64 and OutputOmitted are the step's output as
	// RunDetail.Input is the run's input. A completed map step's output is
	// the list its children receive: its items' outputs in item order, a
	// JSON array (when every item's output is JSON).
	Output        json.RawMessage `json:"output,omitempty"`
	OutputBase64  string          `json:"output_base64,omitempty"`
	OutputOmitted int             `json:"output_omitted,omitempty"`
	// EventKey and Signal are what an event step waits (or waited) for,
	// ChildRunID the child run a child step started last.
	EventKey   string     `json:"event_key,omitempty"`
	Signal     string     `json:"signal,omitempty"`
	ChildRunID *uuid.UUID `json:"child_run_id,omitempty"`
	// Item is an item's number, absent for a step.
	Item *int `json:"item,omitempty"`
	// ItemCounts and Items are a map step's items: how many are in each
	// state, and every one (both present, maybe empty, for map steps only).
	ItemCounts map[durabletype.TaskState]int `json:"item_counts,omitzero"`
	Items      []Step                        `json:"items,omitzero"`
}

// Event is one entry of a run's event log (durabletype.Event).
type Event struct {
	ID      int64                 `json:"id"`
	At      time.Time             `json:"at"`
	Step    string                `json:"step"`
	Type    durabletype.EventType `json:"type"`
	Attempt int                   `json:"attempt"`
	// Detail is the error of a FAILED, RETRYING or LOST event, or the
	// reason of a SKIPPED, CANCELLED or QUEUED one.
	Detail string `json:"detail"`
	// DueAt is when a SLEEPING event wakes or a RETRYING one tries again.
	DueAt *time.Time `json:"due_at"`
}

// EventLog is the document of GET /api/v1/runs/{id}/events: a run's event
// log, as "durable runs show --events --json" prints it under "events".
type EventLog struct {
	Events []Event `json:"events"`
}

// MaxChildren is the most child runs a RunDetail lists.
const MaxChildren = 1000

// RunData is what a RunDetail is built from.
type RunData struct {
	Run *durable.RunResult
	// Children are the run's child runs (ChildRuns); MoreChildren is set
	// when there are more.
	Children     []durabletype.RunSummary
	MoreChildren bool
	// Unserved and UpgradeTo are as RunDetail has them (ReadUnserved).
	Unserved  bool
	UpgradeTo string
	// Events is the run's event log, nil when not asked for.
	Events []durabletype.Event
}

// RunReader reads runs: *durable.Engine for every tenant,
// *durable.TenantRuns for one.
type RunReader interface {
	Get(ctx context.Context, id uuid.UUID) (*durable.RunResult, error)
	ListRuns(ctx context.Context, opts durable.ListOptions) (*durable.RunPage, error)
}

// Fleet is what says which versions live workers serve: the engine.
type Fleet interface {
	Workers(ctx context.Context) ([]durable.WorkerInfo, error)
	Versions(ctx context.Context, workflow string) ([]durable.VersionInfo, error)
}

// ReadRun reads what the RunDetail of run res (as runs.Get read it)
// shows besides: its child runs and, for a run not settled, whether it is
// unserved.
func ReadRun(ctx context.Context, runs RunReader, fleet Fleet, res *durable.RunResult) (*RunData, error) {
	d := &RunData{Run: res}
	var err error
	if !res.Done() {
		if d.Unserved, d.UpgradeTo, err = ReadUnserved(ctx, fleet, res.Workflow, res.Version); err != nil {
			return nil, err
		}
	}
	if d.Children, d.MoreChildren, err = ChildRuns(ctx, runs, res); err != nil {
		return nil, err
	}
	return d, nil
}

// ReadUnserved reports whether no live worker serves or accepts version of
// workflow (false for a store that does not list workers), and then the
// version its runs could move to (UpgradeTo), if any.
func ReadUnserved(ctx context.Context, fleet Fleet, workflow, version string) (bool, string, error) {
	ws, err := fleet.Workers(ctx)
	if errors.Is(err, durable.ErrWorkersUnsupported) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("listing the workers: %w", err)
	}
	if !Unserved(ws)(workflow, version) {
		return false, "", nil
	}
	if version == "" {
		return true, "", nil // runs started before versions cannot move
	}
	vs, err := fleet.Versions(ctx, workflow)
	if err != nil {
		return true, "", fmt.Errorf("listing the versions of workflow %s: %w", dag.Quote(workflow), err)
	}
	return true, UpgradeTo(vs, workflow, version), nil
}

// UpgradeTo returns the version of workflow that the runs of version from
// could move to, in vs (newest first): the newest other version that live
// workers serve, or that the engine starts by name, and whose shape is
// known; "" if there is none.
func UpgradeTo(vs []durable.VersionInfo, workflow, from string) string {
	for i := range vs {
		x := &vs[i]
		if x.Workflow == workflow && x.Version != from && x.Version != "" && x.Steps != nil && (len(x.Workers) > 0 || x.Newest) {
			return x.Version
		}
	}
	return ""
}

// ChildRuns reads the child runs of res (at most MaxChildren), in the order
// of the steps that started them, then oldest first; more reports whether
// there are others.
func ChildRuns(ctx context.Context, runs RunReader, res *durable.RunResult) (kids []durabletype.RunSummary, more bool, err error) {
	page, err := runs.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Parent: res.ID}, Limit: MaxChildren})
	if err != nil {
		return nil, false, fmt.Errorf("listing the child runs of run %s: %w", res.ID, err)
	}
	pos := make(map[string]int, len(res.Steps))
	for i, s := range res.Steps {
		pos[s.Name] = i
	}
	at := func(r durabletype.RunSummary) int {
		if i, ok := pos[dag.DisplayName(r.ParentStep)]; ok {
			return i
		}
		return len(res.Steps)
	}
	kids = page.Runs
	slices.SortStableFunc(kids, func(a, b durabletype.RunSummary) int {
		return cmp.Or(cmp.Compare(at(a), at(b)), a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID.String(), b.ID.String()))
	})
	return kids, page.Next != "", nil
}

// NewRunDetail builds the document of a run: its input and outputs larger
// than maxValue bytes (negative: no limit) are left out, their sizes said.
func NewRunDetail(d *RunData, maxValue int) *RunDetail {
	res := d.Run
	out := &RunDetail{
		ID: res.ID, Workflow: res.Workflow, Version: res.Version, Tenant: res.Tenant, Status: res.Status,
		CreatedAt: res.CreatedAt.UTC(), FinishedAt: Time(res.FinishedAt),
		IdempotencyKey: res.IdempotencyKey, Priority: int(res.Priority), Deadline: Time(res.Deadline),
		Children: make([]Run, len(d.Children)), MoreChildren: d.MoreChildren, Unserved: d.Unserved, UpgradeTo: d.UpgradeTo,
		Kind: KindWorkflow,
	}
	steps, calls := SplitCalls(res)
	if calls != nil {
		out.Kind, out.Calls = KindFunction, make([]Call, len(calls))
		for i := range calls {
			out.Calls[i] = newCall(&calls[i], maxValue)
		}
	}
	out.Steps = make([]Step, len(steps))
	var re *durable.RunError
	if errors.As(res.Err, &re) {
		out.Error, out.FailedStep = &RunError{Step: re.Step, Message: re.Message}, re.Step
	}
	if p := res.Parent; p != nil {
		out.Parent = &Parent{RunID: p.RunID, Step: dag.DisplayName(p.Step), Result: p.Result}
		out.ParentID, out.ParentStep = &out.Parent.RunID, out.Parent.Step
	}
	for i, c := range d.Children {
		out.Children[i] = NewRun(c)
	}
	out.Input, out.InputBase64, out.InputOmitted = Value(res.Input, maxValue)
	for i := range steps {
		out.Steps[i] = newStep(&steps[i], false, maxValue)
	}
	if d.Events != nil {
		out.Events = NewEvents(d.Events)
	}
	return out
}

// newStep builds the document of a step, or of an item of a map step.
func newStep(s *durable.StepResult, item bool, maxValue int) Step {
	attempts, started := Attempts(s)
	out := Step{
		Name: s.Name, Kind: s.Kind, Parents: s.Parents, State: s.State, Retired: s.Retired, Attempts: attempts, Error: s.Error,
		StartedAt: Time(started), FinishedAt: Time(s.FinishedAt), EventKey: s.EventKey, Signal: s.Signal,
	}
	if out.Kind == "" {
		out.Kind = durabletype.KindStep
	}
	if out.Parents == nil {
		out.Parents = []string{}
	}
	if Waiting(s) {
		out.DueAt = Time(s.DueAt)
	}
	if s.ChildRunID != uuid.Nil {
		id := s.ChildRunID
		out.ChildRunID = &id
	}
	if item {
		n := s.Item
		out.Item = &n
	}
	out.Output, out.OutputBase64, out.OutputOmitted = Value(s.Output, maxValue)
	if s.Kind == durabletype.KindMap && !item && s.State == durabletype.TaskCompleted && len(s.Output) == 0 {
		if list, ok := itemsList(s.Items); ok {
			out.Output, out.OutputBase64, out.OutputOmitted = Value(list, maxValue)
		}
	}
	if s.Kind == durabletype.KindMap {
		out.ItemCounts = map[durabletype.TaskState]int{}
		out.Items = make([]Step, len(s.Items))
		for k := range s.Items {
			out.ItemCounts[s.Items[k].State]++
			out.Items[k] = newStep(&s.Items[k], true, maxValue)
		}
	}
	return out
}

// itemsList is the output of a completed map step as its children
// receive it: the JSON array of its items' outputs, in item order (an
// item without output is null); false when an item's output is not JSON
// (another codec), which no one list can show.
func itemsList(items []durable.StepResult) ([]byte, bool) {
	out := []byte{'['}
	for k := range items {
		if k > 0 {
			out = append(out, ',')
		}
		b := items[k].Output
		switch {
		case len(b) == 0:
			b = []byte("null")
		case !json.Valid(b):
			return nil, false
		}
		out = append(out, b...)
	}
	return append(out, ']'), true
}

// Attempts returns what a step's record says of its attempts as the
// API and the CLI show them: their number and when the latest began. A
// skipped step never ran (its skip is decided when it is claimed, which
// counts an attempt): 0 attempts, and no start (the zero time), except
// for a wait skipped on its timeout (SkipOnTimeout), which did wait from
// its start.
func Attempts(s *durable.StepResult) (int, time.Time) {
	if s.State != durabletype.TaskSkipped {
		return s.Attempts, s.StartedAt
	}
	if s.Kind == durabletype.KindEvent {
		return 0, s.StartedAt
	}
	return 0, time.Time{}
}

// Waiting reports whether a step waits for a due time: it sleeps, waits
// out a retry backoff or a delayed start, or waits with a timeout.
func Waiting(s *durable.StepResult) bool {
	return !s.DueAt.IsZero() &&
		(s.State == durabletype.TaskSleeping || s.State == durabletype.TaskQueued || s.State == durabletype.TaskWaiting)
}

// Value splits an encoded input or output into JSON, when it is valid
// JSON, or base64; a value larger than max bytes (negative: no limit) is
// neither, its size said instead.
func Value(b []byte, max int) (js json.RawMessage, b64 string, omitted int) {
	switch {
	case len(b) == 0:
		return nil, "", 0
	case max >= 0 && len(b) > max:
		return nil, "", len(b)
	case json.Valid(b):
		return json.RawMessage(b), "", 0
	}
	return nil, base64.StdEncoding.EncodeToString(b), 0
}

// NewEvents builds the documents of a run's event log.
func NewEvents(evs []durabletype.Event) []Event {
	out := make([]Event, len(evs))
	for i, ev := range evs {
		out[i] = Event{ID: ev.ID, At: ev.At.UTC(), Step: dag.DisplayName(ev.Step), Type: ev.Type, Attempt: ev.Attempt,
			Detail: ev.Detail, DueAt: Time(ev.DueAt)}
	}
	return out
}
