package dag

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// ItemBase is where items start in the index space of a run's tasks, the
// space Effects name tasks in: index i < ItemBase is r.Tasks[i] (the steps
// in shape order, then the on-failure task), and ItemBase+j is the j-th
// item loaded or created for the call. Items are the tasks of map steps, one
// per element of the list a map step fans out to; a run may have tens of
// thousands, so a transition loads only those it needs.
const ItemBase = 1 << 30

// MaxItems is the most items one map step may fan out to.
const MaxItems = 100_000

// itemPrefix starts every item's task name. Step names start with a letter
// or a digit and the on-failure task with '@', all of which sort before
// '~': a store ordering names bytewise finds a run's steps before its
// items (pgstore loads the steps of a run without reading its items).
const itemPrefix = "~"

// ItemName returns the task name of item k of map step step: "~step[k]".
func ItemName(step string, k int) string {
	return itemPrefix + step + "[" + strconv.Itoa(k) + "]"
}

// ItemPrefix returns what the task names of map step step's items start
// with: "~step[".
func ItemPrefix(step string) string { return itemPrefix + step + "[" }

// ParseItem returns the map step and the number of an item's task name.
func ParseItem(name string) (step string, k int, ok bool) {
	rest, ok := strings.CutPrefix(name, itemPrefix)
	if !ok || !strings.HasSuffix(rest, "]") {
		return "", 0, false
	}
	open := strings.LastIndexByte(rest, '[')
	if open <= 0 {
		return "", 0, false
	}
	inner := rest[open+1 : len(rest)-1]
	if num, label, ok := strings.Cut(inner, ":"); ok { // a function's record (RecordName)
		if !ValidName(label) {
			return "", 0, false
		}
		inner = num
	}
	k, err := strconv.Atoi(inner)
	if err != nil || k < 0 || strconv.Itoa(k) != inner {
		return "", 0, false
	}
	return rest[:open], k, true
}

// DisplayName returns a task name as people read it: an item as
// "step[k]", a function's record as its call's name and number,
// "name#k", anything else as it is.
func DisplayName(name string) string {
	if _, k, call, ok := ParseRecord(name); ok {
		return call + "#" + strconv.Itoa(k)
	}
	if step, k, ok := ParseItem(name); ok {
		return step + "[" + strconv.Itoa(k) + "]"
	}
	return name
}

// IsItem reports whether index i names an item.
func IsItem(i int) bool { return i >= ItemBase }

type itemID struct{ m, k int }

// Task returns task i of the index space (see ItemBase).
func (r *Run) Task(i int) *store.Task {
	if i >= ItemBase {
		return &r.items.tasks[i-ItemBase]
	}
	return &r.Tasks[i]
}

// StepOf returns the step task i belongs to: i itself for a step and the
// on-failure task, the map step of an item.
func (r *Run) StepOf(i int) int {
	if i >= ItemBase {
		return r.items.step[i-ItemBase]
	}
	return i
}

// Err returns the error of loading items during the call's transitions
// (Run.LoadItems): their effects are then incomplete, and the store must
// not persist them.
func (r *Run) Err() error {
	if r.items == nil {
		return nil
	}
	return r.items.err
}

// loaded returns the run's loaded items, made on first use.
func (r *Run) loaded() *loadedItems {
	if r.items == nil {
		r.items = &loadedItems{at: map[itemID]int{}}
	}
	return r.items
}

// AddItems makes stored items of the run available to the call's
// transitions and returns their indexes. An item already loaded keeps its
// index (and its state as changed by the call).
func (r *Run) AddItems(items []store.Task) ([]int, error) {
	out := make([]int, len(items))
	for n := range items {
		t := &items[n]
		step, k, ok := ParseItem(t.Name)
		m, known := r.Shape.Index(step)
		if !ok || !known || m >= r.Shape.Len() || (r.Shape.Kind(m) != durabletype.KindMap && r.Shape.Kind(m) != durabletype.KindFunc) || t.Item != k {
			return nil, fmt.Errorf("dag: run %s: task %s is not an item of a map step or a record of a function", r.Rec.ID, Quote(t.Name))
		}
		if j, ok := r.loaded().at[itemID{m, k}]; ok {
			out[n] = ItemBase + j
			continue
		}
		out[n] = r.appendItem(m, *t)
	}
	return out, nil
}

// appendItem adds item t of map step m to the loaded items.
func (r *Run) appendItem(m int, t store.Task) int {
	li := r.loaded()
	j := len(li.tasks)
	li.tasks = append(li.tasks, t)
	li.step = append(li.step, m)
	li.dirty = append(li.dirty, false)
	li.at[itemID{m, t.Item}] = j
	return ItemBase + j
}

// ItemIndex returns the index of item k of map step m, if it is loaded.
func (r *Run) ItemIndex(m, k int) (int, bool) {
	if r.items == nil {
		return 0, false
	}
	j, ok := r.items.at[itemID{m, k}]
	return ItemBase + j, ok
}

// itemsOf returns the indexes of every item of map step m, in item order,
// loading them (LoadItems) the first time. A loading error is kept
// (Err) and leaves the items loaded so far.
func (r *Run) itemsOf(m int) map[int]int {
	if r.Tasks[m].Items > 0 {
		r.loadAll(m, "items")
	}
	return r.loadedOf(m)
}

// loadAll loads every item (or record) of step m, once (LoadItems). A
// loading error is kept (Err) and leaves the items loaded so far.
func (r *Run) loadAll(m int, what string) {
	li := r.loaded()
	if li.full[m] {
		return
	}
	if r.LoadItems == nil {
		r.fail0(fmt.Errorf("dag: run %s: the %s of step %s are not loaded", r.Rec.ID, what, Quote(r.Shape.Name(m))))
	} else if items, err := r.LoadItems(r, m); err != nil {
		r.fail0(fmt.Errorf("dag: run %s: loading the %s of step %s: %w", r.Rec.ID, what, Quote(r.Shape.Name(m)), err))
	} else if _, err := r.AddItems(items); err != nil {
		r.fail0(err)
	} else {
		if li.full == nil {
			li.full = map[int]bool{}
		}
		li.full[m] = true
	}
}

// loadedOf returns the indexes of the loaded items (or records) of step m,
// by number.
func (r *Run) loadedOf(m int) map[int]int {
	out := map[int]int{}
	for id, j := range r.loaded().at {
		if id.m == m {
			out[id.k] = ItemBase + j
		}
	}
	return out
}

func (r *Run) fail0(err error) {
	if li := r.loaded(); li.err == nil {
		li.err = err
	}
}

// completeItem records the output of item i and counts it done for its
// map step, which completes with its last item.
func (r *Run) completeItem(i int, output []byte, now time.Time) {
	t := r.Task(i)
	t.Output = output
	t.Error = ""
	r.finish(i, durabletype.TaskCompleted, now)
	r.event(i, durabletype.EventCompleted, now, "", time.Time{})
	m := r.StepOf(i)
	mt := &r.Tasks[m]
	if mt.State != durabletype.TaskWaiting {
		return
	}
	mt.Left--
	r.touch(m)
	if mt.Left <= 0 {
		mt.Left = 0
		r.complete(m, nil, now)
	}
}

// failMap fails map step m because its item k failed for good: the step
// FAILS with the item's error, its other unfinished items are cancelled,
// and the run fails.
func (r *Run) failMap(m, k int, msg string, now time.Time) {
	msg = Text(fmt.Sprintf("item %d: %s", k, msg))
	mt := &r.Tasks[m]
	if mt.State != durabletype.TaskWaiting {
		return
	}
	mt.Error = msg
	r.cancelItems(m, now, fmt.Sprintf("run failed: item %d of step %s failed", k, Quote(r.Shape.Name(m))))
	r.finish(m, durabletype.TaskFailed, now)
	r.event(m, durabletype.EventFailed, now, msg, time.Time{})
	r.failRun(m, msg, now)
}

// cancelItems cancels every unfinished item of map step m, running ones
// included (their claims are cleared, so that their workers learn it and
// their late outcomes are stale).
func (r *Run) cancelItems(m int, now time.Time, reason string) {
	for _, i := range r.itemsInOrder(m) {
		if t := r.Task(i); !t.State.Terminal() {
			t.Token = 0
			r.cancel(i, now, reason)
		}
	}
}

// itemsInOrder returns the indexes of every item of map step m, in item
// order (itemsOf), so that transitions over them record their events in
// the same order in every store.
func (r *Run) itemsInOrder(m int) []int {
	items := r.itemsOf(m)
	ks := make([]int, 0, len(items))
	for k := range items {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	out := make([]int, len(ks))
	for n, k := range ks {
		out[n] = items[k]
	}
	return out
}

// fanOut splits map step i into one item per input and makes it wait for
// them. After a replay the step has items already: one that completed with
// the same input keeps its output and does not run again (unless a replay
// from an earlier step forced it); the others run (again), and items
// beyond the new list are deleted.
func (r *Run) fanOut(i int, inputs [][]byte, now time.Time) {
	if len(inputs) > MaxItems {
		r.fail(i, Text(fmt.Sprintf("a map step fans out to at most %d items, got %d", MaxItems, len(inputs))), true, 0, now)
		return
	}
	t := &r.Tasks[i]
	var existing map[int]int
	if t.Items > 0 {
		existing = r.itemsOf(i)
	}
	name := t.Name
	left := 0
	var enqueue []int
	for k, in := range inputs {
		j, ok := existing[k]
		if ok {
			it := r.Task(j)
			if it.State == durabletype.TaskCompleted && bytes.Equal(it.Input, in) {
				continue
			}
			r.resetTask(j)
			it.Input = in
		} else {
			j = r.appendItem(i, store.Task{
				RunID: r.Rec.ID, Name: ItemName(name, k), Kind: durabletype.KindItem, State: durabletype.TaskPending, Item: k, Input: in,
			})
			r.fx.NewTasks = append(r.fx.NewTasks, j)
			r.touch(j)
		}
		left++
		enqueue = append(enqueue, j)
	}
	for k, j := range existing {
		if k >= len(inputs) {
			r.fx.Deleted = append(r.fx.Deleted, j)
		}
	}
	slices.Sort(r.fx.Deleted)
	t.Items, t.Left = len(inputs), left
	r.touch(i)
	if left == 0 {
		r.complete(i, nil, now)
		return
	}
	r.wait(i, now, fmt.Sprintf("%d items", left), time.Time{})
	for _, j := range enqueue {
		r.enqueue(j, now, "")
	}
}
