package dag

import (
	"fmt"
	"slices"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// The registry of live workers (store.WorkerRegistry): when an engine
// refreshes its record, when a record counts as live and when it is pruned.
// The rule is the one of claims: a worker is dead once it has gone
// DeadAfter without a sign of life, exactly when its running steps become
// rescuable.

// MaxWorkerRefresh caps the interval between two refreshes of a worker's
// record, so that an engine with a long DeadAfter still reports its steps
// in flight every so often.
const MaxWorkerRefresh = 15 * time.Second

// WorkerPruneAfter is how long the record of a worker that stopped without
// removing it (it crashed, or lost its database) is kept, shown as not
// live, before the leader deletes it.
const WorkerPruneAfter = 24 * time.Hour

// WorkerRefresh is how often an engine whose liveness window is deadAfter
// refreshes its record: a third of the window, so that two refreshes in a
// row may fail (or be late) before the worker is shown as not live, and at
// most MaxWorkerRefresh.
func WorkerRefresh(deadAfter time.Duration) time.Duration {
	return max(min(deadAfter/3, MaxWorkerRefresh), time.Millisecond)
}

// WorkerLive reports whether a worker last seen at lastSeen, with the
// liveness window deadAfter, is live at now (both times on the store's
// clock): seen less than deadAfter ago. A record seen "in the future"
// (clock adjustments) is live.
func WorkerLive(lastSeen, now time.Time, deadAfter time.Duration) bool {
	return now.Sub(lastSeen) < deadAfter
}

// WorkerPrunable reports whether a worker's record may be deleted at now:
// it has not been seen for WorkerPruneAfter, and not for its own liveness
// window either (a worker configured with a longer window is not pruned
// while still live).
func WorkerPrunable(lastSeen, now time.Time, deadAfter time.Duration) bool {
	age := now.Sub(lastSeen)
	return age >= WorkerPruneAfter && age >= deadAfter
}

// Serves reports whether a worker serving workflows (sorted) executes the
// runs of workflow.
func Serves(workflows []string, workflow string) bool {
	_, ok := slices.BinarySearch(workflows, workflow)
	return ok
}

// MaxWorkerLabelLen is the longest host name or version of a worker
// record, in bytes.
const MaxWorkerLabelLen = 255

// ValidWorkerLabel reports whether s may be a worker record's host or
// version: empty (unknown), or 1 to MaxWorkerLabelLen bytes of UTF-8
// without control characters (PostgreSQL's text takes no NUL).
func ValidWorkerLabel(s string) bool { return s == "" || validLabel(s, MaxWorkerLabelLen) }

// CheckWorker returns an error matching durabletype.ErrInvalidWorker when a
// worker record cannot be registered: an invalid ID (ValidWorker), a host
// or version that is not a ValidWorkerLabel, workflows
// not sorted or not unique, a negative count, or a DeadAfter that is not
// positive.
func CheckWorker(w *store.Worker) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", durabletype.ErrInvalidWorker, fmt.Sprintf(format, args...))
	}
	switch {
	case !ValidWorker(w.ID):
		return bad("id %s: use 1-%d bytes of UTF-8 without control characters", Quote(w.ID), MaxWorkerLen)
	case !ValidWorkerLabel(w.Host):
		return bad("host %s: use at most %d bytes of UTF-8 without control characters", Quote(w.Host), MaxWorkerLabelLen)
	case !ValidWorkerLabel(w.Version):
		return bad("version %s: use at most %d bytes of UTF-8 without control characters", Quote(w.Version), MaxWorkerLabelLen)
	case w.Concurrency < 0 || w.InFlight < 0:
		return bad("negative count")
	case w.DeadAfter <= 0:
		return bad("DeadAfter %s is not positive", w.DeadAfter)
	}
	for _, list := range [][]string{w.Workflows, w.Accepts} {
		for i, q := range list {
			if i > 0 && list[i-1] >= q {
				return bad("workflows not sorted and unique at %s", Quote(q))
			}
			if wf, v, bare := SplitQueue(q); !ValidName(wf) || (!bare && v != "" && !ValidVersion(v)) {
				return bad("workflow %s: want a name, or a name@version", Quote(q))
			}
		}
	}
	return nil
}
