package durabletype

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// RunStatus is the status of a run. What a status means (is the run over,
// does it move on by itself, did it fail, what may an operator do to it) is
// said once, by its methods below; every layer (the core, the stores' SQL,
// the API, the CLI, the dashboard) asks them instead of listing statuses.
type RunStatus string

// Run statuses: RUNNING until the run completes, fails or is cancelled.
const (
	RunRunning   RunStatus = "RUNNING"
	RunCompleted RunStatus = "COMPLETED"
	RunFailed    RunStatus = "FAILED"
	RunCancelled RunStatus = "CANCELLED"
)

// RunStatuses lists every run status, in the order lists and tables show
// them.
var RunStatuses = []RunStatus{RunRunning, RunCompleted, RunFailed, RunCancelled}

// RunAction is what an operator may do to runs (Engine.Cancel, Replay,
// Upgrade); RunStatus.Allows says to which.
type RunAction string

// Run actions.
const (
	// ActionCancel settles a run as CANCELLED.
	ActionCancel RunAction = "cancel"
	// ActionReplay runs a settled run again from its failed step (or a
	// step named).
	ActionReplay RunAction = "replay"
	// ActionUpgrade moves a run to another version of its workflow.
	ActionUpgrade RunAction = "upgrade"
)

// RunActions lists every run action.
var RunActions = []RunAction{ActionCancel, ActionReplay, ActionUpgrade}

// runMeaning is what one status means; see the methods of RunStatus.
type runMeaning struct {
	settled, active, unsuccessful bool
	actions                       []RunAction
}

// runMeanings says what each status means: the one place that does. A
// status missing here is unknown to every predicate, and TestRunMeanings
// fails for it.
var runMeanings = map[RunStatus]runMeaning{
	RunRunning:   {active: true, actions: []RunAction{ActionCancel, ActionUpgrade}},
	RunCompleted: {settled: true, actions: []RunAction{ActionReplay}},
	RunFailed:    {settled: true, unsuccessful: true, actions: []RunAction{ActionReplay}},
	RunCancelled: {settled: true, unsuccessful: true, actions: []RunAction{ActionReplay}},
}

// Known reports whether s is a run status.
func (s RunStatus) Known() bool { _, ok := runMeanings[s]; return ok }

// Settled reports whether a run in status s is over: it has a finish time,
// and nothing of it runs again unless an operator replays it. Retention
// deletes settled runs only.
func (s RunStatus) Settled() bool { return runMeanings[s].settled }

// InFlight reports whether a run in status s is not settled: the stats
// count it in flight, its waits are shown, it is flagged when no live
// worker serves its version, and it pins its version. A run whose status
// is settled is in flight too until its settlement is done (FAILED while
// its steps or its on-failure handler still run): the core's dag.InFlight
// says it of a run.
func (s RunStatus) InFlight() bool { return s.Known() && !s.Settled() }

// Active reports whether a run in status s moves on by itself: its tasks
// are claimed, its timers fire, its claims stay current. An in-flight run
// that is not active holds its place but does nothing until it is made
// active again.
func (s RunStatus) Active() bool { return runMeanings[s].active }

// Unsuccessful reports whether a run in status s settled without
// completing: waiting for it returns a *RunError, the stats count it as
// failed, and replaying every run of a filter picks it.
func (s RunStatus) Unsuccessful() bool { return runMeanings[s].unsuccessful }

// Allows reports whether an operator may apply action a to a run in
// status s.
func (s RunStatus) Allows(a RunAction) bool { return slices.Contains(runMeanings[s].actions, a) }

// RunStatusesWhere lists the run statuses for which pred holds, in the
// order of RunStatuses: what a filter, a list or an SQL statement asks for
// ("every in-flight status") instead of naming statuses.
func RunStatusesWhere(pred func(RunStatus) bool) []RunStatus {
	var out []RunStatus
	for _, s := range RunStatuses {
		if pred(s) {
			out = append(out, s)
		}
	}
	return out
}

// ParentRef links a child run to its parent: the task of the parent run
// that started it, and the child's step whose output is its result.
type ParentRef struct {
	RunID uuid.UUID
	Step  string
	// Result is the child's step whose output the parent's task receives.
	Result string
}

// RunSummary is a run as a list shows it.
type RunSummary struct {
	ID         uuid.UUID
	Workflow   string
	Version    string
	Tenant     string
	Status     RunStatus
	FailedStep string
	Error      string
	CreatedAt  time.Time
	FinishedAt time.Time
	// ParentID and ParentStep link a child run to its parent.
	ParentID   uuid.UUID
	ParentStep string
}
