package memstore

import (
	"container/heap"

	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/store"
)

// before returns which keyed tasks of the change's runs were RUNNING before
// its transitions: the stored tasks, not yet overwritten by persist.
func (s *Store) before(c *dag.Change) dag.SlotsBefore {
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

// admit applies the rate limits and concurrency caps to a change (see
// internal/dag/flow.go), the mirror image of pgstore's admit: arrivals over a
// rate limit become timers, arrivals over a cap are parked, and the oldest
// parked tasks of keys whose slots freed are placed in the fair queue.
func (s *Store) admit(c *dag.Change, w *dag.Admission) error {
	if len(w.Rated) > 0 {
		used := map[dag.RateKey]int{}
		for _, rk := range w.RateKeys() {
			used[rk] = s.rates[rk]
		}
		w.Limit(c, used)
		for rk, n := range used {
			for old := range s.rates { // older windows of the key are done
				if old.Key == rk.Key && old.Window.Before(rk.Window) {
					delete(s.rates, old)
				}
			}
			s.rates[rk] = n
		}
	}
	if len(w.Max) == 0 {
		return nil
	}
	held := map[string]int{}
	parked := map[string]int{}
	for _, k := range w.SlotKeys() {
		held[k] = s.slots[k]
	}
	wasParked := map[dag.TaskAt]bool{}
	for _, t := range w.Dequeued {
		k := taskKey{t.R.Rec.ID, t.I}
		if key, ok := s.parkedKey[k]; ok {
			wasParked[t.TaskAt] = true
			delete(s.parkedKey, k)
			q := s.parked[key]
			for j, e := range q {
				if e == k {
					s.parked[key] = append(q[:j:j], q[j+1:]...)
					break
				}
			}
		}
	}
	for _, k := range w.SlotKeys() {
		parked[k] = len(s.parked[k])
	}
	d := w.Decide(c, held, func(t dag.KeyedTask) bool { return !wasParked[t.TaskAt] }, parked)
	for _, k := range w.SlotKeys() {
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
		return store.ErrTooManyTenants
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
