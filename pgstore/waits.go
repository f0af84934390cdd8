package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Steps that wait (events, signals, child runs, map items) in PostgreSQL.
//
// A WAITING task is a row (tasks_waiting_idx). What ends a wait reaches it
// as a message in the inbox table, written by the transaction that causes
// it and applied to the waiting task's run by a transition of its own
// (dag.Run.Apply): an event (SendEvents), a child run's settlement (the
// child's transition), the cancellation of a child whose parent gave it up.
// So no transaction ever locks a run to change another one: a transition
// locks the runs it names, in id order, and nothing else, and child and
// parent never wait for each other. The store applies the messages of its
// own calls right after they commit (deliver); the leader applies what a
// process that died before it left (ApplyInbox).
//
// Events and waits meet under a transaction advisory lock on the event's
// tenant and key: SendEvents takes it before it records the event and
// looks for the tasks waiting for its key; a transition whose tasks begin
// waiting takes it (after its runs' locks, in key order) before it looks
// for the events they may receive at once (their lookback). Whichever
// commits first, the other sees it: an event is delivered to every task
// that waits for its key when it is recorded, and to none that begins
// waiting later unless its lookback covers it. SendEvents takes no other
// lock and waits for nothing else, so the two never deadlock.

type waitQueries struct {
	loadItems     string
	loadMapItems  string
	deleteItems   string
	mapOutputs    string
	lockKeys      string
	firstEvents   string
	firstSignals  string
	sendEvents    string
	insertSignal  string
	insertInbox   string
	loadInbox     string
	deleteInbox   string
	pendingRuns   string
	pruneEvents   string
	taskCompleted string
}

// inboxState is a change's messages: inboxRuns are the runs the call left
// messages for (dag.Message), applied after the commit; inboxDone are the
// messages the call took (ids of inbox rows), inboxApplied those of them
// a task received, and inboxRefused those whose task refused their
// payload.
type inboxState struct {
	inboxRuns    []uuid.UUID
	inboxDone    []int64
	inboxApplied []int64
	inboxRefused map[int64]durabletype.Refusal
}

// inboxRow is a pending message as loaded.
type inboxRow struct {
	id  int64
	msg dag.Message
}

func scanInbox(rows pgx.Rows) ([]inboxRow, error) {
	var out []inboxRow
	for rows.Next() {
		var ir inboxRow
		var kind, status, resultState string
		var child pgtype.UUID
		m := &ir.msg
		if err := rows.Scan(&ir.id, p16(&m.Run), &kind, &m.Step, &m.Token, &child, &status, &m.Result,
			&resultState, &m.Error, &m.Payload); err != nil {
			return nil, err
		}
		switch kind {
		case "event":
			m.Kind = dag.MsgEvent
		case "child":
			m.Kind = dag.MsgChild
		case "cancel":
			m.Kind = dag.MsgCancel
		}
		if child.Valid {
			m.Child = child.Bytes
		}
		m.Status, m.ResultState = durabletype.RunStatus(status), durabletype.TaskState(resultState)
		out = append(out, ir)
	}
	return out, rows.Err()
}

// applyInbox applies the loaded messages of the call's runs, in the order
// they were written.
func (c *change) applyInbox(rows []inboxRow) {
	// The messages of a run the call leaves alone stay pending.
	rows = slices.DeleteFunc(slices.Clone(rows), func(ir inboxRow) bool { return c.KeepsMessages(ir.msg.Run) })
	msgs := make([]dag.Message, len(rows))
	for k, ir := range rows {
		c.inboxDone = append(c.inboxDone, ir.id)
		msgs[k] = ir.msg
	}
	applied, refused := c.Apply(msgs, func(m *dag.Message) *dag.Run { return c.byID[m.Run] })
	for k, ok := range applied {
		if ok {
			c.inboxApplied = append(c.inboxApplied, rows[k].id)
		}
		if rf := refused[k]; rf != nil {
			if c.inboxRefused == nil {
				c.inboxRefused = map[int64]durabletype.Refusal{}
			}
			c.inboxRefused[rows[k].id] = *rf
		}
	}
}

// FirstMessages implements dag.Tx: under the advisory locks of the event
// keys (in key order, after the runs' locks), the first event each wait
// may receive; and the first signal of each name sent to each run; in one
// round trip.
func (t *pgTx) FirstMessages(ctx context.Context, qs []dag.WaitQuery) ([]dag.Found, error) {
	s := t.s
	found := make([]dag.Found, len(qs))
	var events, signals []int // indexes into qs
	for n := range qs {
		if qs[n].Signal {
			signals = append(signals, n)
		} else {
			events = append(events, n)
		}
	}
	b := &pgx.Batch{}
	if len(events) > 0 {
		keys := make([]int64, 0, len(events))
		tenants, ks, since := make([]string, len(events)), make([]string, len(events)), make([]pgtype.Timestamptz, len(events))
		skips := make([]int64, len(events))
		for k, n := range events {
			q := &qs[n]
			keys = append(keys, s.eventLock(q.Tenant, q.Key))
			tenants[k], ks[k], since[k], skips[k] = q.Tenant, q.Key, stamp(q.Since), int64(q.Skip)
		}
		slices.Sort(keys)
		b.Queue(s.q.lockKeys, slices.Compact(keys))
		b.Queue(s.q.firstEvents, tenants, ks, since, skips).Query(func(rows pgx.Rows) error {
			return scanFound(rows, found, events)
		})
	}
	if len(signals) > 0 {
		runs, ks, skips := make([]uuid.UUID, len(signals)), make([]string, len(signals)), make([]int64, len(signals))
		for k, n := range signals {
			runs[k], ks[k], skips[k] = qs[n].Run, qs[n].Key, int64(qs[n].Skip)
		}
		b.Queue(s.q.firstSignals, u16(runs), ks, skips).Query(func(rows pgx.Rows) error {
			return scanFound(rows, found, signals)
		})
	}
	if err := t.s.sendBatch(ctx, t.q, b).Close(); err != nil {
		return nil, fmt.Errorf("pgstore: waits: %w", err)
	}
	return found, nil
}

// scanFound records the messages a lookup found: the row of ordinality k
// answers query at[k-1].
func scanFound(rows pgx.Rows, found []dag.Found, at []int) error {
	for rows.Next() {
		var ord int64
		var payload []byte
		if err := rows.Scan(&ord, &payload); err != nil {
			return err
		}
		found[at[ord-1]] = dag.Found{OK: true, Payload: payload}
	}
	return rows.Err()
}

// eventLock is the advisory lock of an event key.
func (s *Store) eventLock(tenant, key string) int64 {
	return lockKey("event", s.schema, tenant+"\x00"+key)
}

// deliverBatch is the most runs whose messages one transition applies.
// One run per transaction made 1,000 events cost 1,000 commits (about 700
// events/s delivered); 256 runs per transaction, about 9,600 (measured
// with `durable bench --scenario events`, one sender).
const deliverBatch = 256

// deliver applies the messages pending for runs, deliverBatch runs per
// transition (locked in id order, as every transition locks its runs), at
// now (zero: the database's clock); the messages those leave for other
// runs (a parent's, its children's) follow once they commit. It returns
// the IDs of the messages taken and whether each changed its run. Errors
// leave the messages to the leader. The runs the messages settle are
// appended to settled, when set.
func (s *Store) deliver(ctx context.Context, now time.Time, runs []uuid.UUID, settled *[]store.SettledRun) (map[int64]bool, map[int64]durabletype.Refusal) {
	if len(runs) == 0 {
		return nil, nil
	}
	done := map[int64]bool{}
	refused := map[int64]durabletype.Refusal{}
	runs = distinct(slices.Clone(runs))
	for len(runs) > 0 {
		chunk := runs[:min(len(runs), deliverBatch)]
		runs = runs[len(chunk):]
		var c *change
		err := retryRaced(func(lockReady bool) error {
			return s.transition(ctx, &plan{
				now:       now,
				ids:       chunk,
				lockReady: lockReady,
				inbox:     true,
				settled:   settled,
				apply: func(cc *change) error {
					c = cc
					return nil
				},
			})
		})
		if err != nil && errors.Is(s.notLeader(ctx, err), durabletype.ErrNotLeader) {
			return done, refused // a leader's term ended: nothing more is applied under it
		}
		if err != nil || c == nil {
			continue
		}
		for _, mid := range c.inboxDone {
			done[mid] = false
		}
		for _, mid := range c.inboxApplied {
			done[mid] = true
		}
		for mid, rf := range c.inboxRefused {
			refused[mid] = rf
		}
	}
	return done, refused
}

// SendEvents implements store.Store: one transaction records the events
// and leaves a message for each task waiting for their keys; another
// applies them, once committed.
func (s *Store) SendEvents(ctx context.Context, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	res, err := s.sendEvents(ctx, nil, p)
	return res, classify(err)
}

// SendEventsTx implements store.TxSender: the events are recorded inside
// tx, a pgx.Tx the caller commits or rolls back; the engines apply their
// messages once it commits (the commit notifies TopicInbox). Sending locks
// each event's key until tx ends: keep such transactions short.
func (s *Store) SendEventsTx(ctx context.Context, tx any, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	ptx, ok := tx.(pgx.Tx)
	if !ok || ptx == nil {
		return nil, &TxTypeError{Got: tx}
	}
	res, err := s.sendEvents(ctx, ptx, p)
	return res, classify(err)
}

func (s *Store) sendEvents(ctx context.Context, tx pgx.Tx, p *store.SendEventsParams) (*store.SendEventsResult, error) {
	res := &store.SendEventsResult{Delivered: make([]int, len(p.Events))}
	if err := dag.CheckEvents(p.Events); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if len(p.Events) == 0 {
		return res, nil
	}
	n := len(p.Events)
	tenants, keys, payloads := make([]string, n), make([]string, n), make([][]byte, n)
	locks := make([]int64, n)
	for k, e := range p.Events {
		tenants[k], keys[k], payloads[k] = e.Tenant, e.Key, e.Payload
		locks[k] = s.eventLock(e.Tenant, e.Key)
	}
	slices.Sort(locks)
	b := &pgx.Batch{}
	b.Queue(s.q.lockKeys, slices.Compact(locks))
	var messages []int64
	inboxOf := map[int64][]int64{} // message -> its inbox rows
	var runs []uuid.UUID
	b.Queue(s.q.sendEvents, tenants, keys, payloads, stamp(nowOf(p.Now))).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var mid int64
			var iid pgtype.Int8
			var run pgtype.UUID
			if err := rows.Scan(&mid, &iid, &run); err != nil {
				return err
			}
			if !iid.Valid {
				messages = append(messages, mid)
				continue
			}
			inboxOf[mid] = append(inboxOf[mid], iid.Int64)
			if !slices.Contains(runs, uuid.UUID(run.Bytes)) {
				runs = append(runs, run.Bytes)
			}
		}
		return rows.Err()
	})
	if tx != nil {
		b.Queue(s.q.notify, s.channel, []string{string(store.TopicInbox)})
		if err := s.sendBatch(ctx, tx, b).Close(); err != nil {
			return nil, fmt.Errorf("pgstore: send events: %w", err)
		}
		slices.Sort(messages)
		for k, mid := range messages {
			res.Delivered[k] = len(inboxOf[mid])
		}
		return res, nil
	}
	own, err := s.beginOwn(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	err = own.send(ctx, b, true)
	own.close(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: send events: %w", err)
	}
	done, refused := s.deliver(ctx, nowOf(p.Now), runs, &res.Settled)
	slices.Sort(messages)
	for k, mid := range messages {
		for _, iid := range inboxOf[mid] {
			if rf, ok := refused[iid]; ok {
				rf.Event = k
				res.Refused = append(res.Refused, rf)
			}
			// A message this call did not take was taken by the leader
			// (or is left to it): it is delivered all the same.
			if applied, taken := done[iid]; applied || !taken {
				res.Delivered[k]++
			}
		}
	}
	return res, nil
}

// Signal implements store.Store: a transition of the run, which records
// the signal with it.
func (s *Store) Signal(ctx context.Context, p *store.SignalParams) (*store.SignalResult, error) {
	if err := dag.CheckSignal(p.Name); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	res := &store.SignalResult{}
	err := retryRaced(func(lockReady bool) error {
		return s.transition(ctx, &plan{
			now:       nowOf(p.Now),
			ids:       []uuid.UUID{p.RunID},
			lockReady: lockReady,
			settled:   &res.Settled,
			apply: func(c *change) error {
				r := c.byID[p.RunID]
				if r == nil || (p.Tenant != "" && r.Rec.Tenant != p.Tenant) {
					return durabletype.ErrRunNotFound
				}
				fx, err := r.Signal(p.Name, p.Payload, c.Now)
				if err != nil {
					return err
				}
				res.Refused = fx.Refused
				c.Add(r, fx)
				return nil
			},
			extra: func(b *pgx.Batch, c *change) {
				r := c.byID[p.RunID]
				b.Queue(s.q.insertSignal, r.Rec.Tenant, dag.SignalKey(p.Name), [16]byte(p.RunID), p.Payload, stamp(c.Now))
			},
		})
	})
	if err != nil {
		return nil, classify(err)
	}
	return res, nil
}

// ApplyInbox implements store.Store: the runs with messages pending, oldest
// first (deliver).
func (s *Store) ApplyInbox(ctx context.Context, p *store.ApplyInboxParams) (*store.ApplyInboxResult, error) {
	res, err := s.applyPending(ctx, p, 0)
	return res, s.notLeader(ctx, err)
}

// applyPending applies the messages pending for up to p.Limit runs, those
// with IDs up to upTo when it is positive.
func (s *Store) applyPending(ctx context.Context, p *store.ApplyInboxParams, upTo int64) (*store.ApplyInboxResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	// A leader's call is refused here already when its term has ended
	// (the fence, in the same round trip); each transition that applies
	// the messages is fenced again.
	var runs []uuid.UUID
	b := &pgx.Batch{}
	b.Queue(s.q.pendingRuns, limit, pgtype.Int8{Int64: upTo, Valid: upTo > 0}).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(p16(&id)); err != nil {
				return err
			}
			runs = append(runs, id)
		}
		return rows.Err()
	})
	s.fenceBatch(ctx, b)
	if err := s.sendBatch(ctx, s.pool, b).Close(); err != nil {
		return nil, classify(fmt.Errorf("pgstore: pending messages: %w", err))
	}
	res := &store.ApplyInboxResult{}
	done, _ := s.deliver(ctx, nowOf(p.Now), runs, &res.Settled)
	res.Applied = len(done)
	return res, nil
}

// PruneEvents implements store.Store.
func (s *Store) PruneEvents(ctx context.Context, p *store.PruneEventsParams) (*store.PruneEventsResult, error) {
	micros := p.OlderThan.Microseconds()
	ct, err := s.execFenced(ctx, s.q.pruneEvents, stamp(nowOf(p.Now)), micros, max(p.Limit, 0))
	if err != nil {
		return nil, classify(s.notLeader(ctx, fmt.Errorf("pgstore: prune events: %w", err)))
	}
	return &store.PruneEventsResult{Deleted: int(ct.RowsAffected())}, nil
}
