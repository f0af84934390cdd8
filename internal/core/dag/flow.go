package dag

// Admission: the rules of concurrency keys and rate limits, pure
// functions of what a call's transitions did (a Change) and of the per-key
// counters the driver has locked (see runner.go, which runs them).
//
// Admission happens when a task becomes claimable (Effects.Enqueued):
//
//   - Rate limit: a task whose step has a rate limit and a rate key is
//     admitted if fewer than N tasks of that key were admitted in the current
//     window (fixed windows of length Per aligned to the Unix epoch);
//     otherwise it waits durably for the next window: it stays QUEUED with a
//     due time, a timer like a retry backoff, and is admitted again when the
//     timer fires.
//   - Concurrency: a task whose step has a cap and a concurrency key holds a
//     slot of its key from its admission to the ready queue until it leaves
//     RUNNING (for good or for a wait) or leaves the queue unclaimed. When
//     the key's slots are all held it is parked instead: still QUEUED, but in
//     a per-key FIFO instead of the ready queue. Whenever a transition frees
//     slots of a key, the oldest parked tasks of the key take them first,
//     then the transition's own arrivals.
//
// The driver persists the decisions with the transition, in one atomic unit.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// MaxFlowKeyLen is the longest key a key function may return, in bytes.
const MaxFlowKeyLen = 200

// ValidFlowKey reports whether s is a valid user key: 1 to MaxFlowKeyLen bytes of
// valid UTF-8 without control characters.
func ValidFlowKey(s string) bool { return ValidLabel(s, MaxFlowKeyLen) }

// ScopedKey returns the stored key of user key k for a cap or limit declared
// on step of workflow, or on the workflow itself (step empty): keys of
// different workflows and steps never share slots. Neither workflow nor
// step names contain '@', so the form "workflow@step@key" is unambiguous.
func ScopedKey(workflow, step, k string) string {
	return workflow + "@" + step + "@" + k
}

// maxStoredKey is the longest stored key: a scope and a user key.
const maxStoredKey = 2*MaxNameLen + 2 + MaxFlowKeyLen

// CheckFlowSpec checks the cap and rate limit of a recorded step.
func CheckFlowSpec(s *durabletype.StepSpec) error {
	switch {
	case s.Concurrency < 0:
		return fmt.Errorf("%w: step %s: concurrency %d < 0", durabletype.ErrInvalidRun, Quote(s.Name), s.Concurrency)
	case s.Rate != nil && (s.Rate.N < 1 || s.Rate.Per < time.Millisecond):
		return fmt.Errorf("%w: step %s: rate limit %d per %s (want at least 1 per 1ms or more)",
			durabletype.ErrInvalidRun, Quote(s.Name), s.Rate.N, s.Rate.Per)
	case s.Sleep > 0 && (s.Concurrency > 0 || s.Rate != nil):
		return fmt.Errorf("%w: step %s: a sleep step has no cap or rate limit", durabletype.ErrInvalidRun, Quote(s.Name))
	}
	return nil
}

// CheckKeys checks what a store records of a new run's keys: none, or one entry
// per step of its shape, each key empty or a valid stored key. Both stores
// call it before creating anything.
func CheckKeys(nr *store.NewRun) error {
	if nr.Shape != nil {
		for i := range nr.Shape.Steps {
			if err := CheckFlowSpec(&nr.Shape.Steps[i]); err != nil {
				return err
			}
		}
	}
	if nr.Keys == nil {
		return nil
	}
	if nr.Shape == nil || len(nr.Keys) != len(nr.Shape.Steps) {
		return fmt.Errorf("%w: %d keys for the steps of the shape", durabletype.ErrInvalidKey, len(nr.Keys))
	}
	for i, k := range nr.Keys {
		for _, s := range []string{k.Concurrency, k.Rate} {
			if s != "" && (len(s) > maxStoredKey || !utf8.ValidString(s) || strings.ContainsRune(s, 0)) {
				return fmt.Errorf("%w: step %s: key %s", durabletype.ErrInvalidKey, Quote(nr.Shape.Steps[i].Name), Quote(s))
			}
		}
	}
	return nil
}

// StartKeyed is Start for a run with keys: the tasks get their keys before
// the store persists the run. A key whose step has no cap (or no limit) is
// dropped, so that a task's keys say exactly what applies to it.
func StartKeyed(rec store.Run, shape *Compiled, keys []store.TaskKeys, now, startAt time.Time) (*Run, Effects) {
	r, fx := Start(rec, shape, now, startAt)
	for i := range min(len(keys), shape.Len()) {
		spec := &shape.Shape.Steps[i]
		if spec.Concurrency > 0 {
			r.Tasks[i].ConcurrencyKey = keys[i].Concurrency
		}
		if spec.Rate != nil {
			r.Tasks[i].RateKey = keys[i].Rate
		}
	}
	return r, fx
}

// Keyed reports whether any step of the shape has a cap or a rate limit:
// runs of other shapes cost nothing here.
func Keyed(shape *Compiled) bool {
	for i := range shape.Shape.Steps {
		if s := &shape.Shape.Steps[i]; s.Concurrency > 0 || s.Rate != nil {
			return true
		}
	}
	return false
}

// HeldSlots returns, for the tasks of a run as loaded before a call's
// transitions, which hold a slot as RUNNING (by index); nil when none does.
func HeldSlots(tasks []store.Task) []bool {
	var held []bool
	for i := range tasks {
		if t := &tasks[i]; t.ConcurrencyKey != "" && t.State == durabletype.TaskRunning {
			if held == nil {
				held = make([]bool, len(tasks))
			}
			held[i] = true
		}
	}
	return held
}

// SlotsBefore holds the HeldSlots of each run a call loaded that had one.
type SlotsBefore map[*Run][]bool

// Note records r's snapshot if it has one.
func (b SlotsBefore) Note(r *Run) {
	if held := HeldSlots(r.Tasks); held != nil {
		b[r] = held
	}
}

// KeyedTask is a keyed task of a change.
type KeyedTask struct {
	TaskAt
	Key string
	// Max is the cap of the task's step (concurrency), or N (rate).
	Max int
}

// RateKey names one window of one rate key.
type RateKey struct {
	Key    string
	Window time.Time
}

// Admission is what a call's transitions ask of admission: the arrivals of keyed
// tasks, the slots freed, and the keyed tasks that left the queue.
type Admission struct {
	// Rated are the arrivals with a rate key, in order, and Windows their
	// windows (parallel).
	Rated   []KeyedTask
	windows []RateKey
	next    []time.Time
	// Arrivals are the arrivals with a concurrency key, in order.
	Arrivals []KeyedTask
	// Released counts, per key, the slots freed by tasks that left RUNNING.
	Released map[string]int
	// Dequeued are the keyed tasks that left the queue unclaimed: admitted
	// ones free their slot, parked ones their place in the FIFO.
	Dequeued []KeyedTask
	// Max is each key's cap, as the latest task of the key seen says.
	Max map[string]int
	// Until holds, for each rated arrival admitted (Limit), the end of the
	// window that counted it: it may be claimed only before then (see
	// RateExpired), else it is admitted again.
	Until map[TaskAt]time.Time
}

// RateExpired reports whether a task admitted under a rate limit until until
// (zero: not rate-limited) may no longer be claimed at now: its window
// ended. Claims pass it over; the store requeues it (Run.Requeue) when
// the window's end fires as a timer, so that it is admitted (and counted)
// again.
func RateExpired(until, now time.Time) bool {
	return !until.IsZero() && !until.After(now)
}

// RateRequeueDetail is the detail of the QUEUED event of a task requeued
// because its rate-limit window ended before it was claimed.
const RateRequeueDetail = "rate limit: the window that admitted it ended before a worker claimed it"

// DeferKeyed turns the keyed arrivals of a change made inside a caller's
// transaction into timers due at once: admission locks per-key rows, which
// a caller's transaction, open for as long as the caller likes, must not
// hold. The leader admits them when it fires the timers, after the caller
// commits (a rolled-back transaction leaves no timer).
func DeferKeyed(c *Change) {
	var moved []TaskAt
	for _, e := range c.Enqueued {
		if e.I >= e.R.Shape.Len() {
			continue // the on-failure task
		}
		t, spec := &e.R.Tasks[e.I], &e.R.Shape.Shape.Steps[e.I]
		if !(t.RateKey != "" && spec.Rate != nil) && !(t.ConcurrencyKey != "" && spec.Concurrency > 0) {
			continue
		}
		t.DueAt = Timestamp(c.Now)
		fx := c.Effects[e.R]
		fx.Timer = true
		fx.Enqueued = slices.DeleteFunc(fx.Enqueued, func(i int) bool { return i == e.I })
		for j := len(fx.Events) - 1; j >= 0; j-- {
			if ev := &fx.Events[j]; ev.Step == t.Name && ev.Type == durabletype.EventQueued {
				ev.Detail = "admitted by the leader once the caller's transaction commits"
				ev.DueAt = t.DueAt
				break
			}
		}
		moved = append(moved, e)
	}
	if len(moved) > 0 {
		c.Enqueued = slices.DeleteFunc(c.Enqueued, func(e TaskAt) bool { return slices.Contains(moved, e) })
	}
}

// RateWindow returns the fixed window of length per that holds t.
func RateWindow(t time.Time, per time.Duration) time.Time {
	ns := t.UnixNano()
	w := ns - ((ns%int64(per))+int64(per))%int64(per)
	return time.Unix(0, w).UTC()
}

// CollectAdmission returns the admission work of change c, whose runs were loaded as
// before says, or nil when it involves no keyed task: calls on runs
// without caps or limits do nothing more.
func CollectAdmission(c *Change, before SlotsBefore) *Admission {
	var w *Admission
	get := func() *Admission {
		if w == nil {
			w = &Admission{Released: map[string]int{}, Max: map[string]int{}}
		}
		return w
	}
	for _, r := range c.Runs {
		held := before[r]
		fx := c.Effects[r]
		if held == nil && len(fx.Dequeued) == 0 {
			continue
		}
		for _, i := range fx.Tasks {
			if i < len(held) && held[i] && r.Tasks[i].State != durabletype.TaskRunning {
				w := get()
				key := r.Tasks[i].ConcurrencyKey
				w.Released[key]++
				w.Max[key] = r.Shape.Shape.Steps[i].Concurrency
			}
		}
		for _, i := range fx.Dequeued {
			t := r.Task(i)
			if t.ConcurrencyKey == "" || t.State == durabletype.TaskRunning {
				continue // unkeyed, or claimed (memstore): holds on
			}
			w := get()
			w.Dequeued = append(w.Dequeued, KeyedTask{TaskAt{R: r, I: i}, t.ConcurrencyKey, r.Shape.Shape.Steps[i].Concurrency})
			w.Max[t.ConcurrencyKey] = r.Shape.Shape.Steps[i].Concurrency
		}
	}
	for _, e := range c.Enqueued {
		if e.I >= e.R.Shape.Len() {
			continue // the on-failure task
		}
		t, spec := &e.R.Tasks[e.I], &e.R.Shape.Shape.Steps[e.I]
		if t.RateKey != "" && spec.Rate != nil {
			w := get()
			w.Rated = append(w.Rated, KeyedTask{e, t.RateKey, spec.Rate.N})
			win := RateWindow(c.Now, spec.Rate.Per)
			w.windows = append(w.windows, RateKey{t.RateKey, win})
			w.next = append(w.next, win.Add(spec.Rate.Per))
		}
		if t.ConcurrencyKey != "" && spec.Concurrency > 0 {
			w := get()
			w.Arrivals = append(w.Arrivals, KeyedTask{e, t.ConcurrencyKey, spec.Concurrency})
			w.Max[t.ConcurrencyKey] = spec.Concurrency
		}
	}
	return w
}

// RateKeys returns the windows the rate check reads, sorted and distinct:
// the store locks their counters in this order.
func (w *Admission) RateKeys() []RateKey {
	out := slices.Clone(w.windows)
	slices.SortFunc(out, func(a, b RateKey) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), a.Window.Compare(b.Window))
	})
	return slices.Compact(out)
}

// SlotKeys returns the concurrency keys involved, sorted and distinct: the
// store locks their slot counters in this order.
func (w *Admission) SlotKeys() []string {
	var out []string
	for k := range w.Max {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Heads returns, per concurrency key, how many of its oldest parked tasks
// the call may promote: one per slot it frees (tasks that left RUNNING,
// keyed tasks that left the queue) and one per arrival, which parked tasks
// go before. Slots free beyond those (a cap raised by a deploy) go to the
// parked tasks as their key's tasks move on.
func (w *Admission) Heads() map[string]int {
	heads := map[string]int{}
	for k, n := range w.Released {
		if n > 0 {
			heads[k] += n
		}
	}
	for _, t := range w.Dequeued {
		heads[t.Key]++
	}
	for _, t := range w.Arrivals {
		heads[t.Key]++
	}
	return heads
}

// Limit applies the rate limits: used holds the admissions so far of each
// window of RateKeys and is updated. Each rated arrival within its window's
// limit is admitted; the others are taken out of c's arrivals (and of the
// concurrency arrivals) and wait for the next window as timers: QUEUED with
// a due time, and a QUEUED event that says so.
func (w *Admission) Limit(c *Change, used map[RateKey]int) {
	var deferred []TaskAt
	for k, t := range w.Rated {
		rk := w.windows[k]
		if used[rk] < t.Max {
			used[rk]++
			if w.Until == nil {
				w.Until = map[TaskAt]time.Time{}
			}
			w.Until[t.TaskAt] = Timestamp(w.next[k])
			continue
		}
		deferred = append(deferred, t.TaskAt)
		task := &t.R.Tasks[t.I]
		task.DueAt = Timestamp(w.next[k])
		fx := c.Effects[t.R]
		fx.Timer = true
		fx.Enqueued = slices.DeleteFunc(fx.Enqueued, func(i int) bool { return i == t.I })
		for j := len(fx.Events) - 1; j >= 0; j-- {
			if e := &fx.Events[j]; e.Step == task.Name && e.Type == durabletype.EventQueued {
				e.Detail = Text("rate limit: " + strings.TrimSpace(e.Detail+" waits for the next window"))
				e.DueAt = task.DueAt
				break
			}
		}
	}
	if len(deferred) == 0 {
		return
	}
	c.Enqueued = slices.DeleteFunc(c.Enqueued, func(e TaskAt) bool { return slices.Contains(deferred, e) })
	w.Arrivals = slices.DeleteFunc(w.Arrivals, func(t KeyedTask) bool { return slices.Contains(deferred, t.TaskAt) })
}

// AdmitSlots is the admission rule of one key: with held slots held (after this
// call's releases), a cap of max, parked tasks waiting and arrivals new
// tasks, it promotes the oldest parked tasks first, then admits arrivals,
// as long as slots are free; the remaining arrivals park behind the parked
// ones. A cap lowered below held admits nothing until enough slots free.
func AdmitSlots(held, max, parked, arrivals int) (promote, admit int) {
	free := max - held
	if free <= 0 {
		return 0, 0
	}
	promote = min(free, parked)
	admit = min(free-promote, arrivals)
	return promote, admit
}

// AdmitDecision is the outcome of admission for a call.
type AdmitDecision struct {
	// Park lists the arrivals to park, in order (FIFO per key).
	Park []KeyedTask
	// Promote is, per key, how many of the oldest parked tasks to promote.
	Promote map[string]int
	// Held is each key's slot count after the call.
	Held map[string]int
}

// Decide applies the concurrency caps. held is each key's slot count before
// the call (as locked by the store), admitted tells whether a dequeued
// task had a slot (it was in the ready queue) rather than a place in the
// FIFO, and parked is how many parked tasks of each key may be promoted.
// The parked arrivals are taken out of c's arrivals.
func (w *Admission) Decide(c *Change, held map[string]int, admitted func(KeyedTask) bool, parked map[string]int) *AdmitDecision {
	d := &AdmitDecision{Promote: map[string]int{}, Held: map[string]int{}}
	h := map[string]int{}
	for k, n := range held {
		h[k] = n
	}
	for k, n := range w.Released {
		h[k] -= n
	}
	for _, t := range w.Dequeued {
		if admitted(t) {
			h[t.Key]--
		}
	}
	arrivals := map[string]int{}
	for _, t := range w.Arrivals {
		arrivals[t.Key]++
	}
	admit := map[string]int{}
	for _, k := range w.SlotKeys() {
		h[k] = max(h[k], 0)
		p, a := AdmitSlots(h[k], w.Max[k], parked[k], arrivals[k])
		d.Promote[k], admit[k] = p, a
		d.Held[k] = h[k] + p + a
	}
	var park []TaskAt
	for _, t := range w.Arrivals {
		if admit[t.Key] > 0 {
			admit[t.Key]--
			continue
		}
		d.Park = append(d.Park, t)
		park = append(park, t.TaskAt)
	}
	if len(park) > 0 {
		c.Enqueued = slices.DeleteFunc(c.Enqueued, func(e TaskAt) bool { return slices.Contains(park, e) })
		for _, t := range d.Park {
			fx := c.Effects[t.R]
			fx.Enqueued = slices.DeleteFunc(fx.Enqueued, func(i int) bool { return i == t.I })
		}
	}
	return d
}
