package pgstore

import (
	"context"
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

// runRow is a locked run as loaded for a transition.
type runRow struct {
	rec     store.Run
	shapeID uuid.UUID
}

// loader loads runs for a transition: it locks their rows in id order, then
// reads their tasks (their steps, not their items: see dag.ItemBase), the
// items the call names, and, when asked, the messages pending for them,
// in the same round trip.
type loader struct {
	recs  []runRow
	tasks map[uuid.UUID][]store.Task
	cols  map[uuid.UUID][]eventCols
	items []loadedTask
	// records are the records of the bodies plan.records names.
	records map[itemRef][]loadedTask
	inbox   []inboxRow
	// eventBase and clock are read after the locks are taken.
	eventBase int64
	clock     time.Time
}

// loadedTask is a task row as loaded, with its events kept in the row.
type loadedTask struct {
	task store.Task
	cols eventCols
}

// itemRef names an item to load.
type itemRef struct {
	run  uuid.UUID
	name string
}

func (l *loader) queue(q *queries, b *pgx.Batch, p *plan) {
	ids := p.ids
	l.tasks = make(map[uuid.UUID][]store.Task, len(ids))
	l.cols = make(map[uuid.UUID][]eventCols, len(ids))
	if len(ids) > 0 {
		l.queueRuns(q, b, ids, p.lockReady)
	}
	if len(p.locks) > 0 {
		locks := slices.Clone(p.locks)
		slices.Sort(locks)
		b.Queue(q.lockKeys, slices.Compact(locks))
	}
	if len(p.items) > 0 {
		runs, names := make([]uuid.UUID, len(p.items)), make([]string, len(p.items))
		for k, it := range p.items {
			runs[k], names[k] = it.run, it.name
		}
		b.Queue(q.loadItems, u16(runs), names).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var lt loadedTask
				if err := scanTask(rows, &lt.task, &lt.cols, true); err != nil {
					return err
				}
				l.items = append(l.items, lt)
			}
			return rows.Err()
		})
	}
	if len(p.records) > 0 {
		l.records = make(map[itemRef][]loadedTask, len(p.records))
		var runs []uuid.UUID
		var bodies, lo, hi []string
		for _, body := range p.records {
			if _, ok := l.records[body]; ok {
				continue
			}
			l.records[body] = nil
			prefix := dag.ItemPrefix(body.name)
			runs, bodies, lo, hi = append(runs, body.run), append(bodies, body.name), append(lo, prefix), append(hi, upperBound(prefix))
		}
		b.Queue(q.loadRecords, u16(runs), bodies, lo, hi).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var lt loadedTask
				if err := scanTask(rows, &lt.task, &lt.cols, true); err != nil {
					return err
				}
				body, _, ok := dag.ParseItem(lt.task.Name)
				if !ok {
					continue
				}
				key := itemRef{lt.task.RunID, body}
				l.records[key] = append(l.records[key], lt)
			}
			return rows.Err()
		})
	}
	if p.inbox && len(ids) > 0 {
		b.Queue(q.loadInbox, u16(ids)).Query(func(rows pgx.Rows) error {
			var err error
			l.inbox, err = scanInbox(rows)
			return err
		})
	}
	b.Queue(q.eventBlock).QueryRow(func(row pgx.Row) error {
		var block int64
		if err := row.Scan(&block, &l.clock); err != nil {
			return err
		}
		l.eventBase = block * eventBlockSize
		return nil
	})
}

func (l *loader) queueRuns(q *queries, b *pgx.Batch, ids []uuid.UUID, lockReady bool) {
	b.Queue(q.lockRuns, u16(ids)).Query(func(rows pgx.Rows) error {
		// Declared once: what Scan is handed escapes to the heap.
		var fin, deadline pgtype.Timestamptz
		var status string
		var prio int16
		var parent pgtype.UUID
		var pStep, pResult pgtype.Text
		for rows.Next() {
			var rr runRow
			if err := rows.Scan(p16(&rr.rec.ID), &rr.rec.Workflow, &rr.rec.Tenant, p16(&rr.shapeID), &status,
				&rr.rec.FailedStep, &rr.rec.Error, &rr.rec.CreatedAt, &fin, &prio, &deadline, &parent, &pStep, &pResult, &rr.rec.Version); err != nil {
				return err
			}
			rr.rec.Status = durabletype.RunStatus(status)
			rr.rec.FinishedAt, rr.rec.Deadline, rr.rec.Priority = tm(fin), tm(deadline), int(prio)
			rr.rec.Parent = parentRef(parent, pStep.String, pResult.String)
			l.recs = append(l.recs, rr)
		}
		return rows.Err()
	})
	if lockReady {
		// Waits for claims holding these rows; a new statement then sees
		// their commits when it loads the tasks.
		b.Queue(q.lockReady, u16(ids))
	}
	b.Queue(q.loadTasks, u16(ids)).Query(func(rows pgx.Rows) error {
		var t store.Task
		var ec eventCols
		for rows.Next() {
			t, ec = store.Task{}, eventCols{}
			if err := scanTask(rows, &t, &ec, false); err != nil {
				return err
			}
			l.tasks[t.RunID] = append(l.tasks[t.RunID], t)
			l.cols[t.RunID] = append(l.cols[t.RunID], ec)
		}
		return rows.Err()
	})
}

// scanTask reads a row of the columns of loadTasks (sql/tasks.sql), or of
// loadItems and loadMapItems (item: those and the item's number and
// input), into t and ec.
func scanTask(rows pgx.Rows, t *store.Task, ec *eventCols, item bool) error {
	var kind, state string
	var due, start, fin, qAt, beat, timeout pgtype.Timestamptz
	// The columns of waits are NULL for most tasks: read as such, they
	// cost nothing to send or decode.
	var waitKey pgtype.Text
	var child pgtype.UUID
	var items, left pgtype.Int4
	dest := []any{p16(&t.RunID), &t.Name, &kind, &state, &t.Attempt, &t.Token, &t.Worker,
		&due, &t.Error, &start, &fin, &ec.qID, &qAt, &ec.qAttempt, &ec.sID, &ec.cID, &beat, &timeout, &t.ConcurrencyKey, &t.RateKey,
		&waitKey, &child, &items, &left, &t.Lost}
	if item {
		dest = append(dest, &t.Item, &t.Input)
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	t.Kind, t.State = durabletype.TaskKind(kind), durabletype.TaskState(state)
	t.DueAt, t.StartedAt, t.FinishedAt, t.HeartbeatAt, t.TimeoutAt = tm(due), tm(start), tm(fin), tm(beat), tm(timeout)
	if child.Valid {
		t.Child = child.Bytes
	}
	t.WaitKey, t.Items, t.Left = waitKey.String, int(items.Int32), int(left.Int32)
	ec.qAt, ec.attempt, ec.startedAt, ec.finishedAt = tm(qAt), t.Attempt, t.StartedAt, t.FinishedAt
	return nil
}

// parentRef returns a run's parent as stored, nil for a run without one.
func parentRef(id pgtype.UUID, step, result string) *durabletype.ParentRef {
	if !id.Valid {
		return nil
	}
	return &durabletype.ParentRef{RunID: id.Bytes, Step: step, Result: result}
}

// build wraps the loaded runs for the core, in id order, with the items
// loaded for the call; the core loads the other items of a map step
// through q when it needs them (dag.Run.LoadItems).
func (l *loader) build(ctx context.Context, s *Store, q querier, c *change) error {
	ids := make([]uuid.UUID, len(l.recs))
	for i := range l.recs {
		ids[i] = l.recs[i].shapeID
	}
	shapes, unread, err := s.shapesFor(ctx, q, ids)
	if err != nil {
		return err
	}
	loadItems := func(r *dag.Run, m int) ([]store.Task, error) { return s.loadMapItems(ctx, q, c, r, m) }
	for i := range l.recs {
		rr := &l.recs[i]
		if err := unread[rr.shapeID]; err != nil {
			// A newer engine's run: left alone (dag.Change.Leave).
			err = dag.ForRun(err, &rr.rec)
			s.warnUnread(&rr.rec, rr.shapeID, err)
			c.Leave(rr.rec, err)
			continue
		}
		r, err := dag.Load(rr.rec, shapes[rr.shapeID], l.tasks[rr.rec.ID])
		if err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
		c.load(r, l.cols[rr.rec.ID])
		r.LoadItems = loadItems
	}
	for _, lt := range l.items {
		r := c.byID[lt.task.RunID]
		if r == nil {
			continue
		}
		if err := c.addItems(r, []loadedTask{lt}); err != nil {
			return err
		}
	}
	for body, lts := range l.records {
		r := c.byID[body.run]
		if r == nil {
			continue
		}
		m, ok := r.Shape.Index(body.name)
		if !ok || !r.Shape.IsFunc(m) {
			continue
		}
		if err := c.addItems(r, lts); err != nil {
			return err
		}
		if err := r.SetRecords(m, nil); err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
	}
	c.eventBase = l.eventBase
	return nil
}

// loadMapItems loads every item of map step m of r inside the call's
// transaction (dag.Run.LoadItems).
func (s *Store) loadMapItems(ctx context.Context, q querier, c *change, r *dag.Run, m int) ([]store.Task, error) {
	prefix := dag.ItemPrefix(r.Shape.Name(m))
	rows, err := s.queryRouted(ctx, q, s.q.loadMapItems, [16]byte(r.Rec.ID), prefix, upperBound(prefix))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Task
	for rows.Next() {
		var lt loadedTask
		if err := scanTask(rows, &lt.task, &lt.cols, true); err != nil {
			return nil, err
		}
		key := itemRef{r.Rec.ID, lt.task.Name}
		if _, ok := c.itemCols[key]; !ok {
			ec := lt.cols
			c.itemCols[key] = &ec
		}
		out = append(out, lt.task)
	}
	return out, rows.Err()
}

// upperBound returns the least string greater than every string starting
// with prefix, whose last byte is ASCII and below 0x7f.
func upperBound(prefix string) string {
	return prefix[:len(prefix)-1] + string(prefix[len(prefix)-1]+1)
}

// itemRefs returns the items among the task names of refs, to load with
// their runs.
func itemRefs(runs []uuid.UUID, names []string) []itemRef {
	var out []itemRef
	for k, name := range names {
		if _, _, ok := dag.ParseItem(name); ok {
			out = append(out, itemRef{runs[k], name})
		}
	}
	return out
}

// taskIndex returns the index of the task named name in r, and false when
// it is not loaded (or not there).
func taskIndex(r *dag.Run, name string) (int, bool) {
	if step, k, ok := dag.ParseItem(name); ok {
		m, ok := r.Shape.Index(step)
		if !ok || m >= r.Shape.Len() {
			return 0, false
		}
		return r.ItemIndex(m, k)
	}
	i, ok := r.Shape.Index(name)
	if !ok || i >= len(r.Tasks) {
		return 0, false
	}
	return i, true
}
