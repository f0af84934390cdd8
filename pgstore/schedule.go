package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/cronslot"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

var _ store.Scheduler = (*Store)(nil)

func scanSchedule(row pgx.Row) (*durabletype.Schedule, error) {
	sc, shape, err := scanScheduleRaw(row)
	if err != nil {
		return nil, err
	}
	sc.Shape = new(durabletype.Shape)
	if err := json.Unmarshal(shape, sc.Shape); err != nil {
		return nil, fmt.Errorf("pgstore: schedule %s/%s: decode shape: %w", sc.Tenant, sc.Name, err)
	}
	return sc, nil
}

// scanScheduleRaw reads a schedule without decoding its shape, returned
// as recorded.
func scanScheduleRaw(row pgx.Row) (*durabletype.Schedule, []byte, error) {
	var sc durabletype.Schedule
	var shape []byte
	var next, last pgtype.Timestamptz
	var lastRun pgtype.UUID
	if err := row.Scan(p16(&sc.ID), &sc.Tenant, &sc.Name, &sc.Workflow, &sc.Input, &sc.Cron, &sc.TimeZone, &shape,
		&sc.Paused, &next, &last, &lastRun, &sc.Error, &sc.CreatedAt, &sc.UpdatedAt, &sc.Declared, &sc.DeclaredPaused); err != nil {
		return nil, nil, err
	}
	sc.NextAt, sc.LastSlot = tm(next), tm(last)
	if lastRun.Valid {
		sc.LastRunID = lastRun.Bytes
	}
	return &sc, shape, nil
}

func (s *Store) dbNow(ctx context.Context, q querier, t time.Time) (time.Time, error) {
	if t = nowOf(t); !t.IsZero() {
		return t, nil
	}
	err := q.QueryRow(ctx, s.q.now).Scan(&t)
	return t, err
}

func notFound(k durabletype.ScheduleKey) error {
	return fmt.Errorf("pgstore: schedule %s/%s: %w", k.Tenant, k.Name, durabletype.ErrScheduleNotFound)
}

// CreateSchedule implements store.Scheduler.
func (s *Store) CreateSchedule(ctx context.Context, p *store.CreateScheduleParams) (*durabletype.Schedule, error) {
	var out *durabletype.Schedule
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now, err := s.dbNow(ctx, tx, p.Now)
		if err != nil {
			return err
		}
		next, err := cronslot.Check(p, now)
		if err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
		shape, err := json.Marshal(p.Shape)
		if err != nil {
			return fmt.Errorf("pgstore: %w: shape: %w", durabletype.ErrInvalidSchedule, err)
		}
		var nextAt pgtype.Timestamptz
		if !next.IsZero() {
			nextAt = pgtype.Timestamptz{Time: next, Valid: true}
		}
		row := tx.QueryRow(ctx, s.q.createSchedule,
			p16(&p.ID), p.Tenant, p.Name, p.Workflow, p.Input, p.Cron, p.TimeZone, string(shape), p.Paused, nextAt, now)
		out, err = scanSchedule(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("pgstore: schedule %s/%s (or ID %s): %w", p.Tenant, p.Name, p.ID, durabletype.ErrScheduleExists)
		}
		if err != nil {
			return err
		}
		if !p.Paused {
			_, err = tx.Exec(ctx, s.q.notify, s.channel, []string{string(store.TopicSchedule)})
		}
		return err
	})
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// GetSchedule implements store.Scheduler.
func (s *Store) GetSchedule(ctx context.Context, p *store.GetScheduleParams) (*durabletype.Schedule, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, s.q.getSchedule, p.Key.Tenant, p.Key.Name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(p.Key)
	}
	if err != nil {
		return nil, classify(fmt.Errorf("pgstore: get schedule: %w", err))
	}
	return sc, nil
}

// ListSchedules implements store.Scheduler.
func (s *Store) ListSchedules(ctx context.Context, p *store.ListSchedulesParams) (*store.ListSchedulesResult, error) {
	if p.Limit < 1 {
		return nil, fmt.Errorf("pgstore: list schedules: limit %d: %w", p.Limit, durabletype.ErrInvalidSchedule)
	}
	var afterT, afterN pgtype.Text
	if p.After != nil {
		afterT = pgtype.Text{String: p.After.Tenant, Valid: true}
		afterN = pgtype.Text{String: p.After.Name, Valid: true}
	}
	rows, err := s.pool.Query(ctx, s.q.listSchedules, pgtype.Text{String: p.Tenant, Valid: p.Tenant != ""}, afterT, afterN, p.Limit+1)
	if err != nil {
		return nil, classify(fmt.Errorf("pgstore: list schedules: %w", err))
	}
	defer rows.Close()
	res := &store.ListSchedulesResult{}
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, err
		}
		res.Schedules = append(res.Schedules, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("pgstore: list schedules: %w", err))
	}
	if len(res.Schedules) > p.Limit {
		res.Schedules, res.More = res.Schedules[:p.Limit], true
	}
	return res, nil
}

// PauseSchedule implements store.Scheduler.
func (s *Store) PauseSchedule(ctx context.Context, p *store.PauseScheduleParams) (*durabletype.Schedule, error) {
	var out *durabletype.Schedule
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now, err := s.dbNow(ctx, tx, p.Now)
		if err != nil {
			return err
		}
		sc, err := scanSchedule(tx.QueryRow(ctx, s.q.lockSchedule, p.Key.Tenant, p.Key.Name))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(p.Key)
		}
		if err != nil {
			return err
		}
		out = sc
		row, err := cronslot.Pause(sc, p.Paused, now)
		if err != nil {
			return fmt.Errorf("pgstore: schedule %s/%s: %w: %w", p.Key.Tenant, p.Key.Name, durabletype.ErrInvalidSchedule, err)
		}
		if row == nil {
			return nil
		}
		out, err = scanSchedule(tx.QueryRow(ctx, s.q.pauseSchedule, p.Key.Tenant, p.Key.Name, row.Paused, stamp(row.NextAt), row.UpdatedAt, row.Error))
		if err != nil {
			return err
		}
		if !row.Paused {
			_, err = tx.Exec(ctx, s.q.notify, s.channel, []string{string(store.TopicSchedule)})
		}
		return err
	})
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// DeleteSchedule implements store.Scheduler.
func (s *Store) DeleteSchedule(ctx context.Context, p *store.DeleteScheduleParams) error {
	ct, err := s.pool.Exec(ctx, s.q.deleteSchedule, p.Key.Tenant, p.Key.Name)
	if err != nil {
		return classify(fmt.Errorf("pgstore: delete schedule: %w", err))
	}
	if ct.RowsAffected() == 0 {
		return notFound(p.Key)
	}
	return nil
}

// FireSchedules implements store.Scheduler. While nothing is due it costs
// one statement, the earliest next_at read from the partial index of active
// schedules. Otherwise one transaction locks up to Limit due schedules
// (FOR UPDATE SKIP LOCKED: another leader's batch is skipped, and a row it
// updated is re-checked and found not due), creates their runs (runs
// already there are skipped: their slots were fired), moves their next_at
// and commits. A schedule whose run cannot be made (its expression or shape
// no longer valid) is marked broken instead of failing the batch.
func (s *Store) FireSchedules(ctx context.Context, p *store.FireSchedulesParams) (*store.FireSchedulesResult, error) {
	res, err := s.fireSchedules(ctx, p)
	return res, classify(s.notLeader(ctx, err))
}

func (s *Store) nextSchedule(ctx context.Context, q querier, now time.Time, res *store.FireSchedulesResult) (due bool, at time.Time, err error) {
	var next pgtype.Timestamptz
	var now0 pgtype.Timestamptz
	if !now.IsZero() {
		now0 = pgtype.Timestamptz{Time: now, Valid: true}
	}
	if err := q.QueryRow(ctx, s.q.scheduleCheck, now0).Scan(&next, &at); err != nil {
		return false, at, fmt.Errorf("pgstore: next schedule: %w", err)
	}
	res.HasNext, res.Next = false, 0
	if !next.Valid {
		return false, at, nil
	}
	res.HasNext, res.Next = true, max(next.Time.Sub(at), 0)
	return !next.Time.After(at), at, nil
}

func (s *Store) fireSchedules(ctx context.Context, p *store.FireSchedulesParams) (*store.FireSchedulesResult, error) {
	res := &store.FireSchedulesResult{}
	now := nowOf(p.Now)
	if due, _, err := s.nextSchedule(ctx, s.pool, now, res); err != nil || !due {
		return res, err
	}
	limit := max(p.Limit, 1)
	var newShapes []uuid.UUID
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res.Fired, res.Broken, res.More = nil, nil, false
		newShapes = nil
		plans, args := s.plans(ctx)
		if _, err := tx.Exec(ctx, plans, args...); err != nil {
			return err
		}
		at, err := s.dbNow(ctx, tx, now)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, s.q.dueSchedules, at, limit)
		if err != nil {
			return err
		}
		var due []*durabletype.Schedule
		res.Left = 0
		for rows.Next() {
			sc, shape, err := scanScheduleRaw(rows)
			if err != nil {
				rows.Close()
				return err
			}
			// A schedule a newer release recorded, with a shape this
			// engine cannot read, is left to a newer engine: not fired,
			// not broken.
			_, unread := dag.ReadShape(sc.ID.String(), shape)
			if cronslot.Leaves(sc, p.Shapes, unread) {
				res.Left++
				s.warnUnreadSchedule(sc, dag.ForRun(unread, &store.Run{Workflow: sc.Workflow, Tenant: sc.Tenant}))
				continue
			}
			sc.Shape = new(durabletype.Shape)
			if err := json.Unmarshal(shape, sc.Shape); err != nil {
				sc.Shape = nil // the registered shape is used (cronslot.Leaves)
			}
			due = append(due, sc)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		res.More = len(due)+res.Left == limit

		type fire struct {
			sc *durabletype.Schedule
			f  cronslot.Firing
		}
		var fires []fire
		var ids []uuid.UUID
		var brokenT, brokenN, brokenE []string
		broken := func(sc *durabletype.Schedule, err error) {
			brokenT, brokenN, brokenE = append(brokenT, sc.Tenant), append(brokenN, sc.Name), append(brokenE, err.Error())
			res.Broken = append(res.Broken, store.BrokenSchedule{Key: durabletype.ScheduleKey{Tenant: sc.Tenant, Name: sc.Name}, Error: err.Error()})
		}
		for _, sc := range due {
			f, ok, err := cronslot.Plan(sc, at, p.Shapes)
			if err == nil && ok {
				// Checked alone, so that one bad schedule fails alone.
				_, err = s.prepareCreate(&store.CreateRunsParams{Now: at, Runs: []store.NewRun{f.Run}})
			}
			switch {
			case err != nil:
				broken(sc, err)
			case ok:
				fires = append(fires, fire{sc, f})
				ids = append(ids, f.Run.ID)
			}
		}
		exists := map[uuid.UUID]bool{}
		if len(ids) > 0 {
			rs, err := s.queryRouted(ctx, tx, s.q.runsExist, u16(ids))
			if err != nil {
				return err
			}
			for rs.Next() {
				var id uuid.UUID
				var wf, tenant string
				if err := rs.Scan(p16(&id), &wf, &tenant); err != nil {
					rs.Close()
					return err
				}
				exists[id] = true
			}
			rs.Close()
			if err := rs.Err(); err != nil {
				return err
			}
		}
		var runs []store.NewRun
		schedIDs := make([][16]byte, len(fires))
		nexts := make([]pgtype.Timestamptz, len(fires))
		slots := make([]time.Time, len(fires))
		runIDs := make([][16]byte, len(fires))
		for i, fr := range fires {
			if !exists[fr.f.Run.ID] {
				runs = append(runs, fr.f.Run)
			}
			schedIDs[i], runIDs[i], slots[i] = fr.sc.ID, fr.f.Run.ID, fr.f.Fire
			if !fr.f.Next.IsZero() {
				nexts[i] = pgtype.Timestamptz{Time: fr.f.Next, Valid: true}
			}
			res.Fired = append(res.Fired, store.FiredSlot{
				Schedule: fr.sc.ID, Tenant: fr.sc.Tenant, Name: fr.sc.Name, Slot: fr.f.Fire, RunID: fr.f.Run.ID,
				At: at, Missed: fr.f.Missed,
			})
		}
		if len(runs) > 0 {
			prep, err := s.prepareCreate(&store.CreateRunsParams{Now: at, Runs: runs})
			if err != nil {
				return err
			}
			if _, newShapes, err = s.create(ctx, tx, prep, false); err != nil {
				return err
			}
		}
		b := &pgx.Batch{}
		if len(fires) > 0 {
			b.Queue(s.q.advanceSchedules, schedIDs, nexts, slots, runIDs, at)
		}
		if len(brokenT) > 0 {
			b.Queue(s.q.breakSchedules, brokenT, brokenN, brokenE, at)
		}
		if b.Len() > 0 {
			if err := s.sendBatch(ctx, tx, b).Close(); err != nil {
				return err
			}
		}
		_, _, err = s.nextSchedule(ctx, tx, at, res)
		return err
	})
	if err != nil {
		return nil, s.fireError(err)
	}
	if len(newShapes) > 0 {
		at := time.Now()
		s.mu.Lock()
		for _, id := range newShapes {
			s.stored[id] = at
		}
		s.mu.Unlock()
	}
	return res, nil
}

func (s *Store) fireError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" && pgErr.ConstraintName == "runs_shape_id_fkey" {
		// A shape this process believed stored is gone (the schema was
		// recreated): forget what it knew; the next call stores it.
		s.mu.Lock()
		clear(s.stored)
		s.mu.Unlock()
	}
	return fmt.Errorf("pgstore: fire schedules: %w", err)
}
