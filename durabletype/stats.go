package durabletype

import "time"

// Stats counts tasks and runs by workflow and tenant.
type Stats struct {
	// Queues has one entry per workflow and tenant with tasks ready,
	// waiting or running.
	Queues []QueueStats
	// Runs has one entry per workflow, tenant and status of the runs in
	// flight (RUNNING, or FAILED while steps or the on-failure handler
	// still run), and one per workflow, tenant and status of the runs that
	// settled within the window. A run replayed and settled again is
	// counted at each settlement.
	Runs []RunCount
}

// QueueStats counts the unfinished tasks of one workflow and tenant.
type QueueStats struct {
	Workflow string
	// Version is the version of the runs the tasks belong to.
	Version string
	Tenant  string
	// Ready counts the tasks claimable now.
	Ready int
	// Waiting counts the tasks waiting for a timer (retry backoffs, sleeps,
	// rate limits, wait timeouts), parked behind a concurrency key, or
	// WAITING for an event, a signal, a child run or a map step's items.
	Waiting int
	// Running counts the tasks claimed and running.
	Running int
	// OldestReady is when the longest-waiting ready task became ready;
	// zero when none is.
	OldestReady time.Time
}

// RunCount counts the runs of one workflow, tenant and status.
type RunCount struct {
	Workflow string
	// Version is the version the runs in flight are pinned to; empty for
	// counts of settled runs, which are counted by workflow only.
	Version string
	Tenant  string
	Status  RunStatus
	// Settled tells counts of runs that settled within the window from
	// counts of runs in flight.
	Settled bool
	Count   int
}
