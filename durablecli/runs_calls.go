package durablecli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// What "runs show" prints about the calls of a durable function's run: its
// body is its one step, and each call the body made (a step, a sleep, a
// wait, a child run, a patch marker) is a row, in the order it was made.

// printCalls prints the calls of a function's run, by number.
func printCalls(w io.Writer, v *runView, calls []durable.StepResult) {
	res := v.res
	rel := func(t time.Time) string { return offset(t, res.CreatedAt) }
	status := make(map[uuid.UUID]durabletype.RunStatus, len(v.children))
	for _, c := range v.children {
		status[c.ID] = c.Status
	}
	if len(calls) == 0 {
		fmt.Fprintf(w, "\ncalls: none yet\n")
		return
	}
	fmt.Fprintf(w, "\ncalls (%d, in the order made; times relative to the run's creation):\n", len(calls))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "#\tCALL\tKIND\tSTATE\tATTEMPTS\tSTARTED\tFINISHED\tTOOK\tWAITS FOR\tERROR\n")
	for _, s := range calls {
		name, n, _ := durablejson.CallName(&s)
		took := "-"
		if !s.StartedAt.IsZero() && !s.FinishedAt.IsZero() {
			took = s.FinishedAt.Sub(s.StartedAt).Round(time.Millisecond).String()
		}
		errText := "-"
		if s.Error != "" {
			errText = oneLine(s.Error, errorColumn)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", n, name, durablejson.CallKind(&s), s.State, s.Attempts,
			rel(s.StartedAt), rel(s.FinishedAt), took, callWaitsFor(s, rel, status), errText)
	}
	tw.Flush()
}

// callWaitsFor says what call s waits (or waited) for, and until when.
func callWaitsFor(s durable.StepResult, rel func(time.Time) string, status map[uuid.UUID]durabletype.RunStatus) string {
	waiting := durablejson.CallWaiting(&s)
	switch s.Kind {
	case durabletype.KindSleep:
		if s.DueAt.IsZero() {
			return "-"
		}
		if s.State == durabletype.TaskCancelled {
			return "sleep until " + rel(s.DueAt) + " (cut short)"
		}
		return "sleep until " + rel(s.DueAt)
	case durabletype.KindEvent:
		what := "event " + dag.Quote(s.EventKey)
		if s.Signal != "" {
			what = "signal " + dag.Quote(s.Signal)
		}
		if waiting {
			what += ", times out at " + rel(s.DueAt)
		}
		return what
	case durabletype.KindChild:
		if s.ChildRunID == uuid.Nil {
			return "child run"
		}
		if st, ok := status[s.ChildRunID]; ok {
			return fmt.Sprintf("child run %s (%s)", s.ChildRunID, st)
		}
		return "child run " + s.ChildRunID.String()
	case durabletype.KindStep:
		if waiting {
			return "retry at " + rel(s.DueAt)
		}
	}
	return "-"
}
