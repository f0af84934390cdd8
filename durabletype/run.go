package durabletype

import (
	"time"

	"github.com/google/uuid"
)

// RunStatus is the status of a run.
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
