package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

var _ store.TxSender = (*Store)(nil)

// waitKey is what WAITING tasks wait for: the tenant and the wait key of an
// event (or of a signal; see dag.SignalKey).
type waitKey struct{ tenant, key string }

// message is an event or a signal as kept.
type message struct {
	id      int64
	key     string // signals: dag.SignalKey
	payload []byte
	at      time.Time
}

// noteWait keeps the indexes of WAITING tasks up to date with task t (key
// k, of run rs) as a transition left it.
func (s *Store) noteWait(k taskKey, rs *runState, t *store.Task) {
	if old, ok := s.waitOf[k]; ok {
		delete(s.waiting[old], k)
		if len(s.waiting[old]) == 0 {
			delete(s.waiting, old)
		}
		delete(s.waitOf, k)
	}
	delete(s.waitingAll, k)
	if t.State != durabletype.TaskWaiting {
		return
	}
	s.waitingAll[k] = struct{}{}
	if t.WaitKey == "" {
		return
	}
	wk := waitKey{rs.rec.Tenant, t.WaitKey}
	if s.waiting[wk] == nil {
		s.waiting[wk] = map[taskKey]struct{}{}
	}
	s.waiting[wk][k] = struct{}{}
	s.waitOf[k] = wk
}

// FirstMessages implements dag.Tx.
func (tx *memTx) FirstMessages(_ context.Context, qs []dag.WaitQuery) ([]dag.Found, error) {
	out := make([]dag.Found, len(qs))
	for n, q := range qs {
		if m, ok := tx.s.firstMessage(q); ok {
			out[n] = dag.Found{OK: true, Payload: clone(m.payload)}
		}
	}
	return out, nil
}

// firstMessage returns the first kept message a wait may receive.
func (s *Store) firstMessage(q dag.WaitQuery) (message, bool) {
	if q.Signal {
		if rs := s.runs[q.Run]; rs != nil {
			skip := q.Skip
			for _, m := range rs.signals {
				if m.key == q.Key {
					if skip > 0 {
						skip--
						continue
					}
					return m, true
				}
			}
		}
		return message{}, false
	}
	skip := q.Skip
	for _, m := range s.sent[waitKey{q.Tenant, q.Key}] {
		if !m.at.Before(q.Since) {
			if skip > 0 {
				skip--
				continue
			}
			return m, true
		}
	}
	return message{}, false
}

// NewRun implements dag.Tx. A shape new to the store is recorded by
// Write, with the run.
func (tx *memTx) NewRun(_ context.Context, nr *store.NewRun, _ time.Time) (*dag.Compiled, error) {
	s := tx.s
	if _, ok := s.runs[nr.ID]; ok {
		return nil, durabletype.ErrRunExists // as pgstore's insert would fail
	}
	shape, ok := s.shapes[nr.Shape]
	if !ok {
		var err error
		if shape, err = dag.Compile(nr.Shape); err != nil {
			return nil, fmt.Errorf("%w: %w", durabletype.ErrInvalidRun, err)
		}
		tx.shapes = append(tx.shapes, newShape{nr.Workflow, nr.Shape, shape})
	}
	if !s.queues.Ensure(nr.Tenant) {
		return nil, fmt.Errorf("tenant %s: %w", dag.Quote(nr.Tenant), durabletype.ErrTooManyTenants)
	}
	nr.Input = clone(nr.Input)
	return shape, nil
}

// SendEvents implements store.Store.
func (s *Store) SendEvents(ctx context.Context, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	return s.SendEventsTx(ctx, nil, p)
}

// SendEventsTx implements store.TxSender. The in-memory store has no
// transactions of its own; tx is ignored.
func (s *Store) SendEventsTx(ctx context.Context, _ any, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := dag.CheckEvents(p.Events); err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	t := now(p.Now)
	res := &store.SendEventsResult{Delivered: make([]int, len(p.Events))}
	var n notes
	s.mu.Lock()
	c := dag.NewChange(t)
	loaded := map[uuid.UUID]*dag.Run{}
	for k := range p.Events {
		e := &p.Events[k]
		s.messageID++
		wk := waitKey{e.Tenant, e.Key}
		s.sent[wk] = append(s.sent[wk], message{id: s.messageID, key: e.Key, payload: clone(e.Payload), at: t})
		keys := make([]taskKey, 0, len(s.waiting[wk]))
		for tk := range s.waiting[wk] {
			keys = append(keys, tk)
		}
		slices.SortFunc(keys, func(a, b taskKey) int {
			return cmp.Or(cmp.Compare(a.run.String(), b.run.String()), cmp.Compare(a.task, b.task))
		})
		// A message for each waiting task, applied at once (pgstore keeps
		// them in its inbox until the call commits).
		msgs := make([]dag.Message, len(keys))
		for n, tk := range keys {
			task := s.runs[tk.run].task(tk)
			msgs[n] = dag.Message{Kind: dag.MsgEvent, Run: tk.run, Step: task.Name, Token: task.Token, Payload: clone(e.Payload)}
		}
		applied, refused := c.Apply(msgs, func(m *dag.Message) *dag.Run { return s.load(loaded, m.Run) })
		for n, ok := range applied {
			if rf := refused[n]; rf != nil {
				rf.Event = k
				res.Refused = append(res.Refused, *rf)
			}
			if ok {
				res.Delivered[k]++
				// Taken out of the index now, so that a later event of the
				// call does not find it waiting.
				delete(s.waiting[wk], keys[n])
			}
		}
	}
	err := s.persist(c, &n)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.publish(&n)
	res.Settled = n.settled
	return res, nil
}

// Signal implements store.Store.
func (s *Store) Signal(ctx context.Context, p *store.SignalParams) (*store.SignalResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := dag.CheckSignal(p.Name); err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	t := now(p.Now)
	var n notes
	s.mu.Lock()
	rs, ok := s.runs[p.RunID]
	if !ok || (p.Tenant != "" && rs.rec.Tenant != p.Tenant) {
		s.mu.Unlock()
		return nil, durabletype.ErrRunNotFound
	}
	r := s.load(map[uuid.UUID]*dag.Run{}, p.RunID)
	fx, err := r.Signal(p.Name, clone(p.Payload), t)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.messageID++
	rs.signals = append(rs.signals, message{id: s.messageID, key: dag.SignalKey(p.Name), payload: clone(p.Payload), at: t})
	c := dag.NewChange(t)
	c.Add(r, fx)
	err = s.persist(c, &n)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.publish(&n)
	return &store.SignalResult{Settled: n.settled, Refused: fx.Refused}, nil
}

// ApplyInbox implements store.Store. The in-memory store applies every
// message in the call that leaves it: nothing is ever pending.
func (s *Store) ApplyInbox(ctx context.Context, _ *store.ApplyInboxParams) (*store.ApplyInboxResult, error) {
	if err := s.fenced(ctx); err != nil {
		return nil, err
	}
	return &store.ApplyInboxResult{}, nil
}

// PruneEvents implements store.Store: the events sent first go first.
func (s *Store) PruneEvents(ctx context.Context, p *store.PruneEventsParams) (*store.PruneEventsResult, error) {
	if err := s.fenced(ctx); err != nil {
		return nil, err
	}
	before := now(p.Now).Add(-p.OlderThan)
	s.mu.Lock()
	defer s.mu.Unlock()
	type old struct {
		wk waitKey
		m  message
	}
	var doomed []old
	for wk, list := range s.sent {
		for _, m := range list {
			if m.at.Before(before) {
				doomed = append(doomed, old{wk, m})
			}
		}
	}
	slices.SortFunc(doomed, func(a, b old) int { return cmp.Compare(a.m.id, b.m.id) })
	doomed = doomed[:min(len(doomed), max(p.Limit, 0))]
	gone := map[int64]bool{}
	for _, d := range doomed {
		gone[d.m.id] = true
	}
	for wk, list := range s.sent {
		list = slices.DeleteFunc(list, func(m message) bool { return gone[m.id] })
		if len(list) == 0 {
			delete(s.sent, wk)
		} else {
			s.sent[wk] = list
		}
	}
	return &store.PruneEventsResult{Deleted: len(doomed)}, nil
}
