package dag

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Durable functions (docs/workflows.md, "Durable functions").
//
// A function's shape has one step, its body (KindFunc). Each call the body
// makes (a step run inline, a sleep, a wait for an event or a signal, a
// child run, a patch marker) is recorded as an item of the body task: a
// record, named RecordName(body, seq, name), whose number is the call's
// place among the body's calls. Records are passive: no record is ever
// queued, claimed or given a timer. Whatever the body waits for is the
// body task's own state, so that the timers, event keys, signals and
// child settlements of steps serve it unchanged:
//
//   - a sleep: the body SLEEPING until the sleep's end;
//   - a step's retry: the body QUEUED until the retry's time, as a
//     retry backoff is;
//   - an event or a signal: the body WAITING with the wait's key, its
//     timeout as its due time;
//   - child runs: the body WAITING, Left counting the child runs it still
//     waits for (1 for the first of several).
//
// The record of a sleep or a wait the body waits on is its one record
// open of those kinds (awaited), and Items counts its records still open (a sleep, a wait, a child run
// not finished): when the body finishes, those are cancelled, child runs
// with them. What ends a wait resumes the body: it is queued again, and
// its code runs again from the start, every call it made answering from
// its record.

// MaxRecords is the most calls one run of a function may record.
const MaxRecords = MaxItems

// RecordName returns the task name of the record of call seq, named name,
// of the body step body: "~body[seq:name]".
func RecordName(body string, seq int, name string) string {
	return itemPrefix + body + "[" + strconv.Itoa(seq) + ":" + name + "]"
}

// ParseRecord returns the body step, the number and the call's name of a
// record's task name.
func ParseRecord(name string) (body string, seq int, call string, ok bool) {
	body, seq, ok = ParseItem(name)
	if !ok {
		return "", 0, "", false
	}
	inner := name[strings.LastIndexByte(name, '[')+1 : len(name)-1]
	_, call, ok = strings.Cut(inner, ":")
	return body, seq, call, ok
}

// recordMeta is what a record keeps of its call besides its outcome, in
// its Input: what the body waits for when it waits on it.
type recordMeta struct {
	Patch    bool          `json:"patch,omitempty"`
	Due      time.Time     `json:"due,omitzero"`
	Key      string        `json:"key,omitempty"`
	Signal   bool          `json:"signal,omitempty"`
	Timeout  time.Duration `json:"timeout,omitempty"`
	Lookback time.Duration `json:"lookback,omitempty"`
	Result   string        `json:"result,omitempty"`
	// Payload describes the type a wait awaits (store.Record.Payload).
	Payload *durabletype.JSONType `json:"payload,omitempty"`
}

func metaOf(t *store.Task) recordMeta {
	var m recordMeta
	if len(t.Input) > 0 {
		_ = json.Unmarshal(t.Input, &m) // the core wrote it
	}
	return m
}

// RetryDue returns when the step of record t, which failed, runs again
// (zero for a record that does not wait for a retry).
func RetryDue(t *store.Task) time.Time {
	if t == nil || t.Kind != durabletype.KindStep || t.State != durabletype.TaskPending {
		return time.Time{}
	}
	return metaOf(t).Due
}

// RecordedDue returns when the sleep of record t ends, when its wait
// times out or when its step runs again (zero for none).
func RecordedDue(t *store.Task) time.Time { return metaOf(t).Due }

// IsPatch reports whether record t records a patch marker.
func IsPatch(t *store.Task) bool { return metaOf(t).Patch }

// RecordedWait returns what the KindEvent record t waits (or waited) for:
// an event key, or a signal's name.
func RecordedWait(t *store.Task) (key string, signal bool) {
	m := metaOf(t)
	return m.Key, m.Signal
}

// IsFunc reports whether step m of the shape is a function's body.
func (c *Compiled) IsFunc(m int) bool { return m < c.Len() && c.Kind(m) == durabletype.KindFunc }

// allRecords returns the indexes of every record of body m by number,
// loading them the first time (LoadItems).
func (r *Run) allRecords(m int) map[int]int {
	r.loadAll(m, "records")
	return r.loadedOf(m)
}

// CheckRecords checks the records a function's worker reports, as far as
// they can be checked apart from the run: both stores refuse the same.
func CheckRecords(o *store.Outcome) error {
	for k := range o.Records {
		rec := &o.Records[k]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: record %d: %s", durabletype.ErrInvalidOutcome, k, fmt.Sprintf(format, args...))
		}
		switch {
		case rec.Seq < 0 || rec.Seq >= MaxRecords:
			return bad("call number %d outside [0, %d)", rec.Seq, MaxRecords)
		case !ValidName(rec.Name):
			return bad("call name %s: use 1-128 letters, digits or _-.:/ starting with a letter or digit", Quote(rec.Name))
		}
		switch rec.Kind {
		case durabletype.KindStep:
			switch rec.State {
			case durabletype.TaskCompleted, durabletype.TaskFailed, durabletype.TaskPending:
			default:
				return bad("a step's record is COMPLETED, FAILED or PENDING, not %s", Quote(string(rec.State)))
			}
			if rec.After < 0 {
				return bad("negative retry delay %s", rec.After)
			}
		case durabletype.KindSleep:
			if rec.After <= 0 || !ValidTime(time.Unix(0, 0).Add(rec.After)) {
				return bad("sleep of %s: it must be positive", rec.After)
			}
		case durabletype.KindEvent:
			if !ValidEventKey(rec.Key) {
				return bad("event key or signal name %s: use 1-%d bytes of UTF-8 without control characters", Quote(rec.Key), MaxEventKeyLen)
			}
			if rec.Timeout < 0 || rec.Lookback < 0 {
				return bad("negative wait timeout %s or lookback %s", rec.Timeout, rec.Lookback)
			}
		case durabletype.KindChild:
			if err := CheckChild(rec.Child); err != nil {
				return bad("%v", err)
			}
			if !ValidName(rec.Result) {
				return bad("child result step %s", Quote(rec.Result))
			}
		default:
			return bad("kind %s is not a call", Quote(string(rec.Kind)))
		}
		if (rec.Kind == durabletype.KindSleep || rec.Kind == durabletype.KindEvent) &&
			(o.Kind != store.OutcomeSuspend || !slices.Contains(o.Await, rec.Seq)) {
			// The body waits for its sleep or wait at once, alone: at most
			// one such record is ever open (awaited).
			return bad("a sleep or a wait is recorded with the suspension that waits for it")
		}
	}
	for _, seq := range o.Await {
		if seq < 0 || seq >= MaxRecords {
			return fmt.Errorf("%w: awaits call %d outside [0, %d)", durabletype.ErrInvalidOutcome, seq, MaxRecords)
		}
	}
	return nil
}

// HasRecords reports whether outcome o of a body records calls: a store
// then loads every record of the body with its run (SetRecords), so that
// a call recorded already is found by its number.
func HasRecords(o *store.Outcome) bool { return len(o.Records) > 0 }

// SetRecords makes every record of body m, as stored, available to the
// call's transitions: what a store loads for an outcome that HasRecords.
func (r *Run) SetRecords(m int, records []store.Task) error {
	if !r.Shape.IsFunc(m) {
		return fmt.Errorf("dag: run %s: step %d is not a function's body", r.Rec.ID, m)
	}
	if _, err := r.AddItems(records); err != nil {
		return err
	}
	li := r.loaded()
	if li.full == nil {
		li.full = map[int]bool{}
	}
	li.full[m] = true
	return nil
}

// record applies the records of an outcome of body i, which holds its
// claim, and reports how many it wrote. A record already there is a
// duplicate (the same checkpoint recorded again) and is left alone, unless
// it is a step waiting to run again and the new record is of a later
// attempt, which replaces it.
func (r *Run) record(i int, recs []store.Record, now time.Time) int {
	body := r.Task(i)
	wrote := 0
	have := r.allRecords(i)
	for k := range recs {
		rec := &recs[k]
		j, ok := have[rec.Seq]
		if ok {
			t := r.Task(j)
			if _, _, name, _ := ParseRecord(t.Name); name != rec.Name || t.Kind != rec.Kind {
				// A worker that mixes histories: refused, not recorded.
				r.fail(i, Text(fmt.Sprintf("durable: call %d is recorded as %s %s, the worker reports %s %s",
					rec.Seq, t.Kind, Quote(name), rec.Kind, Quote(rec.Name))), true, 0, now)
				return wrote
			}
			if t.Kind != durabletype.KindStep || t.State != durabletype.TaskPending || rec.Attempt <= t.Attempt {
				// Recorded already: a duplicate (a step waiting to run
				// again is replaced only by a later attempt's record).
				continue
			}
		} else {
			j = r.appendItem(i, store.Task{
				RunID: r.Rec.ID, Name: RecordName(body.Name, rec.Seq, rec.Name), Kind: rec.Kind,
				State: durabletype.TaskPending, Item: rec.Seq,
			})
			r.fx.NewTasks = append(r.fx.NewTasks, j)
			have[rec.Seq] = j
		}
		r.recordCall(i, j, rec, now)
		wrote++
	}
	slices.Sort(r.fx.NewTasks)
	return wrote
}

// recordCall writes call rec into record j of body i.
func (r *Run) recordCall(i, j int, rec *store.Record, now time.Time) {
	t := r.Task(j)
	body := r.Task(i)
	meta := recordMeta{Patch: rec.Patch}
	t.StartedAt = now
	t.Attempt = rec.Attempt
	r.touch(j)
	switch rec.Kind {
	case durabletype.KindStep:
		if s := rec.Started; !s.IsZero() && ValidTime(s) && s.Before(now) {
			t.StartedAt = Timestamp(s) // for display only: the worker's clock
		}
		switch rec.State {
		case durabletype.TaskCompleted:
			t.Output, t.Error = rec.Output, ""
			r.finish(j, durabletype.TaskCompleted, now)
			r.event(j, durabletype.EventCompleted, now, "", time.Time{})
		case durabletype.TaskFailed:
			t.Error = Text(rec.Error)
			r.finish(j, durabletype.TaskFailed, now)
			r.event(j, durabletype.EventFailed, now, t.Error, time.Time{})
		default: // to run again at DueAt
			t.Error = Text(rec.Error)
			t.State = durabletype.TaskPending
			meta.Due = Timestamp(now.Add(rec.After))
			r.event(j, durabletype.EventRetrying, now, t.Error, meta.Due)
		}
	case durabletype.KindSleep:
		meta.Due = Timestamp(now.Add(rec.After))
		t.State = durabletype.TaskSleeping
		body.Items++
		r.event(j, durabletype.EventSleeping, now, "", meta.Due)
	case durabletype.KindEvent:
		meta.Key, meta.Signal, meta.Timeout, meta.Lookback, meta.Payload = rec.Key, rec.Signal, rec.Timeout, rec.Lookback, rec.Payload
		t.State = durabletype.TaskWaiting
		body.Items++
		what := "event " + Quote(rec.Key)
		if rec.Signal {
			what = "signal " + Quote(rec.Key)
		}
		var due time.Time
		if rec.Timeout > 0 {
			due = Timestamp(now.Add(rec.Timeout))
		}
		meta.Due = due
		r.event(j, durabletype.EventWaiting, now, what, due)
	case durabletype.KindChild:
		meta.Result = rec.Result
		nr := rec.Child
		child := store.NewRun{
			ID: ChildID(r.Rec.ID, t.Name, body.Token, body.StartedAt), Workflow: nr.Workflow, Tenant: r.Rec.Tenant, Input: nr.Input,
			Shape: nr.Shape, Keys: nr.Keys, Priority: r.Rec.Priority,
			Parent:      &durabletype.ParentRef{RunID: r.Rec.ID, Step: t.Name, Result: rec.Result},
			TraceParent: nr.TraceParent,
		}
		t.Child = child.ID
		t.State = durabletype.TaskWaiting
		body.Items++
		r.event(j, durabletype.EventWaiting, now, "child run "+child.ID.String(), time.Time{})
		r.fx.Spawned = append(r.fx.Spawned, child)
	}
	if meta != (recordMeta{}) {
		t.Input, _ = json.Marshal(meta)
	}
	if rec.Kind != durabletype.KindStep {
		r.touch(i) // its count of open records changed
	}
}

// suspend makes body i, whose claim ends, wait for the records await
// names: all of them, or the first to finish (any). What it waits for is
// the body's own state (see the comment at the top of this file); a body
// whose wait is over already is queued again at once.
func (r *Run) suspend(i int, await []int, any bool, now time.Time) {
	body := r.Task(i)
	have := r.allRecords(i)
	body.Worker = ""
	body.Left = 0
	var open, children, retries []int
	for _, seq := range await {
		j, ok := have[seq]
		if !ok {
			r.fail(i, Text(fmt.Sprintf("durable: the function waits for call %d, which it never made", seq)), true, 0, now)
			return
		}
		if t := r.Task(j); !t.State.Terminal() && t.State != durabletype.TaskPending || t.State == durabletype.TaskPending && !metaOf(t).Due.IsZero() {
			open = append(open, j)
			switch t.Kind {
			case durabletype.KindChild:
				children = append(children, j)
			case durabletype.KindStep:
				retries = append(retries, j)
			}
		}
	}
	switch {
	case len(open) == 0 || any && len(open) < len(await):
		r.resume(i, now, "")
		return
	case len(children) == len(open):
		body.Left = len(open)
		if any {
			body.Left = 1
		}
		body.WaitKey = ""
		r.wait(i, now, fmt.Sprintf("%d child runs", body.Left), time.Time{})
		return
	case len(retries)+len(children) == len(open):
		// Steps to retry (and maybe child runs): the body waits for the
		// first retry's time; it waits for the rest when it runs again.
		due := time.Time{}
		for _, j := range retries {
			if d := metaOf(r.Task(j)).Due; due.IsZero() || d.Before(due) {
				due = d
			}
		}
		body.State = durabletype.TaskQueued
		body.TimeoutAt = time.Time{}
		body.DueAt = due
		r.touch(i)
		r.fx.Timer = true
		r.event(i, durabletype.EventQueued, now, fmt.Sprintf("retry of %d calls", len(retries)), due)
		return
	case len(open) > 1:
		r.fail(i, Text("durable: a function waits for one sleep or wait at a time, alone"), true, 0, now)
		return
	}
	t := r.Task(open[0])
	m := metaOf(t)
	switch t.Kind {
	case durabletype.KindSleep:
		body.State = durabletype.TaskSleeping
		body.DueAt = m.Due
		body.StartedAt = now
		r.touch(i)
		r.fx.Timer = true
		r.event(i, durabletype.EventSleeping, now, "call "+DisplayName(t.Name), m.Due)
	case durabletype.KindEvent:
		body.WaitKey = m.Key
		if m.Signal {
			body.WaitKey = SignalKey(m.Key)
		}
		r.wait(i, now, "call "+DisplayName(t.Name), m.Due)
		r.fx.Waits = append(r.fx.Waits, i)
	}
}

// resume queues body i again: what it waited for is over, and its code
// runs again from the start.
func (r *Run) resume(i int, now time.Time, why string) {
	body := r.Task(i)
	body.Left = 0
	body.WaitKey = ""
	body.DueAt = time.Time{}
	detail := "resumed"
	if why != "" {
		detail += ": " + why
	}
	r.enqueue(i, now, detail)
}

// closeRecord counts record j of body i finished. A queued body is left
// alone: it may be claimed meanwhile by a claim that takes no lock of its
// run (pgstore's claims are decided in SQL, and a transition learns of
// them only when it dequeues the task), so writing it back would undo the
// claim and leave the body queued with no ready row, never run again
// (seen in the crash proof of functions: a child run settled while its
// parent's body, resumed by an event, was being claimed). Its count then
// stays above the records open, which costs closeRecords a look at them.
func (r *Run) closeRecord(i int) {
	body := r.Task(i)
	if body.State == durabletype.TaskQueued {
		return
	}
	if body.Items > 0 {
		body.Items--
	}
	r.touch(i)
}

// awaited returns the record of the sleep or the wait body i waits on:
// its one record open of those kinds (a body makes such a call and waits
// on it at once, until it is over).
func (r *Run) awaited(i int) (int, bool) {
	found, at := -1, 0
	for seq, j := range r.allRecords(i) {
		t := r.Task(j)
		if t.State == durabletype.TaskSleeping && t.Kind == durabletype.KindSleep || t.State == durabletype.TaskWaiting && t.Kind == durabletype.KindEvent {
			if found < 0 || seq < found {
				found, at = seq, j
			}
		}
	}
	return at, found >= 0
}

// recordOf returns the record of call seq of body i, loading the body's
// records if need be.
func (r *Run) recordOf(i, seq int) (int, bool) {
	if j, ok := r.ItemIndex(i, seq); ok {
		return j, true
	}
	j, ok := r.allRecords(i)[seq]
	return j, ok
}

// wakeFunc fires the due timer of body i: a sleep ends, a wait times out.
// (A retry's timer is a backoff's: the body is queued.)
func (r *Run) wakeFunc(i int, now time.Time) bool {
	body := r.Task(i)
	j, ok := r.awaited(i)
	if !ok {
		return false
	}
	t := r.Task(j)
	switch {
	case body.State == durabletype.TaskSleeping && t.State == durabletype.TaskSleeping:
		r.finish(j, durabletype.TaskCompleted, now)
		r.event(j, durabletype.EventWoken, now, "", time.Time{})
		r.closeRecord(i)
		r.resume(i, now, "call "+DisplayName(t.Name)+" woke")
	case body.State == durabletype.TaskWaiting && t.State == durabletype.TaskWaiting && t.Kind == durabletype.KindEvent:
		m := metaOf(t)
		what := "event " + Quote(m.Key)
		if m.Signal {
			what = "signal " + Quote(m.Key)
		}
		t.Error = Text(fmt.Sprintf("%s: no %s within %s", WaitTimeoutText, what, m.Timeout))
		r.finish(j, durabletype.TaskFailed, now)
		r.event(j, durabletype.EventFailed, now, t.Error, time.Time{})
		r.closeRecord(i)
		r.resume(i, now, "call "+DisplayName(t.Name)+" timed out")
	default:
		return false
	}
	return true
}

// WaitTimeoutText starts the error of a function's wait that timed out.
const WaitTimeoutText = "wait timed out"

// deliverFunc completes the wait of body i, which waits for an event or
// a signal since the claim holding token, with payload.
func (r *Run) deliverFunc(i int, token int64, payload []byte, now time.Time) bool {
	body := r.Task(i)
	if body.State != durabletype.TaskWaiting || body.WaitKey == "" || body.Token != token || !r.wanted(i) {
		return false
	}
	j, ok := r.awaited(i)
	if !ok {
		return false
	}
	t := r.Task(j)
	if t.State != durabletype.TaskWaiting || t.Kind != durabletype.KindEvent {
		return false
	}
	if m := metaOf(t); m.Payload != nil {
		if err := CheckPayload(m.Payload, payload); err != nil {
			r.refuse(i, err.Error(), m.Payload, now)
			return false
		}
	}
	t.Output = payload
	r.finish(j, durabletype.TaskCompleted, now)
	r.event(j, durabletype.EventCompleted, now, "", time.Time{})
	r.closeRecord(i)
	r.resume(i, now, "call "+DisplayName(t.Name)+" received")
	return true
}

// recordChildSettled applies the settlement of the child run of record j
// of body i: the record completes with the child's result (or is
// skipped, when the result step was), or fails with the child's failure;
// the body, when it waits for child runs, counts one less.
func (r *Run) recordChildSettled(i, j int, m *Message, now time.Time) (Effects, bool) {
	r.begin()
	t := r.Task(j)
	if t.State != durabletype.TaskWaiting || t.Kind != durabletype.KindChild || t.Child != m.Child {
		return r.end(), false
	}
	switch {
	case m.Status.Settled() && !m.Status.Unsuccessful():
		if m.ResultState == durabletype.TaskCompleted {
			t.Output = m.Payload
			r.finish(j, durabletype.TaskCompleted, now)
			r.event(j, durabletype.EventCompleted, now, "", time.Time{})
		} else {
			t.Error = Text(fmt.Sprintf("the result step %s of child run %s was %s",
				Quote(m.Result), m.Child, strings.ToLower(string(m.ResultState))))
			r.finish(j, durabletype.TaskSkipped, now)
			r.event(j, durabletype.EventSkipped, now, t.Error, time.Time{})
		}
	case m.Status.Unsuccessful():
		msg := fmt.Sprintf("child run %s %s", m.Child, strings.ToLower(string(m.Status)))
		if m.Error != "" {
			msg += ": " + m.Error
		}
		t.Error = Text(msg)
		r.finish(j, durabletype.TaskFailed, now)
		r.event(j, durabletype.EventFailed, now, t.Error, time.Time{})
	default:
		return r.end(), false
	}
	r.closeRecord(i)
	body := r.Task(i)
	if body.State == durabletype.TaskWaiting && body.WaitKey == "" && r.wanted(i) {
		body.Left--
		if body.Left <= 0 {
			r.resume(i, now, "child runs settled")
		}
	}
	r.checkRun(now)
	return r.end(), true
}

// closeRecords cancels the records of body i still open (a sleep, a wait,
// a child run it did not wait for) once the body finished or its run gave
// it up: their child runs are cancelled with them.
func (r *Run) closeRecords(i int, now time.Time, reason string) {
	body := r.Task(i)
	if body.Items <= 0 {
		return
	}
	recs := r.allRecords(i)
	seqs := make([]int, 0, len(recs))
	for seq := range recs {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		j := recs[seq]
		t := r.Task(j)
		if t.State.Terminal() || t.State == durabletype.TaskPending {
			continue
		}
		r.abandon(j, now, reason)
		r.finish(j, durabletype.TaskCancelled, now)
		r.event(j, durabletype.EventCancelled, now, reason, time.Time{})
	}
	body.Items = 0
	r.touch(i)
}

// replayFunc resets the records of body i for a replay: the first that did
// not complete (or the first call named from, when set) and every later
// one are deleted, so that the body runs them again; the records before
// keep their results. It reports false when from names no call.
func (r *Run) replayFunc(i int, from string) bool {
	recs := r.allRecords(i)
	seqs := make([]int, 0, len(recs))
	for seq := range recs {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	cut := -1
	for _, seq := range seqs {
		t := r.Task(recs[seq])
		_, _, name, _ := ParseRecord(t.Name)
		if from != "" && name == from || from == "" && t.State != durabletype.TaskCompleted {
			cut = seq
			break
		}
	}
	if from != "" && cut < 0 {
		return false
	}
	if cut >= 0 {
		for _, seq := range seqs {
			if seq >= cut {
				r.fx.Deleted = append(r.fx.Deleted, recs[seq])
			}
		}
		slices.Sort(r.fx.Deleted)
	}
	body := r.Task(i)
	body.Items, body.Left = 0, 0
	return true
}
