package durablecli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// What "runs show" prints about the steps that wait (for an event, a
// signal, a child run or the items of a map step) and about a run's child
// runs. A map step may have up to dag.MaxItems items: the table prints
// counts and a few of them, --json every one.

// Caps on what the table of "runs show" lists.
const (
	// maxChildRows is the most child runs its table lists.
	maxChildRows = 20
	// maxFailedItems is the most failed items it lists per map step.
	maxFailedItems = 10
	// maxItemOutputs is the most item outputs --outputs prints per map
	// step.
	maxItemOutputs = 10
)

// runView is what "runs show" prints: the run, its child runs and, on
// request, its event log.
type runView struct {
	res *durable.RunResult
	// children are the run's child runs, in the order of the steps that
	// started them, then oldest first; moreChildren is set when there are
	// more than durablejson.MaxChildren.
	children     []durabletype.RunSummary
	moreChildren bool
	events       []durabletype.Event
	// unserved is set for a run not settled whose version no live worker
	// serves or accepts; upgradeTo is then a version of its workflow that
	// live workers serve, if there is one ("" otherwise).
	unserved  bool
	upgradeTo string
	// prog is the program's name, for the commands it suggests.
	prog string
	// full shows inputs and outputs however large (--full).
	full bool
}

// maxValue is the largest input or output v shows (negative: no limit).
func (v *runView) maxValue() int {
	if v.full {
		return -1
	}
	return maxShownValue
}

// stepStates lists the step states in the order of a step's life, for
// counts.
var stepStates = []durabletype.TaskState{
	durabletype.TaskPending, durabletype.TaskQueued, durabletype.TaskRunning, durabletype.TaskSleeping, durabletype.TaskWaiting,
	durabletype.TaskCompleted, durabletype.TaskFailed, durabletype.TaskSkipped, durabletype.TaskCancelled,
}

// itemCounts counts a map step's items by state.
func itemCounts(items []durable.StepResult) map[durabletype.TaskState]int {
	out := map[durabletype.TaskState]int{}
	for _, it := range items {
		out[it.State]++
	}
	return out
}

// countText prints counts in the order given: "3 COMPLETED, 1 FAILED".
func countText[S ~string](counts map[S]int, order []S) string {
	var parts []string
	for _, s := range order {
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	return strings.Join(parts, ", ")
}

// waits reports whether a step is of a kind that waits: for an event or a
// signal, a child run, or its items.
func waits(s durable.StepResult) bool {
	switch s.Kind {
	case durabletype.KindEvent, durabletype.KindChild, durabletype.KindMap:
		return true
	}
	return false
}

// waitsFor describes what a waiting step waits (or waited) for; status
// gives the status of the child runs read.
func waitsFor(s durable.StepResult, status map[uuid.UUID]durabletype.RunStatus) string {
	switch s.Kind {
	case durabletype.KindEvent:
		switch {
		case s.Signal != "":
			return "signal " + dag.Quote(s.Signal)
		case s.EventKey != "":
			return "event " + dag.Quote(s.EventKey)
		case s.State.Terminal():
			return "event: did not wait"
		}
		return "event: key not computed yet"
	case durabletype.KindChild:
		if s.ChildRunID == uuid.Nil {
			if s.State.Terminal() {
				return "child run: none started"
			}
			return "child run: not started yet"
		}
		if st, ok := status[s.ChildRunID]; ok {
			return fmt.Sprintf("child run %s (%s)", s.ChildRunID, st)
		}
		return "child run " + s.ChildRunID.String()
	case durabletype.KindMap:
		if len(s.Items) == 0 {
			switch {
			case s.State == durabletype.TaskCompleted:
				return "0 items"
			case s.State.Terminal():
				return "items: none"
			}
			return "items: not fanned out yet"
		}
		return plural(len(s.Items), "item") + ": " + countText(itemCounts(s.Items), stepStates)
	}
	return "-"
}

// printWaits prints what the run's event, signal, child and map steps wait
// (or waited) for, if it has any.
func printWaits(w io.Writer, v *runView) {
	var ws []durable.StepResult
	steps, _ := durablejson.SplitCalls(v.res) // a function's calls say what they wait for
	for _, s := range steps {
		if waits(s) {
			ws = append(ws, s)
		}
	}
	if len(ws) == 0 {
		return
	}
	status := make(map[uuid.UUID]durabletype.RunStatus, len(v.children))
	for _, c := range v.children {
		status[c.ID] = c.Status
	}
	fmt.Fprintf(w, "\nwaits (events, signals, child runs, map items):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "STEP\tSTATE\tWAITS FOR\n")
	for _, s := range ws {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.State, waitsFor(s, status))
	}
	tw.Flush()
}

// printFailedItems prints, for each map step with failed items, the first
// maxFailedItems of them with their errors.
func printFailedItems(w io.Writer, res *durable.RunResult) {
	for _, s := range res.Steps {
		if s.Kind != durabletype.KindMap {
			continue
		}
		var failed []durable.StepResult
		for _, it := range s.Items {
			if it.State == durabletype.TaskFailed {
				failed = append(failed, it)
			}
		}
		if len(failed) == 0 {
			continue
		}
		shown := failed[:min(len(failed), maxFailedItems)]
		if len(shown) < len(failed) {
			fmt.Fprintf(w, "\nfailed items of %s (%d of %d; the first %d):\n", s.Name, len(failed), len(s.Items), len(shown))
		} else {
			fmt.Fprintf(w, "\nfailed items of %s (%d of %d):\n", s.Name, len(failed), len(s.Items))
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "ITEM\tATTEMPTS\tFINISHED\tERROR\n")
		for _, it := range shown {
			errText := "-"
			if it.Error != "" {
				errText = oneLine(it.Error, errorColumn)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", it.Name, it.Attempts, offset(it.FinishedAt, res.CreatedAt), errText)
		}
		tw.Flush()
		if n := len(failed) - len(shown); n > 0 {
			fmt.Fprintf(w, "… %d more failed (--json lists every item)\n", n)
		}
	}
}

// printChildren prints the run's child runs (the first maxChildRows), if it
// has any or has steps that start some.
func printChildren(w io.Writer, v *runView) {
	hasChildSteps := slices.ContainsFunc(v.res.Steps, func(s durable.StepResult) bool { return s.Kind == durabletype.KindChild })
	if len(v.children) == 0 {
		switch {
		case hasChildSteps && v.res.Done():
			fmt.Fprintf(w, "\nchild runs: none\n")
		case hasChildSteps:
			fmt.Fprintf(w, "\nchild runs: none yet\n")
		}
		return
	}
	counts := map[durabletype.RunStatus]int{}
	for _, c := range v.children {
		counts[c.Status]++
	}
	total := plural(len(v.children), "run")
	if v.moreChildren {
		total = "the first " + total
	}
	fmt.Fprintf(w, "\nchild runs (%s: %s):\n", total, countText(counts, durabletype.RunStatuses))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tSTEP\tWORKFLOW\tSTATUS\tFINISHED\tFAILURE\n")
	shown := v.children[:min(len(v.children), maxChildRows)]
	for _, c := range shown {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, dag.DisplayName(c.ParentStep), c.Workflow, c.Status,
			offset(c.FinishedAt, v.res.CreatedAt), failure(c))
	}
	tw.Flush()
	if n := len(v.children) - len(shown); n > 0 || v.moreChildren {
		more := fmt.Sprintf("%d more", n)
		if v.moreChildren {
			more = "more"
		}
		fmt.Fprintf(w, "… %s: %s runs list --parent %s\n", more, v.prog, v.res.ID)
	}
}

// printItemOutputs prints the outputs of a map step's completed items, the
// first maxItemOutputs of them, and returns how many it printed.
func printItemOutputs(w io.Writer, s durable.StepResult, max int) int {
	var done []durable.StepResult
	for _, it := range s.Items {
		if it.State == durabletype.TaskCompleted && len(it.Output) > 0 {
			done = append(done, it)
		}
	}
	if len(done) == 0 {
		return 0
	}
	shown := done[:min(len(done), maxItemOutputs)]
	for _, it := range shown {
		printValue(w, it.Name, it.Output, max)
	}
	if n := len(done) - len(shown); n > 0 {
		fmt.Fprintf(w, "%s: … %d more completed items of %d (--json prints every item's output)\n", s.Name, n, len(s.Items))
	}
	return len(shown)
}
