// Package dag is the functional core of the engine: it validates workflow
// shapes and decides every state transition of a run. It does no I/O and reads
// no clock; stores load a run, apply a transition here, and persist what
// changed, atomically. Because both stores run the same decisions, a behaviour
// cannot differ between them except through persistence bugs, which the
// conformance suite catches.
package dag

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Errors of shape validation. They are wrapped in a *ShapeError naming the
// step at fault.
var (
	ErrEmptyWorkflow   = errors.New("workflow has no steps")
	ErrInvalidName     = errors.New("invalid name")
	ErrDuplicateStep   = errors.New("duplicate step name")
	ErrUnknownParent   = errors.New("parent is not an earlier step of the workflow")
	ErrDuplicateParent = errors.New("parent listed twice")
	ErrInvalidSleep    = errors.New("sleep duration must be positive")
	ErrInvalidTimeout  = errors.New("timeout must not be negative")
	ErrInvalidRetry    = errors.New("invalid retry policy")
	ErrInvalidKind     = errors.New("invalid step kind")
	ErrInvalidVersion  = errors.New("invalid version")
	ErrInvalidType     = errors.New("invalid type name")
	// ErrSkipWithoutTimeout: a waiting step is skipped on a timeout it does
	// not have. It matches ErrInvalidKind; the root package reports it as
	// the options that set it (SkipOnTimeout, WithWaitTimeout).
	ErrSkipWithoutTimeout = fmt.Errorf("%w: skip on timeout without a timeout", ErrInvalidKind)
)

// MaxTypeLen is the longest type name a shape records, in bytes.
const MaxTypeLen = 1024

// MaxNameLen is the longest workflow or step name, in bytes.
const MaxNameLen = 128

// ShapeError is a validation error of one step of a shape.
type ShapeError struct {
	Step   string // empty for errors of the whole shape
	Err    error  // one of the Err* sentinels
	Detail string // optional
}

func (e *ShapeError) Error() string {
	msg := e.Err.Error()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Step != "" {
		return "step " + Quote(e.Step) + ": " + msg
	}
	return msg
}

func (e *ShapeError) Unwrap() error { return e.Err }

// ValidName reports whether s is a valid workflow or step name: 1 to
// MaxNameLen bytes of letters, digits and "_-.:/", starting with a letter or
// digit.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '-' || c == '.' || c == ':' || c == '/'):
		default:
			return false
		}
	}
	return true
}

// MaxTenantLen is the longest tenant ID, in bytes.
const MaxTenantLen = 200

// ValidTenant reports whether s is a valid tenant ID: 1 to MaxTenantLen bytes
// of valid UTF-8 without control characters.
func ValidTenant(s string) bool { return validLabel(s, MaxTenantLen) }

// MaxWorkerLen is the longest worker ID, in bytes.
const MaxWorkerLen = 200

// ValidWorker reports whether s is a valid worker ID: 1 to MaxWorkerLen
// bytes of valid UTF-8 without control characters. Stores record it with
// every claim.
func ValidWorker(s string) bool { return validLabel(s, MaxWorkerLen) }

// ValidLabel reports whether s is 1 to maxLen bytes of valid UTF-8
// without control characters: the rule of every identifier users give
// (tenants, worker IDs, keys).
func ValidLabel(s string, maxLen int) bool { return validLabel(s, maxLen) }

func validLabel(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// CheckNewRun checks what a store records of a new run besides its shape:
// the workflow name and the tenant ID. Both stores call it before creating
// anything, so they refuse the same runs with the same errors.
func CheckNewRun(nr *store.NewRun) error {
	switch {
	case !ValidName(nr.Workflow):
		return fmt.Errorf("%w: workflow %s", durabletype.ErrInvalidRun, Quote(nr.Workflow))
	case !ValidTenant(nr.Tenant):
		return fmt.Errorf("%w: %s", durabletype.ErrInvalidTenant, Quote(nr.Tenant))
	case nr.IdempotencyKey != "" && !ValidKey(nr.IdempotencyKey):
		return fmt.Errorf("%w: idempotency key %s: use 1-%d bytes of UTF-8 without control characters",
			durabletype.ErrInvalidRun, Quote(nr.IdempotencyKey), MaxKeyLen)
	case nr.Priority < store.PriorityMin || nr.Priority > store.PriorityMax:
		return fmt.Errorf("%w: priority %d outside [%d, %d]", durabletype.ErrInvalidRun, nr.Priority, store.PriorityMin, store.PriorityMax)
	case !nr.StartAt.IsZero() && !ValidTime(nr.StartAt):
		return fmt.Errorf("%w: start time %s outside years 1-9999", durabletype.ErrInvalidRun, nr.StartAt)
	case !nr.Deadline.IsZero() && !ValidTime(nr.Deadline):
		return fmt.Errorf("%w: deadline %s outside years 1-9999", durabletype.ErrInvalidRun, nr.Deadline)
	case nr.StartAfter < 0 || nr.Timeout < 0:
		return fmt.Errorf("%w: negative start delay %s or timeout %s", durabletype.ErrInvalidRun, nr.StartAfter, nr.Timeout)
	case !ValidTraceParent(nr.TraceParent):
		return fmt.Errorf("%w: trace parent %s: use at most %d bytes of printable ASCII", durabletype.ErrInvalidRun, Quote(nr.TraceParent), MaxTraceParentLen)
	}
	return nil
}

// MaxTraceParentLen bounds NewRun.TraceParent: a W3C traceparent of
// version 00 takes 55 bytes; later versions may append fields.
const MaxTraceParentLen = 256

// ValidTraceParent reports whether s may be stored as a run's trace
// parent: empty, or at most MaxTraceParentLen bytes of printable ASCII.
// Its syntax is the propagator's business.
func ValidTraceParent(s string) bool {
	if len(s) > MaxTraceParentLen {
		return false
	}
	for i := range len(s) {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Times returns when a new run created at now starts (zero: at once) and
// its deadline (zero: none), from its absolute and relative settings.
func Times(nr *store.NewRun, now time.Time) (startAt, deadline time.Time) {
	startAt = nr.StartAt
	if nr.StartAfter > 0 {
		if at := now.Add(nr.StartAfter); at.After(startAt) {
			startAt = at
		}
	}
	deadline = nr.Deadline
	if nr.Timeout > 0 {
		if at := now.Add(nr.Timeout); deadline.IsZero() || at.Before(deadline) {
			deadline = at
		}
	}
	return Timestamp(startAt), Timestamp(deadline)
}

// SameRun reports whether a recorded run of workflow and tenant that has
// the ID of nr is the run nr asks for: creating nr again is then a
// duplicate rather than a conflict (ErrRunExists). Caller-chosen run IDs
// are idempotent this way.
func SameRun(workflow, tenant string, nr *store.NewRun) bool {
	return workflow == nr.Workflow && tenant == nr.Tenant
}

// MaxKeyLen is the longest idempotency key, in bytes.
const MaxKeyLen = 255

// ValidKey reports whether s is a valid idempotency key: 1 to MaxKeyLen
// bytes of valid UTF-8 without control characters.
func ValidKey(s string) bool { return validLabel(s, MaxKeyLen) }

// ValidateRetry checks a recorded retry policy.
func ValidateRetry(p durabletype.RetryPolicy) error {
	switch {
	case p.MaxAttempts < 1:
		return fmt.Errorf("%w: max attempts %d < 1", ErrInvalidRetry, p.MaxAttempts)
	case p.InitialDelay < 0:
		return fmt.Errorf("%w: negative initial delay", ErrInvalidRetry)
	case p.MaxDelay < 0:
		return fmt.Errorf("%w: negative max delay", ErrInvalidRetry)
	case p.Factor < 1 || math.IsInf(p.Factor, 0) || math.IsNaN(p.Factor):
		return fmt.Errorf("%w: factor %v must be a finite number >= 1", ErrInvalidRetry, p.Factor)
	case p.Jitter < 0 || p.Jitter > 1 || math.IsNaN(p.Jitter):
		return fmt.Errorf("%w: jitter %v outside [0, 1]", ErrInvalidRetry, p.Jitter)
	}
	return nil
}

// Compiled is a validated shape with its indexes built.
type Compiled struct {
	Shape    *durabletype.Shape
	index    map[string]int
	parents  [][]int
	children [][]int
}

// Compile validates a shape and indexes it. Parents must be declared before
// their children, which rules out cycles by construction. It reports every
// problem it finds, each a *ShapeError (joined with errors.Join when there
// are several).
func Compile(s *durabletype.Shape) (*Compiled, error) {
	if s == nil || len(s.Steps) == 0 {
		return nil, &ShapeError{Err: ErrEmptyWorkflow}
	}
	c := &Compiled{
		Shape:    s,
		index:    make(map[string]int, len(s.Steps)),
		parents:  make([][]int, len(s.Steps)),
		children: make([][]int, len(s.Steps)),
	}
	var errs []error
	if s.Version != "" && !ValidVersion(s.Version) {
		errs = append(errs, &ShapeError{Err: ErrInvalidVersion, Detail: Quote(s.Version) + ": use 1-64 letters, digits or _-.+ starting with a letter or digit"})
	}
	if s.Input != "" && !validLabel(s.Input, MaxTypeLen) {
		errs = append(errs, &ShapeError{Err: ErrInvalidType, Detail: "input " + Quote(s.Input)})
	}
	for i, st := range s.Steps {
		bad := func(err error, detail string) {
			errs = append(errs, &ShapeError{Step: st.Name, Err: err, Detail: detail})
		}
		switch _, dup := c.index[st.Name]; {
		case !ValidName(st.Name):
			bad(ErrInvalidName, "use 1-128 letters, digits or _-.:/ starting with a letter or digit")
		case dup:
			bad(ErrDuplicateStep, "")
		}
		if st.Sleep < 0 {
			bad(ErrInvalidSleep, st.Sleep.String())
		}
		if st.Timeout < 0 || st.QueueTimeout < 0 {
			bad(ErrInvalidTimeout, fmt.Sprintf("timeout %s, queue timeout %s", st.Timeout, st.QueueTimeout))
		}
		if err := ValidateRetry(st.Retry); err != nil {
			bad(ErrInvalidRetry, trimSentinel(err, ErrInvalidRetry))
		}
		if st.LostLimit < 0 {
			bad(ErrInvalidRetry, fmt.Sprintf("lost limit %d < 0", st.LostLimit))
		}
		if st.Output != "" && !validLabel(st.Output, MaxTypeLen) {
			bad(ErrInvalidType, "output "+Quote(st.Output))
		}
		if detail, err := checkKind(&st); err != nil {
			bad(err, detail)
		}
		seen := make(map[int]bool, len(st.Parents))
		for _, p := range st.Parents {
			pi, ok := c.index[p]
			switch {
			case !ok:
				bad(ErrUnknownParent, Quote(p))
			case seen[pi]:
				bad(ErrDuplicateParent, Quote(p))
			default:
				seen[pi] = true
				c.parents[i] = append(c.parents[i], pi)
				c.children[pi] = append(c.children[pi], i)
			}
		}
		if st.Func != nil && (len(s.Steps) != 1 || len(st.Parents) != 0) {
			bad(ErrInvalidKind, "a function's body is the only step of its shape")
		}
		if st.Map != nil && !MapsInput(st.Map) && !slices.Contains(st.Parents, st.Map.Over) {
			bad(ErrInvalidKind, "a map step's list "+Quote(st.Map.Over)+" must be one of its parents")
		}
		if _, dup := c.index[st.Name]; !dup {
			c.index[st.Name] = i
		}
	}
	if s.OnFailure != nil {
		if err := ValidateRetry(s.OnFailure.Retry); err != nil {
			errs = append(errs, &ShapeError{Step: durabletype.OnFailureTask, Err: ErrInvalidRetry, Detail: trimSentinel(err, ErrInvalidRetry)})
		}
		if s.OnFailure.LostLimit < 0 {
			errs = append(errs, &ShapeError{Step: durabletype.OnFailureTask, Err: ErrInvalidRetry, Detail: fmt.Sprintf("lost limit %d < 0", s.OnFailure.LostLimit)})
		}
	}
	switch len(errs) {
	case 0:
		return c, nil
	case 1:
		return nil, errs[0]
	}
	return nil, errors.Join(errs...)
}

func trimSentinel(err, sentinel error) string {
	msg, prefix := err.Error(), sentinel.Error()+": "
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):]
	}
	return msg
}

// Len is the number of steps.
func (c *Compiled) Len() int { return len(c.Shape.Steps) }

// Index returns the task index of a step name; the on-failure task has index
// Len().
func (c *Compiled) Index(name string) (int, bool) {
	if name == durabletype.OnFailureTask {
		return c.Len(), c.Shape.OnFailure != nil
	}
	i, ok := c.index[name]
	return i, ok
}

// Name returns the task name at index i.
func (c *Compiled) Name(i int) string {
	if i == c.Len() {
		return durabletype.OnFailureTask
	}
	return c.Shape.Steps[i].Name
}

// Kind returns the kind of task i.
func (c *Compiled) Kind(i int) durabletype.TaskKind {
	if i == c.Len() {
		return durabletype.KindOnFailure
	}
	return KindOf(&c.Shape.Steps[i])
}

// KindOf is the kind of the tasks of a step: a sleep (KindSleep), a wait
// for an event or a signal (KindEvent), a child step (KindChild), a map
// step (KindMap), a function's body (KindFunc), or code (KindStep). A shape that compiles gives a step
// one kind at most (checkKind); of a spec that sets several, the first in
// that order wins.
func KindOf(s *durabletype.StepSpec) durabletype.TaskKind {
	switch {
	case s.Sleep > 0:
		return durabletype.KindSleep
	case s.Wait != nil:
		return durabletype.KindEvent
	case s.Child != nil:
		return durabletype.KindChild
	case s.Map != nil:
		return durabletype.KindMap
	case s.Func != nil:
		return durabletype.KindFunc
	}
	return durabletype.KindStep
}

// MapsInput reports whether map step m maps over the run's input (its
// Over is empty: durable.MapInput) rather than over a parent's list.
func MapsInput(m *durabletype.MapSpec) bool { return m.Over == "" }

// Spec returns the spec of step i (i < Len()).
func (c *Compiled) Spec(i int) *durabletype.StepSpec { return &c.Shape.Steps[i] }

// checkKind checks that a step is of one kind only, and the settings of
// that kind; it returns what is wrong (a detail and ErrInvalidKind, or an
// error of its own that matches ErrInvalidKind), or a nil error.
func checkKind(st *durabletype.StepSpec) (detail string, err error) {
	n := 0
	if st.Sleep != 0 {
		n++
	}
	if st.Wait != nil {
		n++
	}
	if st.Child != nil {
		n++
	}
	if st.Map != nil {
		n++
	}
	if st.Func != nil {
		n++
	}
	if n > 1 {
		return "a step is one of a sleep, a wait, a child step, a map step and a function's body", ErrInvalidKind
	}
	switch {
	case st.Wait != nil:
		w := st.Wait
		switch {
		case w.Timeout < 0 || w.Lookback < 0:
			return fmt.Sprintf("negative wait timeout %s or lookback %s", w.Timeout, w.Lookback), ErrInvalidKind
		case w.Signal != "" && !ValidEventKey(w.Signal):
			return "signal name " + Quote(w.Signal) + ": use 1-255 bytes of UTF-8 without control characters", ErrInvalidKind
		case w.SkipOnTimeout && w.Timeout == 0:
			return "", ErrSkipWithoutTimeout
		}
	case st.Child != nil:
		switch {
		case !ValidName(st.Child.Workflow):
			return "child workflow " + Quote(st.Child.Workflow), ErrInvalidKind
		case !ValidName(st.Child.Result):
			return "child result step " + Quote(st.Child.Result), ErrInvalidKind
		}
	case st.Map != nil:
		if !MapsInput(st.Map) && !ValidName(st.Map.Over) {
			return "map over " + Quote(st.Map.Over), ErrInvalidKind
		}
	}
	return "", nil
}

// Retry returns the retry policy of task i.
func (c *Compiled) Retry(i int) durabletype.RetryPolicy {
	if i == c.Len() {
		return c.Shape.OnFailure.Retry
	}
	return c.Shape.Steps[i].Retry
}

// LostLimit returns how many attempts of task i in a row may lose their
// worker before it fails (durabletype.StepSpec.LostLimit, or its default).
func (c *Compiled) LostLimit(i int) int {
	n := 0
	if i == c.Len() {
		n = c.Shape.OnFailure.LostLimit
	} else {
		n = c.Shape.Steps[i].LostLimit
	}
	if n <= 0 {
		return durabletype.DefaultLostLimit
	}
	return n
}

// Timeout returns the attempt timeout of task i (0: none).
func (c *Compiled) Timeout(i int) time.Duration {
	if i == c.Len() {
		return 0
	}
	return c.Shape.Steps[i].Timeout
}

// QueueTimeout returns the queue timeout of task i (0: none).
func (c *Compiled) QueueTimeout(i int) time.Duration {
	if i == c.Len() {
		return 0
	}
	return c.Shape.Steps[i].QueueTimeout
}

// Parents returns the parent indexes of step i.
func (c *Compiled) Parents(i int) []int {
	if i == c.Len() {
		return nil
	}
	return c.parents[i]
}

// Children returns the child indexes of step i.
func (c *Compiled) Children(i int) []int {
	if i == c.Len() {
		return nil
	}
	return c.children[i]
}

// RetryDelay returns how long to wait before the attempt after attempt
// (1-based) failed: InitialDelay·Factor^(attempt-1), capped at MaxDelay, with
// the Jitter fraction of it randomised downwards by rand in [0, 1).
func RetryDelay(p durabletype.RetryPolicy, attempt int, rand float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	factor := p.Factor
	if factor < 1 {
		factor = 1
	}
	d := float64(p.InitialDelay) * math.Pow(factor, float64(attempt-1))
	limit := float64(math.MaxInt64 / 2)
	if p.MaxDelay > 0 && d > float64(p.MaxDelay) {
		d = float64(p.MaxDelay)
	}
	if d > limit || math.IsNaN(d) {
		d = limit
	}
	if p.Jitter > 0 {
		d -= d * p.Jitter * rand
	}
	return time.Duration(d)
}
