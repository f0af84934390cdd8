package durabletest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// Assertions on a run's result. Each reports a failure to tb (Fatalf: the
// test stops) with what the run holds, and works with any engine and store,
// inside a synctest bubble or not.

// Step names a step of a run: any *durable.StepRef[O], or a StepName.
type Step interface {
	// Name returns the step's name.
	Name() string
}

// StepName names a step by its name, e.g. StepName(durabletype.OnFailureTask)
// for the on-failure handler.
type StepName string

// Name returns n.
func (n StepName) Name() string { return string(n) }

// stepOf returns step of res, failing tb if res has no such step.
func stepOf(tb testing.TB, res *durable.RunResult, step Step) *durable.StepResult {
	tb.Helper()
	if res == nil {
		tb.Fatalf("durabletest: no run result (nil)")
		return nil
	}
	s, ok := res.Step(step.Name())
	if !ok {
		names := make([]string, len(res.Steps))
		for i, x := range res.Steps {
			names[i] = x.Name
		}
		tb.Fatalf("durabletest: run %s (%s) has no step %q; its steps are %s", res.ID, res.Workflow, step.Name(), strings.Join(names, ", "))
		return nil
	}
	return s
}

// summary describes a run's result: its status, error and steps.
func summary(res *durable.RunResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s (%s) is %s", res.ID, res.Workflow, res.Status)
	if res.Err != nil {
		fmt.Fprintf(&b, ": %v", res.Err)
	}
	for _, s := range res.Steps {
		fmt.Fprintf(&b, "\n  step %q %s", s.Name, s.State)
		if s.Attempts > 1 {
			fmt.Fprintf(&b, " after %d attempts", s.Attempts)
		}
		if s.Error != "" {
			fmt.Fprintf(&b, ": %s", firstLine(s.Error))
		}
		if strings.Contains(s.Error, "but the store gives *memstore.Tx") {
			b.WriteString("\n    (a transactional step's SQL needs a database: run the test on PostgreSQL, with durabletest.RunPostgres)")
		}
	}
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// RequireStatus fails the test unless run res has status want.
func RequireStatus(tb testing.TB, res *durable.RunResult, want durabletype.RunStatus) {
	tb.Helper()
	if res == nil {
		tb.Fatalf("durabletest: no run result (nil), want a %s run", want)
		return
	}
	if res.Status != want {
		tb.Fatalf("durabletest: want a %s run; %s", want, summary(res))
	}
}

// RequireCompleted fails the test unless run res completed; the failure
// names the step that failed the run, and its error.
func RequireCompleted(tb testing.TB, res *durable.RunResult) {
	tb.Helper()
	RequireStatus(tb, res, durabletype.RunCompleted)
}

// RequireFailed fails the test unless run res failed because step failed
// for good, and returns that step's error message.
func RequireFailed(tb testing.TB, res *durable.RunResult, step Step) string {
	tb.Helper()
	RequireStatus(tb, res, durabletype.RunFailed)
	var re *durable.RunError
	if !errors.As(res.Err, &re) || re.Step != step.Name() {
		tb.Fatalf("durabletest: want run %s failed by step %q; %s", res.ID, step.Name(), summary(res))
		return ""
	}
	return re.Message
}

// RequireState fails the test unless step of run res is in state want,
// and returns the step.
func RequireState(tb testing.TB, res *durable.RunResult, step Step, want durabletype.TaskState) *durable.StepResult {
	tb.Helper()
	s := stepOf(tb, res, step)
	if s != nil && s.State != want {
		tb.Fatalf("durabletest: want step %q %s; %s", step.Name(), want, summary(res))
	}
	return s
}

// RequireAttempts fails the test unless step of run res was attempted
// want times (its latest attempt is the want-th).
func RequireAttempts(tb testing.TB, res *durable.RunResult, step Step, want int) {
	tb.Helper()
	s := stepOf(tb, res, step)
	if s != nil && s.Attempts != want {
		tb.Fatalf("durabletest: want step %q attempted %d times, not %d; %s", step.Name(), want, s.Attempts, summary(res))
	}
}

// Output returns the output of step ref of run res, decoded into its type,
// failing the test if the step did not complete or its output does not
// decode (see durable.StepRef.Result).
func Output[O any](tb testing.TB, res *durable.RunResult, ref *durable.StepRef[O]) O {
	tb.Helper()
	if res == nil {
		tb.Fatalf("durabletest: no run result (nil)")
		var zero O
		return zero
	}
	out, err := ref.Result(res)
	if err != nil {
		tb.Fatalf("durabletest: %v; %s", err, summary(res))
	}
	return out
}

// RequireOutput fails the test unless step ref of run res completed with
// an output equal to want (reflect.DeepEqual, after decoding it into O).
func RequireOutput[O any](tb testing.TB, res *durable.RunResult, ref *durable.StepRef[O], want O) {
	tb.Helper()
	got := Output(tb, res, ref)
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("durabletest: step %q of run %s: output\n  got:  %#v\n  want: %#v", ref.Name(), res.ID, got, want)
	}
}

// FuncOutput returns what durable function fn returned in run res,
// failing the test if the run did not complete or the output does not
// decode (see durable.Function.Output).
func FuncOutput[I, O any](tb testing.TB, res *durable.RunResult, fn *durable.Function[I, O]) O {
	tb.Helper()
	if res == nil {
		tb.Fatalf("durabletest: no run result (nil)")
		var zero O
		return zero
	}
	out, err := fn.Output(res)
	if err != nil {
		tb.Fatalf("durabletest: %v; %s", err, summary(res))
	}
	return out
}

// RequireFuncOutput fails the test unless durable function fn returned an
// output equal to want in run res (reflect.DeepEqual, after decoding it
// into O).
func RequireFuncOutput[I, O any](tb testing.TB, res *durable.RunResult, fn *durable.Function[I, O], want O) {
	tb.Helper()
	got := FuncOutput(tb, res, fn)
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("durabletest: function %q, run %s: output\n  got:  %#v\n  want: %#v", fn.Name(), res.ID, got, want)
	}
}
