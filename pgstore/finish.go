package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// FinishTasks implements store.Store. Outcomes are applied in order; several
// outcomes of one run are applied to the run loaded once.
func (s *Store) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	if len(p.Outcomes) == 0 {
		return []store.FinishResult{}, nil
	}
	f, err := newFinish(p)
	if err != nil {
		return nil, err
	}
	if err := retryRaced(func(lockReady bool) error { return s.transition(ctx, f.plan(lockReady)) }); err != nil {
		return nil, classify(err)
	}
	return f.results(), nil
}

// finish is one FinishTasks call: its outcomes, the runs and items they
// touch, and their results once applied.
type finish struct {
	p       *store.FinishTasksParams
	ids     []uuid.UUID
	items   []itemRef
	records []itemRef // function bodies whose records to load
	res     []store.FinishResult
	cascade []store.SettledRun
}

func newFinish(p *store.FinishTasksParams) (*finish, error) {
	f := &finish{p: p, ids: make([]uuid.UUID, 0, len(p.Outcomes))}
	seen := make(map[uuid.UUID]bool, len(p.Outcomes))
	for k := range p.Outcomes {
		if !dag.ValidOutcome(&p.Outcomes[k]) {
			return nil, fmt.Errorf("pgstore: outcome %d: %w: kind %d", k, durabletype.ErrInvalidOutcome, p.Outcomes[k].Kind)
		}
		ref := p.Outcomes[k].Task
		if id := ref.RunID; !seen[id] {
			seen[id] = true
			f.ids = append(f.ids, id)
		}
		if _, _, ok := dag.ParseItem(ref.Step); ok {
			f.items = append(f.items, itemRef{ref.RunID, ref.Step})
		}
		if dag.HasRecords(&p.Outcomes[k]) {
			f.records = append(f.records, itemRef{ref.RunID, ref.Step})
		}
	}
	return f, nil
}

// plan returns the transition that applies the outcomes.
func (f *finish) plan(lockReady bool) *plan {
	f.cascade = nil
	return &plan{
		now:       nowOf(f.p.Now),
		ids:       f.ids,
		items:     f.items,
		records:   f.records,
		lockReady: lockReady,
		settled:   &f.cascade,
		omit:      true,
		apply: func(c *change) error {
			f.res = c.Finish(f.p.Outcomes, func(ref store.TaskRef) (*dag.Run, int, bool) {
				if r := c.byID[ref.RunID]; r != nil {
					i, ok := taskIndex(r, ref.Step)
					return r, i, ok
				}
				return nil, 0, false
			})
			return nil
		},
	}
}

// results returns the results of the applied outcomes, with the cascade of
// the call on the first.
func (f *finish) results() []store.FinishResult {
	f.res[0].Cascade = f.cascade
	return f.res
}

// Heartbeat implements store.Store: it stamps the claims whose tasks still
// run under them and asks dag.Current which claims are lost, in one round
// trip.
func (s *Store) Heartbeat(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	res := &store.HeartbeatResult{}
	if len(p.Tasks) == 0 {
		return res, nil
	}
	type found struct {
		task   store.Task
		status durabletype.RunStatus
	}
	byOrd := make(map[int64]found, len(p.Tasks))
	runs := make([]uuid.UUID, len(p.Tasks))
	names := make([]string, len(p.Tasks))
	tokens := make([]int64, len(p.Tasks))
	for i, ref := range p.Tasks {
		runs[i], names[i], tokens[i] = ref.RunID, ref.Step, ref.Token
	}
	b := &pgx.Batch{}
	b.Queue(s.q.genericPlans)
	b.Queue(s.q.heartbeatTasks, u16(runs), names, tokens, stamp(nowOf(p.Now))).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var ord int64
			var f found
			var kind, state, status string
			if err := rows.Scan(&ord, &kind, &state, &f.task.Token, &status, &f.task.Error); err != nil {
				return err
			}
			f.task.Kind, f.task.State, f.status = durabletype.TaskKind(kind), durabletype.TaskState(state), durabletype.RunStatus(status)
			byOrd[ord] = f
		}
		return rows.Err()
	})
	if err := s.sendBatch(ctx, s.pool, b).Close(); err != nil {
		return nil, classify(fmt.Errorf("pgstore: heartbeat: %w", err))
	}
	for i, ref := range p.Tasks {
		f, ok := byOrd[int64(i+1)]
		if !ok || !dag.Current(&f.task, ref.Token, f.status) {
			res.Lost = append(res.Lost, ref)
			switch {
			case ok && dag.LostToCancel(&f.task, f.status):
				res.Cancelled = append(res.Cancelled, ref)
			case ok && dag.LostToTimeout(&f.task):
				res.TimedOut = append(res.TimedOut, ref)
			}
		}
	}
	return res, nil
}

// FireTimers implements store.Store: the earliest due timers first (ties by
// run id, then shape order), each fired by dag.Run.Wake once its run is
// locked. An idle store costs one statement: the next timer is read first,
// and nothing more happens unless one is due.
func (s *Store) FireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
	res, err := s.fireTimers(ctx, p)
	return res, classify(s.notLeader(ctx, err))
}

func (s *Store) fireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
	res := &store.FireTimersResult{}
	at := stamp(nowOf(p.Now))
	var next pgtype.Timestamptz
	var now time.Time
	if err := s.pool.QueryRow(ctx, s.q.timerCheck, at).Scan(&next, &now); err != nil {
		return nil, fmt.Errorf("pgstore: next timer: %w", err)
	}
	if !next.Valid || next.Time.After(now) {
		if next.Valid {
			res.HasNext, res.Next = true, next.Time.Sub(now)
		}
		return res, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // LIMIT NULL: no limit
	}
	// A call whose batch of due timers was taken up in part by runs it
	// left alone (their shapes are unreadable here: dag.Change.Leave)
	// looks again past them, so that they cannot hold back the timers
	// behind them; a few rounds at most, then the duty calls again.
	var passOver []uuid.UUID
	for round := 0; ; round++ {
		r, left, full, err := s.fireDue(ctx, p, limit, passOver)
		if err != nil {
			return nil, err
		}
		res.Fired += r.Fired
		res.Left += r.Left
		res.Settled = append(res.Settled, r.Settled...)
		res.HasNext, res.Next = r.HasNext, r.Next
		if !full || len(left) == 0 || round == maxPassOver {
			return res, nil
		}
		passOver = append(passOver, left...)
	}
}

// maxPassOver is the most extra rounds of one FireTimers call past timers
// of runs it left alone.
const maxPassOver = 3

// fireDue fires the timers due, up to limit of them (negative: no limit),
// but those of the runs of passOver, in one transition. It returns the
// runs it left alone, and whether the batch of due timers was full.
func (s *Store) fireDue(ctx context.Context, p *store.FireTimersParams, limit int, passOver []uuid.UUID) (res *store.FireTimersResult, left []uuid.UUID, full bool, _ error) {
	res = &store.FireTimersResult{}
	at := stamp(nowOf(p.Now))
	var next pgtype.Timestamptz
	type due struct {
		run  uuid.UUID
		idx  int
		name string
	}
	var fire []due
	var items []itemRef
	var locks []int64
	rows, err := s.pool.Query(ctx, s.q.dueTimers, at, nullLimit(limit), u16(passOver))
	if err != nil {
		return nil, nil, false, fmt.Errorf("pgstore: due timers: %w", err)
	}
	for rows.Next() {
		var d due
		var idx int32
		var name, tenant, waitKey pgtype.Text
		if err := rows.Scan(p16(&d.run), &idx, &name, &tenant, &waitKey); err != nil {
			rows.Close()
			return nil, nil, false, fmt.Errorf("pgstore: due timers: %w", err)
		}
		if waitKey.Valid {
			if _, sig := dag.ParseWaitKey(waitKey.String); !sig {
				locks = append(locks, s.eventLock(tenant.String, waitKey.String))
			}
		}
		d.idx, d.name = int(idx), name.String
		if _, _, ok := dag.ParseItem(d.name); ok {
			items = append(items, itemRef{d.run, d.name})
		}
		fire = append(fire, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, false, fmt.Errorf("pgstore: due timers: %w", err)
	}
	full = limit > 0 && len(fire) == limit
	ids := make([]uuid.UUID, 0, len(fire))
	for _, d := range fire {
		ids = append(ids, d.run)
	}
	err = retryRaced(func(lockReady bool) error {
		*res, left = store.FireTimersResult{}, nil
		return s.transition(ctx, &plan{
			now:       nowOf(p.Now),
			ids:       distinct(ids),
			items:     items,
			lockReady: lockReady,
			// A message pending for a task whose wait times out now (an
			// event sent just before) is applied first; the waits' event
			// keys are locked before the messages are read, so that an
			// event being sent is either seen or finds the wait ended.
			inbox:   true,
			locks:   locks,
			settled: &res.Settled,
			apply: func(c *change) error {
				var due []dag.Due
				for _, d := range fire {
					r := c.byID[d.run]
					if r == nil && c.Left(d.run) != nil {
						res.Left++
						left = append(left, d.run)
					}
					if r == nil || d.idx >= len(r.Tasks) {
						continue
					}
					if d.idx == -1 { // the run's deadline
						due = append(due, dag.Due{R: r, Kind: dag.DueDeadline})
					} else if i, found := taskIndex(r, d.name); found {
						kind := dag.DueTask
						if d.idx <= -2 { // a rate-limit window ended unclaimed
							kind = dag.DueLapsed
						}
						due = append(due, dag.Due{R: r, I: i, Kind: kind})
					}
				}
				res.Fired = c.Fire(due, p.Rand)
				return nil
			},
			extra: func(b *pgx.Batch, c *change) {
				b.Queue(s.q.nextTimer).QueryRow(func(row pgx.Row) error {
					if err := row.Scan(&next); err != nil {
						return err
					}
					if next.Valid {
						res.HasNext = true
						res.Next = max(next.Time.Sub(c.Now), 0)
					}
					return nil
				})
			},
		})
	})
	if err != nil {
		return nil, nil, false, err
	}
	return res, distinct(left), full, nil
}

// RescueTasks implements store.Store. One statement finds the candidates
// (RUNNING tasks whose claim and last heartbeat are DeadAfter old, in run id
// and shape order) and whether the leader's other chores are due: promoting
// incoming tasks whose notification was lost, pruning obsolete frontier
// rows, applying messages for runs that a process left pending. Candidates
// are rescued first, by dag.Run.Rescue once their runs are locked, which
// decides on the heartbeats as they are then; the chores follow.
func (s *Store) RescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	res, err := s.rescueTasks(ctx, p)
	return res, classify(s.notLeader(ctx, err))
}

// cand is a candidate for a rescue.
type cand struct {
	run  uuid.UUID
	idx  int
	name string
}

func (s *Store) rescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	var dead []cand
	var items []itemRef
	var incoming, prune bool
	var pending pgtype.Int8
	var recycle []string
	// Times are whole microseconds, so "now - last >= DeadAfter" is "last <=
	// now - DeadAfter rounded up to a microsecond".
	micros := (p.DeadAfter + time.Microsecond - 1) / time.Microsecond
	rows, err := s.pool.Query(ctx, s.q.leaderCheck, stamp(nowOf(p.Now)), int64(micros), nullLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("pgstore: rescue: %w", err)
	}
	for rows.Next() {
		var run pgtype.UUID
		var idx pgtype.Int4
		var name pgtype.Text
		if err := rows.Scan(&run, &idx, &name, &incoming, &prune, &pending, &recycle); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: rescue: %w", err)
		}
		if run.Valid {
			dead = append(dead, cand{uuid.UUID(run.Bytes), int(idx.Int32), name.String})
			if _, _, ok := dag.ParseItem(name.String); ok {
				items = append(items, itemRef{run.Bytes, name.String})
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: rescue: %w", err)
	}
	res := &store.RescueTasksResult{}
	// The dead workers' steps first: their runs wait for them, and the
	// chores can take seconds on a busy machine.
	if err := s.rescueDead(ctx, p, dead, items, res); err != nil {
		return nil, err
	}
	if incoming {
		if _, err := s.promote(ctx); err != nil {
			return nil, err
		}
	}
	if prune {
		if _, err := s.execFenced(ctx, s.q.pruneFrontier); err != nil {
			return nil, fmt.Errorf("pgstore: prune frontier: %w", err)
		}
	}
	if len(recycle) > 0 {
		// A failure to recycle is logged, not returned: the pass's rescues
		// stand, and the next pass tries again (unless this engine no
		// longer leads).
		if _, err := s.recycleQueues(ctx, recycle); err != nil {
			if err := s.notLeader(ctx, err); errors.Is(err, durabletype.ErrNotLeader) {
				return nil, err
			}
			s.log.Error("pgstore: recycling a queue table", "error", err)
		}
	}
	// Messages left pending since the previous pass at least (the store
	// applies those of its calls right after they commit, so that a
	// younger one is likely being applied now): a process died before it
	// applied them.
	if mark := s.inboxMark.Swap(pending.Int64); mark > 0 && pending.Valid {
		applied, err := s.applyPending(ctx, &store.ApplyInboxParams{Now: p.Now}, min(mark, pending.Int64))
		if err != nil {
			return nil, err
		}
		res.Settled = append(res.Settled, applied.Settled...)
	}
	return res, nil
}

// rescueDead rescues the candidates of a leader pass (dag.Run.Rescue).
func (s *Store) rescueDead(ctx context.Context, p *store.RescueTasksParams, dead []cand, items []itemRef, res *store.RescueTasksResult) error {
	if len(dead) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, 0, len(dead))
	for _, d := range dead {
		ids = append(ids, d.run)
	}
	return retryRaced(func(lockReady bool) error {
		res.Rescued, res.Workflows, res.Settled = nil, nil, nil
		return s.transition(ctx, &plan{
			now:       nowOf(p.Now),
			ids:       distinct(ids),
			items:     items,
			lockReady: lockReady,
			settled:   &res.Settled,
			apply: func(c *change) error {
				var at []dag.TaskAt
				for _, d := range dead {
					if r := c.byID[d.run]; r != nil {
						if i, found := taskIndex(r, d.name); found {
							at = append(at, dag.TaskAt{R: r, I: i})
						}
					}
				}
				res.Rescued, res.Workflows = c.Rescue(at, p.DeadAfter, p.Rand)
				return nil
			},
		})
	})
}

// nullLimit turns a negative limit into SQL NULL (LIMIT NULL: no limit).
func nullLimit(n int) pgtype.Int8 {
	if n < 0 {
		return pgtype.Int8{}
	}
	return pgtype.Int8{Int64: int64(n), Valid: true}
}

func distinct(ids []uuid.UUID) []uuid.UUID {
	seen := make(map[uuid.UUID]bool, len(ids))
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
