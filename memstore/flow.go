package memstore

import (
	"container/heap"
	"context"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// SlotsBefore implements dag.Tx: the keyed tasks of the change's runs
// that were RUNNING before its transitions are the stored ones, not yet
// overwritten by the change's write.
func (tx *memTx) SlotsBefore(c *dag.Change) dag.SlotsBefore {
	s := tx.s
	var b dag.SlotsBefore
	for _, r := range c.Runs {
		rs := s.runs[r.Rec.ID]
		if rs == nil || c.Effects[r].Created || !dag.Keyed(rs.shape) {
			continue
		}
		if held := dag.HeldSlots(rs.tasks); held != nil {
			if b == nil {
				b = dag.SlotsBefore{}
			}
			b[r] = held
		}
	}
	return b
}

// Counters implements dag.Tx: the rate windows' admissions, the slots
// held and the parked tasks of the keys of w, as the store holds them. The
// dequeued keyed tasks leave the parked lists here (the admitted ones'
// ready entries go with the change's other dequeues).
func (tx *memTx) Counters(_ context.Context, w *dag.Admission, heads map[string]int) (*dag.Counters, error) {
	s := tx.s
	cn := &dag.Counters{Used: map[dag.RateKey]int{}, Held: map[string]int{}, Admitted: map[dag.TaskAt]bool{},
		Parked: map[string]int{}}
	for _, rk := range w.RateKeys() {
		cn.Used[rk] = s.rates[rk]
	}
	for _, k := range w.SlotKeys() {
		cn.Held[k] = s.slots[k]
	}
	for _, t := range w.Dequeued {
		k := taskKey{t.R.Rec.ID, t.I}
		key, parked := s.parkedKey[k]
		cn.Admitted[t.TaskAt] = !parked
		if !parked {
			continue
		}
		delete(s.parkedKey, k)
		q := s.parked[key]
		for j, e := range q {
			if e == k {
				s.parked[key] = append(q[:j:j], q[j+1:]...)
				break
			}
		}
	}
	for _, k := range w.SlotKeys() {
		cn.Parked[k] = min(len(s.parked[k]), heads[k])
	}
	return cn, nil
}

// writeAdmission writes what admission decided for a change: the rate
// windows' counts (older windows of their keys go), the promoted parked
// tasks placed in the fair queue, the slots held, and the parked arrivals.
func (s *Store) writeAdmission(c *dag.Change) error {
	a := c.Admitted
	for rk, n := range a.Used {
		for old := range s.rates { // older windows of the key are done
			if old.Key == rk.Key && old.Window.Before(rk.Window) {
				delete(s.rates, old)
			}
		}
		s.rates[rk] = n
	}
	d := a.Decision
	for _, k := range a.SlotKeys() {
		for range d.Promote[k] {
			tk := s.parked[k][0]
			s.parked[k] = s.parked[k][1:]
			delete(s.parkedKey, tk)
			rs := s.runs[tk.run]
			if err := s.place(tk, rs.rec.Workflow, rs.rec.Tenant, c); err != nil {
				return err
			}
		}
		if len(s.parked[k]) == 0 {
			delete(s.parked, k)
		}
		if d.Held[k] == 0 {
			delete(s.slots, k)
		} else {
			s.slots[k] = d.Held[k]
		}
	}
	for _, t := range d.Park {
		tk := taskKey{t.R.Rec.ID, t.I}
		s.parked[t.Key] = append(s.parked[t.Key], tk)
		s.parkedKey[tk] = t.Key
	}
	return nil
}

// place puts a task in the fair queue.
func (s *Store) place(k taskKey, workflow, tenant string, c *dag.Change) error {
	id, ok := s.queues.Place(workflow, tenant)
	if !ok {
		return durabletype.ErrTooManyTenants
	}
	s.queued[k] = id
	s.queuedAt[k] = c.Now
	re := readyEntry{id: id, key: k, workflow: workflow, tenant: tenant}
	if rs := s.runs[k.run]; rs != nil {
		re.priority = rs.rec.Priority
	}
	heap.Push(&s.ready, re)
	if re.priority > 0 {
		lk := laneKey{workflow, tenant}
		s.prio[lk] = append(s.prio[lk], re)
	}
	return nil
}
