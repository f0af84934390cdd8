package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Concurrency keys and rate limits in PostgreSQL (see internal/core/dag/flow.go): a
// transition whose change involves keyed tasks (dag.CollectAdmission) takes one
// more round trip before its writes, admit, which locks the counters of
// its keys (concurrency_slots, rate_limits: by primary key, in key order,
// before the lanes), deletes the queue entries of keyed tasks it dequeues
// (from ready or from concurrency_waiting, wherever each is), and reads the
// oldest parked tasks of the keys whose slots it may free. The core's rules
// decide; the writes go with the transition's others. Every change to a
// key's parked tasks happens under its slot row's lock, so that a task is
// promoted whenever a slot frees. Changes without keyed tasks skip all of
// it.

// ErrKeyedTx is returned when keyed tasks would be admitted inside a
// caller's transaction, which must not hold the per-key locks admission
// takes. CreateRunsTx never does: keyed roots wait as timers that the
// leader fires after the caller commits (dag.DeferKeyed).
var ErrKeyedTx = errors.New("pgstore: keyed tasks cannot be admitted inside a caller's transaction")

type flowQueries struct {
	lockRates    string
	lockSlots    string
	dequeueKeyed string
	parkedHeads  string
	writeSlots   string
	dropSlots    string
	unpark       string
	park         string
	writeRates   string
	pruneRates   string
	setKeys      string
}

// admission is a change's admission state: before holds the keyed tasks
// RUNNING as loaded, heads the oldest parked tasks of the keys Counters
// locked, and promoted the heads admission promotes, with their fair ids
// once placed (promIDs); all nil for runs without keys.
type admission struct {
	before   dag.SlotsBefore
	heads    map[string][]parkedRow
	promoted []parkedRow
	promIDs  []int64
}

// parkedRow is a parked task.
type parkedRow struct {
	seq      int64
	key      string
	runID    uuid.UUID
	name     string
	workflow string
	tenant   string
	priority int16
	version  string
}

// Counters implements dag.Tx: in one round trip, it locks the counters of
// the rate windows and concurrency keys of w (creating them on first use),
// deletes the queue entries of the keyed tasks w dequeues (from ready or
// from concurrency_waiting, wherever each is) and reads the oldest parked
// tasks of each key, as many as heads says.
func (t *pgTx) Counters(ctx context.Context, w *dag.Admission, heads map[string]int) (*dag.Counters, error) {
	s, tx, c := t.s, t.q, t.c
	if c.deferred {
		return nil, ErrKeyedTx
	}
	b := &pgx.Batch{}
	used := map[dag.RateKey]int{}
	if rks := w.RateKeys(); len(rks) > 0 {
		keys, wins := make([]string, len(rks)), make([]pgtype.Timestamptz, len(rks))
		for i, rk := range rks {
			keys[i], wins[i] = rk.Key, stamp(rk.Window)
		}
		b.Queue(s.q.lockRates, keys, wins).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var rk dag.RateKey
				var n int
				if err := rows.Scan(&rk.Key, &rk.Window, &n); err != nil {
					return err
				}
				rk.Window = rk.Window.UTC()
				used[rk] = n
			}
			return rows.Err()
		})
	}
	keys := w.SlotKeys()
	held := map[string]int{}
	if len(keys) > 0 {
		b.Queue(s.q.lockSlots, keys).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k string
				var n int
				if err := rows.Scan(&k, &n); err != nil {
					return err
				}
				held[k] = n
			}
			return rows.Err()
		})
	}
	type runTask struct {
		run  uuid.UUID
		name string
	}
	inReady := map[runTask]bool{}
	if len(w.Dequeued) > 0 {
		runs, names := make([]uuid.UUID, len(w.Dequeued)), make([]string, len(w.Dequeued))
		for i, t := range w.Dequeued {
			runs[i], names[i] = t.R.Rec.ID, t.R.Tasks[t.I].Name
		}
		b.Queue(s.q.dequeueKeyed, u16(runs), names).Query(func(rows pgx.Rows) error {
			n := 0
			for rows.Next() {
				var ready bool
				var rt runTask
				if err := rows.Scan(&ready, p16(&rt.run), &rt.name); err != nil {
					return err
				}
				inReady[rt] = ready
				n++
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if n != len(w.Dequeued) {
				return errRaced // a claim took one first
			}
			return nil
		})
	}
	c.heads = map[string][]parkedRow{}
	if len(heads) > 0 {
		hk, hn := make([]string, 0, len(heads)), make([]int32, 0, len(heads))
		for _, k := range keys {
			if n := heads[k]; n > 0 {
				hk, hn = append(hk, k), append(hn, int32(n))
			}
		}
		b.Queue(s.q.parkedHeads, hk, hn).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var p parkedRow
				if err := rows.Scan(&p.seq, &p.key, p16(&p.runID), &p.name, &p.workflow, &p.tenant, &p.priority, &p.version); err != nil {
					return err
				}
				c.heads[p.key] = append(c.heads[p.key], p)
			}
			return rows.Err()
		})
	}
	if err := t.s.sendBatch(ctx, tx, b).Close(); err != nil {
		if errors.Is(err, errRaced) {
			return nil, err
		}
		return nil, fmt.Errorf("pgstore: admit: %w", err)
	}
	admitted := make(map[dag.TaskAt]bool, len(w.Dequeued))
	for _, t := range w.Dequeued {
		admitted[t.TaskAt] = inReady[runTask{t.R.Rec.ID, t.R.Tasks[t.I].Name}]
	}
	parked := map[string]int{}
	for k, h := range c.heads {
		parked[k] = len(h)
	}
	return &dag.Counters{Used: used, Held: held, Admitted: admitted, Parked: parked}, nil
}

// SlotsBefore implements dag.Tx: the keyed tasks RUNNING as loaded.
func (t *pgTx) SlotsBefore(*dag.Change) dag.SlotsBefore { return t.c.before }

// takePromoted takes the parked tasks admission promotes: the oldest of
// each key, among the heads read.
func (c *change) takePromoted() {
	c.promoted = nil
	if c.Admitted == nil {
		return
	}
	for _, k := range c.Admitted.SlotKeys() {
		c.promoted = append(c.promoted, c.heads[k][:c.Admitted.Decision.Promote[k]]...)
	}
}

// placePromoted gives the promoted tasks their fair ids, before the
// change's own arrivals (they are older).
func (c *change) placePromoted() error {
	c.promIDs = make([]int64, len(c.promoted))
	for k, p := range c.promoted {
		key := laneKey{p.workflow, p.tenant}
		l := c.lanes[key]
		if l == nil {
			return fmt.Errorf("pgstore: lane of tenant %s in workflow %s is not locked", dag.Quote(key.tenant), dag.Quote(key.workflow))
		}
		c.promIDs[k] = l.Place(c.frontiers[key.workflow])
		l.dirty = true
	}
	return nil
}

// promotedLanes returns the lanes of the promoted tasks.
func (c *change) promotedLanes() []laneKey {
	var out []laneKey
	for _, p := range c.promoted {
		out = append(out, laneKey{p.workflow, p.tenant})
	}
	return out
}

// queueFlowWrites queues the writes of admission, and the keys of the
// keyed tasks the change created.
func (c *change) queueFlowWrites(q *queries, channel string, b *pgx.Batch, now time.Time) {
	var kRuns [][16]byte
	var kNames, kC, kR []string
	for _, r := range c.Runs {
		if !c.Effects[r].Created || !dag.Keyed(r.Shape) {
			continue
		}
		for i := range r.Tasks {
			if t := &r.Tasks[i]; t.ConcurrencyKey != "" || t.RateKey != "" {
				kRuns, kNames = append(kRuns, r.Rec.ID), append(kNames, t.Name)
				kC, kR = append(kC, t.ConcurrencyKey), append(kR, t.RateKey)
			}
		}
	}
	if len(kRuns) > 0 {
		b.Queue(q.setKeys, kRuns, kNames, kC, kR)
	}
	a := c.Admitted
	if a == nil {
		return
	}
	if len(a.Used) > 0 {
		var keys []string
		var wins []pgtype.Timestamptz
		var ns []int32
		for _, rk := range a.RateKeys() {
			keys, wins, ns = append(keys, rk.Key), append(wins, stamp(rk.Window)), append(ns, int32(a.Used[rk]))
		}
		b.Queue(q.writeRates, keys, wins, ns)
		b.Queue(q.pruneRates, keys, wins)
	}
	if n := len(c.promoted); n > 0 {
		seqs := make([]int64, n)
		runs := make([][16]byte, n)
		names, wfs, tenants, versions := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		prios := make([]int16, n)
		for i, p := range c.promoted {
			seqs[i], runs[i], names[i], wfs[i], tenants[i], prios[i] = p.seq, p.runID, p.name, p.workflow, p.tenant, p.priority
			versions[i] = p.version
		}
		b.Queue(q.unpark, seqs)
		b.Queue(q.insertReady, c.promIDs, runs, names, wfs, tenants, stamp(now), prios, []pgtype.Timestamptz(nil), versions)
		if len(c.Enqueued) == 0 {
			b.Queue(q.notify, channel, []string{string(store.TopicReady)})
		}
	}
	if n := len(a.Decision.Park); n > 0 {
		keys := make([]string, n)
		runs := make([][16]byte, n)
		names, wfs, tenants, versions := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		prios := make([]int16, n)
		for i, t := range a.Decision.Park {
			keys[i], runs[i], names[i] = t.Key, t.R.Rec.ID, t.R.Tasks[t.I].Name
			wfs[i], tenants[i], prios[i], versions[i] = t.R.Rec.Workflow, t.R.Rec.Tenant, int16(t.R.Rec.Priority), t.R.Rec.Version
		}
		b.Queue(q.park, keys, runs, names, wfs, tenants, prios, versions)
	}
	if keys := a.SlotKeys(); len(keys) > 0 {
		ns := make([]int32, len(keys))
		for i, k := range keys {
			ns[i] = int32(a.Decision.Held[k])
		}
		b.Queue(q.writeSlots, keys, ns)
		b.Queue(q.dropSlots, keys)
	}
}
