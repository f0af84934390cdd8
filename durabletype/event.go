package durabletype

import (
	"time"

	"github.com/google/uuid"
)

// EventType is the kind of an event in a run's log.
type EventType string

// Event types, one per kind of transition of a task.
const (
	EventQueued    EventType = "QUEUED"
	EventStarted   EventType = "STARTED"
	EventCompleted EventType = "COMPLETED"
	EventFailed    EventType = "FAILED"
	EventRetrying  EventType = "RETRYING"
	EventSkipped   EventType = "SKIPPED"
	EventSleeping  EventType = "SLEEPING"
	EventWoken     EventType = "WOKEN"
	EventCancelled EventType = "CANCELLED"
	// EventReplayed: a replay reset the task to run again; the detail says
	// which replay.
	EventReplayed EventType = "REPLAYED"
	// EventWaiting: the task began waiting; the detail says for what (an
	// event key, a signal, a child run, a map's items). A task waiting for
	// an event or a signal that refused a payload (its type cannot read
	// it) records a WAITING event too, whose detail starts with "refused
	// the payload of" and says why: it waits on.
	EventWaiting EventType = "WAITING"
	// EventUpgraded: the task's run moved to another version of its
	// workflow (a task added by that version, or one not finished when it
	// moved); the detail names both versions.
	EventUpgraded EventType = "UPGRADED"
	// EventLost: the task's attempt lost its worker (no heartbeat for
	// DeadAfter) and was taken back; the detail names the worker and how
	// many attempts in a row were lost. The task runs again without
	// spending a retry, or fails once too many were lost in a row.
	EventLost EventType = "LOST"
)

// Event is one entry of a run's event log.
type Event struct {
	ID      int64
	RunID   uuid.UUID
	Step    string
	Type    EventType
	Attempt int
	At      time.Time
	// Detail is the error of a FAILED, RETRYING or LOST event, or the reason of a
	// SKIPPED, CANCELLED or QUEUED one.
	Detail string
	// DueAt is the wake-up time of a SLEEPING event and the next attempt's
	// time of a RETRYING one.
	DueAt time.Time
}
