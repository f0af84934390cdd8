package dag

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Versions of a workflow (see docs/semantics.md, "Versions and deploys").
// A run is pinned to the version it was started at (durabletype.Shape.Version):
// only engines that registered the workflow at that version claim its
// tasks. Moving a run to another version is a transition of its own
// (Run.Upgrade), allowed when every step the run has not finished can run
// the same way in the other version.

// MaxVersionLen is the longest version, in bytes.
const MaxVersionLen = 64

// ValidVersion reports whether v is a valid version: 1 to MaxVersionLen
// bytes of letters, digits and "_-.+", starting with a letter or a digit.
func ValidVersion(v string) bool {
	if len(v) == 0 || len(v) > MaxVersionLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '-' || c == '.' || c == '+'):
		default:
			return false
		}
	}
	return true
}

// queueSep separates a workflow from its version in a queue name; neither
// names nor versions contain it.
const queueSep = "@"

// Queue names the tasks of runs of workflow pinned to version, as a
// claimer lists what it serves (store.ClaimTasksParams.Queues) and a
// worker's record lists it (store.Worker.Workflows).
func Queue(workflow, version string) string { return workflow + queueSep + version }

// SplitQueue splits a queue name into its workflow and version. A name
// without a version (a record of an engine older than versions) has
// any set: it stands for every version of its workflow.
func SplitQueue(q string) (workflow, version string, any bool) {
	w, v, ok := strings.Cut(q, queueSep)
	return w, v, !ok
}

// ServesQueue reports whether a claimer listing queues (nil: every version
// of its workflows) claims tasks of runs of workflow pinned to version.
// It is the rule pgstore's claim statement compiles.
func ServesQueue(queues []string, workflow, version string) bool {
	if queues == nil {
		return true
	}
	return slices.Contains(queues, Queue(workflow, version))
}

// ClaimServes reports whether a claim with parameters p takes tasks of
// runs of workflow pinned to version: p names the workflow and serves the
// version (ServesQueue). The claim takes such a task when it is Claimable,
// not parked behind its concurrency key, not past the rate-limit window
// that admitted it (RateExpired), and its tenant is under the claim's cap
// (UnderTenantLimit); among those of a lane, fairq.Outranks says which
// first. memstore calls these; pgstore's claim statements are their
// compiled form, checked against them by pgstore's
// TestClaimSelectionMatchesCore.
func ClaimServes(p *store.ClaimTasksParams, workflow, version string) bool {
	return slices.Contains(p.Workflows, workflow) && ServesQueue(p.Queues, workflow, version)
}

// UnderTenantLimit reports whether a claim capped at limit RUNNING tasks
// per tenant (store.ClaimTasksParams.TenantLimit; 0 or less: no cap) may
// take a task of a tenant with running tasks RUNNING, the claim's own
// counted.
func UnderTenantLimit(limit, running int) bool { return limit <= 0 || TenantRoom(limit, running) > 0 }

// TenantRoom is how many tasks a claim capped at limit (positive) RUNNING
// tasks per tenant may take of a tenant with running tasks RUNNING: none
// once it is at or over its cap (a cap lowered since).
func TenantRoom(limit, running int) int { return max(limit-running, 0) }

// ServesVersion reports whether a worker's record listing queues (as
// store.Worker.Workflows) serves runs of workflow pinned to version: its
// list names that version, or the bare workflow (every version).
func ServesVersion(queues []string, workflow, version string) bool {
	for _, q := range queues {
		w, v, any := SplitQueue(q)
		if w == workflow && (any || v == version) {
			return true
		}
	}
	return false
}

// UpgradeError says why a run cannot move to a version, or a definition
// cannot accept the runs of a version: the step at fault and the reason.
// It matches durabletype.ErrIncompatible.
type UpgradeError struct {
	// From and To are the versions.
	From, To string
	// Step is the step at fault; empty for a reason of the whole run.
	Step   string
	Reason string
}

func (e *UpgradeError) Error() string {
	msg := fmt.Sprintf("%s: version %s to %s", durabletype.ErrIncompatible.Error(), quoteVersion(e.From), quoteVersion(e.To))
	if e.Step != "" {
		msg += ": step " + Quote(e.Step)
	}
	return msg + ": " + e.Reason
}

func (e *UpgradeError) Unwrap() error { return durabletype.ErrIncompatible }

func quoteVersion(v string) string {
	if v == "" {
		return "(none)"
	}
	return Quote(v)
}

// sameTypes reports whether two recorded type names agree: equal, or one
// of them unknown (a shape recorded before types were).
func sameTypes(a, b string) bool { return a == "" || b == "" || a == b }

// differs says how step b differs from step a in what a run relies on
// while the step is unfinished: its kind (and what a wait, a child step or
// a map step waits for), its parents and its output type; "" when they
// agree. Policies (retries, timeouts, a sleep's length) may differ.
func differs(a, b *durabletype.StepSpec) string {
	ka, kb := KindOf(a), KindOf(b)
	switch {
	case ka != kb:
		return fmt.Sprintf("it is a %s step, and a %s step in the other version", ka, kb)
	case !sameParents(a.Parents, b.Parents):
		return fmt.Sprintf("its parents are [%s], and [%s] in the other version",
			strings.Join(a.Parents, ", "), strings.Join(b.Parents, ", "))
	case !sameTypes(a.Output, b.Output):
		return fmt.Sprintf("its output is a %s, and a %s in the other version", a.Output, b.Output)
	case a.Wait != nil && a.Wait.Signal != b.Wait.Signal:
		return fmt.Sprintf("it waits for %s, and for %s in the other version", waitWhat(a.Wait), waitWhat(b.Wait))
	case a.Child != nil && *a.Child != *b.Child:
		return fmt.Sprintf("it starts workflow %s for step %s, and workflow %s for step %s in the other version",
			Quote(a.Child.Workflow), Quote(a.Child.Result), Quote(b.Child.Workflow), Quote(b.Child.Result))
	case a.Map != nil && a.Map.Over != b.Map.Over:
		return fmt.Sprintf("it maps over %s, and over %s in the other version", mapWhat(a.Map), mapWhat(b.Map))
	}
	return ""
}

func mapWhat(m *durabletype.MapSpec) string {
	if MapsInput(m) {
		return "the run's input"
	}
	return Quote(m.Over)
}

func waitWhat(w *durabletype.WaitSpec) string {
	if w.Signal != "" {
		return "signal " + Quote(w.Signal)
	}
	return "an event"
}

func sameParents(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, p := range a {
		if !slices.Contains(b, p) {
			return false
		}
	}
	return true
}

// CheckAccepts reports whether every run of version from can move to
// version to, whatever it has done: every step of from is in to, of the
// same kind, with the same parents and output type, and the input types
// agree. It is the rule of a definition that accepts the runs of an older
// version (durable's Workflow.Accepts); Run.Upgrade applies the weaker
// rule of one run (finished steps may be gone or changed).
func CheckAccepts(from, to *durabletype.Shape) error {
	bad := func(step, reason string) error {
		return &UpgradeError{From: from.Version, To: to.Version, Step: step, Reason: reason}
	}
	if !sameTypes(from.Input, to.Input) {
		return bad("", fmt.Sprintf("the input is a %s, and a %s in the other version", from.Input, to.Input))
	}
	for i := range from.Steps {
		a := &from.Steps[i]
		if a.Retired {
			continue
		}
		b := stepNamed(to, a.Name)
		if b == nil {
			return bad(a.Name, "the other version has no such step")
		}
		if d := differs(a, b); d != "" {
			return bad(a.Name, d)
		}
	}
	return nil
}

func stepNamed(s *durabletype.Shape, name string) *durabletype.StepSpec {
	for i := range s.Steps {
		if s.Steps[i].Name == name {
			return &s.Steps[i]
		}
	}
	return nil
}

// finished reports whether a task is done for good in a run that goes on:
// COMPLETED or SKIPPED.
func finished(t *store.Task) bool {
	return t.State == durabletype.TaskCompleted || t.State == durabletype.TaskSkipped
}

// CheckTarget checks the shape of a version runs are to move to: a valid
// shape with its version set.
func CheckTarget(to *durabletype.Shape) error {
	if to == nil || to.Version == "" {
		return fmt.Errorf("%w: the version to move to has no version set", durabletype.ErrInvalidRun)
	}
	if _, err := Compile(to); err != nil {
		return fmt.Errorf("%w: the version to move to: %w", durabletype.ErrInvalidRun, err)
	}
	return nil
}

// upgradeShape is the shape a run takes when it moves to version to: its
// steps in their order, each as to has it when it is the same there
// (differs), else kept as recorded and Retired (only a finished step
// may be); then the steps to adds, in to's order. Step indexes, and so
// every stored task and queue entry of the run, stay as they are.
func (r *Run) upgradeShape(to *durabletype.Shape) (*durabletype.Shape, error) {
	from := r.Shape.Shape
	bad := func(step, reason string) error {
		return &UpgradeError{From: r.Rec.Version, To: to.Version, Step: step, Reason: reason}
	}
	if !sameTypes(from.Input, to.Input) {
		return nil, bad("", fmt.Sprintf("the input is a %s, and a %s in the other version", from.Input, to.Input))
	}
	out := &durabletype.Shape{Version: to.Version, Input: cmpOr(to.Input, from.Input), OnFailure: to.OnFailure}
	have := make(map[string]bool, len(from.Steps))
	for i := range from.Steps {
		a := &from.Steps[i]
		have[a.Name] = true
		b := stepNamed(to, a.Name)
		same := b != nil && !a.Retired && differs(a, b) == ""
		switch {
		case same:
			out.Steps = append(out.Steps, *b)
			out.Steps[i].Retired = false
		case finished(&r.Tasks[i]):
			kept := *a
			kept.Retired = true
			out.Steps = append(out.Steps, kept)
		case b == nil:
			return nil, bad(a.Name, fmt.Sprintf("it is %s, and the other version has no such step", r.Tasks[i].State))
		default:
			return nil, bad(a.Name, fmt.Sprintf("it is %s, and %s", r.Tasks[i].State, differs(a, b)))
		}
	}
	for i := range to.Steps {
		if b := &to.Steps[i]; !have[b.Name] {
			out.Steps = append(out.Steps, *b)
		}
	}
	// A step that will run reads its finished parents' recorded outputs:
	// they must decode into the types it reads them as.
	for i := range out.Steps {
		s := &out.Steps[i]
		if s.Retired || (i < len(from.Steps) && finished(&r.Tasks[i])) {
			continue
		}
		for _, p := range s.Parents {
			old := stepNamed(from, p)
			if old == nil {
				continue // a step to adds: it has not run
			}
			if k := slices.IndexFunc(from.Steps, func(x durabletype.StepSpec) bool { return x.Name == p }); !finished(&r.Tasks[k]) {
				continue
			}
			if nw := stepNamed(to, p); nw != nil && !sameTypes(old.Output, nw.Output) {
				return nil, bad(s.Name, fmt.Sprintf("it reads the output of step %s, recorded as a %s, as a %s",
					Quote(p), old.Output, nw.Output))
			}
		}
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Upgrade moves a run that has not settled from version from to version
// to (a shape with its Version set; see upgradeShape for the shape the run
// takes). Every task
// the run has not finished keeps its state, claim and queue entry; the
// steps to adds are created, PENDING, and those whose parents are all
// resolved become ready (or are skipped by the cascade) at once. Each of
// those tasks records an UPGRADED event. Errors: durabletype.ErrVersionMismatch
// (the run is at another version than from), durabletype.ErrRunSettled, an
// *UpgradeError (the run failed, its on-failure handler runs, or a step it
// has not finished cannot run the same way in to).
func (r *Run) Upgrade(from string, to *durabletype.Shape, now time.Time) (Effects, error) {
	r.begin()
	if r.Rec.Version != from {
		return r.end(), durabletype.ErrVersionMismatch
	}
	n := r.Shape.Len()
	bad := func(reason string) error {
		return &UpgradeError{From: r.Rec.Version, To: to.Version, Reason: reason}
	}
	switch {
	case r.Rec.Settled():
		return r.end(), durabletype.ErrRunSettled
	case r.Rec.Status.Unsuccessful():
		return r.end(), bad("the run failed; it settles at its version (replay it once settled, then move it)")
	case !r.Rec.Status.Allows(durabletype.ActionUpgrade):
		return r.end(), bad("a run " + string(r.Rec.Status) + " does not move to another version")
	case len(r.Tasks) > n && to.OnFailure == nil:
		// A replayed run keeps the task of the handler that ran before.
		return r.end(), bad("the run's on-failure handler ran before it was replayed, and the other version has none")
	}
	merged, err := r.upgradeShape(to)
	if err != nil {
		return r.end(), err
	}
	compiled, err := Compile(merged)
	if err != nil {
		return r.end(), fmt.Errorf("%w: version %s: %w", durabletype.ErrIncompatible, quoteVersion(to.Version), err)
	}
	detail := fmt.Sprintf("upgraded from version %s to %s", quoteVersion(r.Rec.Version), quoteVersion(to.Version))
	r.Shape = compiled
	r.Rec.Version = to.Version
	r.fx.RunChanged, r.fx.Reshaped = true, true
	if m := compiled.Len() + 1; len(r.dirty) < m {
		r.dirty = append(r.dirty, make([]bool, m-len(r.dirty))...)
	}
	// The on-failure task, if it exists, keeps its place after the steps.
	var handler []store.Task
	if len(r.Tasks) > n {
		handler = slices.Clone(r.Tasks[n:])
		r.Tasks = r.Tasks[:n]
	}
	for i := range n {
		if !r.Tasks[i].State.Terminal() {
			r.event(i, durabletype.EventUpgraded, now, detail, time.Time{})
		}
	}
	for i := n; i < compiled.Len(); i++ {
		r.Tasks = append(r.Tasks, store.Task{RunID: r.Rec.ID, Name: compiled.Name(i), Kind: compiled.Kind(i), State: durabletype.TaskPending})
		r.touch(i)
		r.fx.NewTasks = append(r.fx.NewTasks, i)
		r.event(i, durabletype.EventUpgraded, now, detail, time.Time{})
	}
	r.Tasks = append(r.Tasks, handler...)
	for i := n; i < compiled.Len(); i++ {
		r.resolve(i, now)
	}
	r.checkRun(now)
	return r.end(), nil
}
