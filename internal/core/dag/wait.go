package dag

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// MaxEventKeyLen is the longest event key or signal name, in bytes.
const MaxEventKeyLen = 255

// ValidEventKey reports whether s is a valid event key or signal name: 1
// to MaxEventKeyLen bytes of valid UTF-8 without control characters.
func ValidEventKey(s string) bool { return validLabel(s, MaxEventKeyLen) }

// CheckEvents checks events to send: both stores refuse the same events
// with the same errors, before recording anything.
func CheckEvents(evs []store.EventMessage) error {
	for k := range evs {
		e := &evs[k]
		if err := TenantRule.Check("tenant", e.Tenant); err != nil {
			return fmt.Errorf("%w: event %d: %w", durabletype.ErrInvalidEvent, k, err)
		}
		if err := EventKeyRule.Check("key", e.Key); err != nil {
			return fmt.Errorf("event %d: %w", k, err)
		}
	}
	return nil
}

// CheckSignal checks the name of a signal to send.
func CheckSignal(name string) error { return SignalRule.Check("signal name", name) }

// signalMark starts the wait key of a task waiting for a signal. Event keys
// have no control characters, so no event key is ever a signal's.
const signalMark = "\x01"

// SignalKey returns the wait key (store.Task.WaitKey) and the message key
// of the signal named name: stores keep events and signals apart by it.
func SignalKey(name string) string { return signalMark + name }

// ParseWaitKey tells what a wait key waits for: an event with key key, or
// (signal) the signal named key.
func ParseWaitKey(wk string) (key string, signal bool) {
	if k, ok := strings.CutPrefix(wk, signalMark); ok {
		return k, true
	}
	return wk, false
}

// childNamespace seeds the hash of child run IDs.
var childNamespace = uuid.MustParse("5b4bd0f6-2f69-4b8e-9f0e-2f5d6f1c8a11")

// ChildID returns the ID of the child run that the attempt of step holding
// claim token of run parent, claimed at started, starts: the same attempt
// always starts the same child, so that an outcome recorded twice never
// starts two. It is laid out as a UUIDv7 (RFC 9562): its first 48 bits are
// started in Unix milliseconds, the rest a hash of parent, step and token,
// so that child runs sort by time like the runs triggered with new IDs, and
// their keys land at the end of the runs' indexes rather than anywhere.
func ChildID(parent uuid.UUID, step string, token int64, started time.Time) uuid.UUID {
	b := make([]byte, 0, 16+len(step)+9)
	b = append(b, parent[:]...)
	b = append(b, step...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(token))
	return TimeOrderedID(uuid.NewHash(sha1.New(), childNamespace, b, 5), started)
}

// TimeOrderedID returns h laid out as a UUIDv7 for the time at: at's Unix
// milliseconds in the first 48 bits, version 7, the RFC 4122 variant, and
// the rest of h's bits, so that a hash that names something once (a child
// run, a schedule's slot) sorts by its time.
func TimeOrderedID(h uuid.UUID, at time.Time) uuid.UUID {
	ms := uint64(max(at.UnixMilli(), 0))
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[:8], ms<<16)
	copy(id[6:], h[6:])
	id[6] = 0x70 | id[6]&0x0f
	id[8] = 0x80 | id[8]&0x3f
	return id
}

// CheckChild checks the run a child step asks to start (store.Outcome's
// Child) as far as it can be checked before its tenant and ID are known.
func CheckChild(nr *store.NewRun) error {
	if nr == nil {
		return fmt.Errorf("%w: no child run", durabletype.ErrInvalidRun)
	}
	if !ValidName(nr.Workflow) {
		return fmt.Errorf("%w: child workflow %s", durabletype.ErrInvalidRun, Quote(nr.Workflow))
	}
	if _, err := Compile(nr.Shape); err != nil {
		return fmt.Errorf("%w: child of workflow %s: %w", durabletype.ErrInvalidRun, Quote(nr.Workflow), err)
	}
	return nil
}

// WaitQuery says what a task that began waiting for an event or a signal
// may receive at once from the messages a store keeps: the first event of
// Tenant with Key sent at or after Since, or the first signal of Run with
// Key (Signal).
type WaitQuery struct {
	I      int
	Signal bool
	Run    uuid.UUID
	Tenant string
	Key    string
	Since  time.Time
	// Skip is how many of the first messages the query passes over: those
	// the wait refused already (their payload did not fit).
	Skip int
}

// MaxSkips is the most kept messages a wait that begins passes over
// because it refused their payloads: past it, it waits for new ones.
const MaxSkips = 100

// WaitQuery returns the query of task i, which began waiting at now.
func (r *Run) WaitQuery(i int, now time.Time) WaitQuery {
	t := r.Task(i)
	q := WaitQuery{I: i, Run: r.Rec.ID, Tenant: r.Rec.Tenant, Key: t.WaitKey}
	if _, sig := ParseWaitKey(t.WaitKey); sig {
		q.Signal = true
		return q
	}
	var lookback time.Duration
	if r.Shape.IsFunc(i) {
		if j, ok := r.awaited(i); ok {
			lookback = metaOf(r.Task(j)).Lookback
		}
	} else {
		lookback = r.Shape.Spec(i).Wait.Lookback
	}
	q.Since = Timestamp(now.Add(-lookback))
	return q
}

// wait makes task i WAITING, with detail saying for what in its WAITING
// event, and a due time (zero: none).
func (r *Run) wait(i int, now time.Time, detail string, due time.Time) {
	t := r.Task(i)
	t.State = durabletype.TaskWaiting
	t.Worker = ""
	t.DueAt = due
	if t.Kind != durabletype.KindChild {
		// A child step's attempt timeout spans its wait; nothing else
		// times out while waiting but by its own due time.
		t.TimeoutAt = time.Time{}
	}
	if !due.IsZero() || !t.TimeoutAt.IsZero() {
		r.fx.Timer = true
	}
	r.touch(i)
	r.event(i, durabletype.EventWaiting, now, detail, due)
}

// beginWait makes the event step i wait for the event with key key, or for
// its signal.
func (r *Run) beginWait(i int, key string, now time.Time) {
	spec := r.Shape.Spec(i).Wait
	t := r.Task(i)
	detail := ""
	if spec.Signal != "" {
		t.WaitKey = SignalKey(spec.Signal)
		detail = "signal " + Quote(spec.Signal)
	} else {
		if !ValidEventKey(key) {
			r.fail(i, Text(fmt.Sprintf("invalid event key %s: use 1-%d bytes of UTF-8 without control characters",
				Quote(key), MaxEventKeyLen)), true, 0, now)
			return
		}
		t.WaitKey = key
		detail = "event " + Quote(key)
	}
	var due time.Time
	if spec.Timeout > 0 {
		due = Timestamp(now.Add(spec.Timeout))
	}
	r.wait(i, now, detail, due)
	r.fx.Waits = append(r.fx.Waits, i)
}

// spawn makes the child step i start nr as its child run and wait for it.
func (r *Run) spawn(i int, nr *store.NewRun, now time.Time) {
	t := r.Task(i)
	spec := r.Shape.Spec(i).Child
	if err := CheckChild(nr); err != nil {
		r.fail(i, Text(err.Error()), true, 0, now)
		return
	}
	if nr.Workflow != spec.Workflow {
		r.fail(i, Text(fmt.Sprintf("the step starts a run of workflow %s, its shape says %s",
			Quote(nr.Workflow), Quote(spec.Workflow))), true, 0, now)
		return
	}
	child := store.NewRun{
		ID: ChildID(r.Rec.ID, t.Name, t.Token, t.StartedAt), Workflow: nr.Workflow, Tenant: r.Rec.Tenant, Input: nr.Input,
		Shape: nr.Shape, Keys: nr.Keys, Priority: r.Rec.Priority,
		Parent:      &durabletype.ParentRef{RunID: r.Rec.ID, Step: t.Name, Result: spec.Result},
		TraceParent: nr.TraceParent,
	}
	t.Child = child.ID
	r.wait(i, now, "child run "+child.ID.String(), time.Time{})
	r.fx.Spawned = append(r.fx.Spawned, child)
}

// abandon ends the wait of WAITING task i for another reason than what it
// waited for (its run cancelled or failed, an attempt timed out): a child
// run is cancelled, the unfinished items of a map step are.
func (r *Run) abandon(i int, now time.Time, reason string) {
	t := r.Task(i)
	if t.State != durabletype.TaskWaiting {
		return
	}
	switch t.Kind {
	case durabletype.KindChild:
		if t.Child != uuid.Nil {
			r.fx.Outbox = append(r.fx.Outbox, Message{Kind: MsgCancel, Run: t.Child, Error: Text("parent " + reason)})
		}
	case durabletype.KindMap:
		r.cancelItems(i, now, reason)
	}
}

// Deliver completes task i, which waits for an event or a signal since the
// claim holding token, with payload as its output. It does nothing (false)
// when the task no longer waits under that claim.
func (r *Run) Deliver(i int, token int64, payload []byte, now time.Time) (Effects, bool) {
	r.begin()
	ok := r.deliver(i, token, payload, now)
	if ok {
		r.checkRun(now)
	}
	return r.end(), ok
}

func (r *Run) deliver(i int, token int64, payload []byte, now time.Time) bool {
	if r.Shape.IsFunc(i) {
		return r.deliverFunc(i, token, payload, now)
	}
	t := r.Task(i)
	if t.State != durabletype.TaskWaiting || t.Kind != durabletype.KindEvent || t.Token != token || !r.wanted(i) {
		return false
	}
	if w := r.Shape.Spec(i).Wait; w != nil && w.Payload != nil {
		if err := CheckPayload(w.Payload, payload); err != nil {
			r.refuse(i, err.Error(), w.Payload, now)
			return false
		}
	}
	t.DueAt = time.Time{}
	r.complete(i, payload, now)
	return true
}

// refuse records that waiting task i refused a payload for reason, which
// cannot be read as t, the type it awaits: a WAITING event saying so (the
// task waits on), and a refusal for the caller that sent it.
func (r *Run) refuse(i int, reason string, t *durabletype.JSONType, now time.Time) {
	task := r.Task(i)
	key, sig := ParseWaitKey(task.WaitKey)
	what := "event " + Quote(key)
	if sig {
		what = "signal " + Quote(key)
	}
	r.event(i, durabletype.EventWaiting, now, fmt.Sprintf("%s %s: %s; still waiting", RefusedDetail, what, reason), task.DueAt)
	r.fx.Refused = append(r.fx.Refused, durabletype.Refusal{RunID: r.Rec.ID, Step: task.Name, Reason: Text(reason), Expected: t})
}

// RefusedDetail starts the detail of the WAITING event that records a
// refused payload.
const RefusedDetail = "refused the payload of"

// Signal delivers the signal named name with payload to every task of the
// run waiting for it. It fails with ErrRunSettled for a settled run.
func (r *Run) Signal(name string, payload []byte, now time.Time) (Effects, error) {
	r.begin()
	if r.Rec.Settled() {
		return r.end(), durabletype.ErrRunSettled
	}
	key := SignalKey(name)
	for i := range r.Shape.Len() {
		if t := &r.Tasks[i]; t.State == durabletype.TaskWaiting && t.WaitKey == key {
			r.deliver(i, t.Token, payload, now)
		}
	}
	r.checkRun(now)
	return r.end(), nil
}

// MessageKind is the kind of a Message.
type MessageKind int

const (
	// MsgEvent delivers an event to a task waiting for it.
	MsgEvent MessageKind = iota + 1
	// MsgChild tells the task waiting for a child run that it settled.
	MsgChild
	// MsgCancel cancels a run whose parent gave it up.
	MsgCancel
)

// Message is what one run's transition (or a sent event) leaves for
// another run: stores write it in the same atomic unit as the transition
// and apply it to its run later (Run.Apply), in a transition of its own, so
// that no transition ever locks two runs that wait for each other.
type Message struct {
	Kind MessageKind
	// Run is the run it is for.
	Run uuid.UUID
	// Step is the task it is for (MsgEvent, MsgChild).
	Step string
	// Token is the claim under which the task waits (MsgEvent).
	Token int64
	// Child, Status, Result and ResultState describe the child run that
	// settled (MsgChild): its status, its result step and that step's
	// state; Error is its failure (or, for MsgCancel, the reason).
	Child       uuid.UUID
	Status      durabletype.RunStatus
	Result      string
	ResultState durabletype.TaskState
	Error       string
	// Payload is the event's payload (MsgEvent) or the child's result
	// output (MsgChild; stores fill it in from the result task).
	Payload []byte
}

// Apply applies a message to its run. It reports whether it changed
// anything: a message for a task that no longer waits for it, or a
// cancellation of a settled run, does nothing. The retry jitter of a child
// step whose child failed comes from the message (its child's ID), so that
// every store applying it computes the same delay.
func (r *Run) Apply(m *Message, now time.Time) (Effects, bool) {
	switch m.Kind {
	case MsgEvent:
		i, ok := r.Shape.Index(m.Step)
		if !ok || i >= len(r.Tasks) {
			return Effects{}, false
		}
		return r.Deliver(i, m.Token, m.Payload, now)
	case MsgChild:
		if body, seq, _, ok := ParseRecord(m.Step); ok {
			b, ok := r.Shape.Index(body)
			if !ok || !r.Shape.IsFunc(b) || b >= len(r.Tasks) {
				return Effects{}, false
			}
			j, ok := r.recordOf(b, seq)
			if !ok || r.Task(j).Name != m.Step {
				return Effects{}, false
			}
			return r.recordChildSettled(b, j, m, now)
		}
		i, ok := r.Shape.Index(m.Step)
		if !ok || i >= r.Shape.Len() {
			return Effects{}, false
		}
		return r.childSettled(i, m, unitFloat(m.Child), now)
	case MsgCancel:
		fx, err := r.Cancel(m.Error, now)
		return fx, err == nil
	}
	return Effects{}, false
}

// childSettled applies the settlement of the child run of task i: its
// result step's output becomes the task's output (the task is skipped when
// the result step was skipped); a failed or cancelled child fails the
// attempt, retried per the step's policy with a new child.
func (r *Run) childSettled(i int, m *Message, rand float64, now time.Time) (Effects, bool) {
	r.begin()
	t := &r.Tasks[i]
	if t.State != durabletype.TaskWaiting || t.Kind != durabletype.KindChild || t.Child != m.Child || !r.wanted(i) {
		return r.end(), false
	}
	switch {
	case m.Status.Settled() && !m.Status.Unsuccessful():
		if m.ResultState == durabletype.TaskCompleted {
			r.complete(i, m.Payload, now)
		} else {
			r.finish(i, durabletype.TaskSkipped, now)
			r.event(i, durabletype.EventSkipped, now, fmt.Sprintf("the result step %s of child run %s was %s",
				Quote(m.Result), m.Child, strings.ToLower(string(m.ResultState))), time.Time{})
			r.resolveChildren(i, now)
		}
	case m.Status.Unsuccessful():
		msg := fmt.Sprintf("child run %s %s", m.Child, strings.ToLower(string(m.Status)))
		if m.Error != "" {
			msg += ": " + m.Error
		}
		r.fail(i, Text(msg), false, rand, now)
	default:
		return r.end(), false
	}
	r.checkRun(now)
	return r.end(), true
}

// unitFloat maps an ID to a number in [0, 1).
func unitFloat(id uuid.UUID) float64 {
	return float64(binary.BigEndian.Uint64(id[8:])>>11) / (1 << 53)
}

// settledMessage is the message a child run that settled leaves for its
// parent.
func (r *Run) settledMessage() Message {
	p := r.Rec.Parent
	m := Message{Kind: MsgChild, Run: p.RunID, Step: p.Step, Child: r.Rec.ID, Status: r.Rec.Status, Result: p.Result}
	if i, ok := r.Shape.Index(p.Result); ok && i < r.Shape.Len() {
		m.ResultState = r.Tasks[i].State
		m.Payload = r.Tasks[i].Output
	}
	switch {
	case r.Rec.FailedStep != "":
		m.Error = Text(fmt.Sprintf("step %s failed: %s", Quote(r.Rec.FailedStep), r.Rec.Error))
	default:
		m.Error = r.Rec.Error
	}
	return m
}

// timeOutWait ends the wait of event step i at its due time: it fails the
// step without retry, or skips it (WaitSpec.SkipOnTimeout).
func (r *Run) timeOutWait(i int, now time.Time) {
	t := &r.Tasks[i]
	spec := r.Shape.Spec(i).Wait
	key, sig := ParseWaitKey(t.WaitKey)
	what := "event " + Quote(key)
	if sig {
		what = "signal " + Quote(key)
	}
	msg := fmt.Sprintf("no %s within %s", what, spec.Timeout)
	t.DueAt = time.Time{}
	if spec.SkipOnTimeout {
		r.finish(i, durabletype.TaskSkipped, now)
		r.event(i, durabletype.EventSkipped, now, msg, time.Time{})
		r.resolveChildren(i, now)
		return
	}
	r.fail(i, Text(msg), true, 0, now)
}
