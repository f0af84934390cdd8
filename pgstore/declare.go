package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/cronslot"
	"github.com/effectivelabs/durable/store"
)

var _ store.ScheduleDeclarer = (*Store)(nil)

// DeclareSchedules implements store.ScheduleDeclarer in one transaction.
// Declarations are serialized by a transaction advisory lock (keyed by the
// schema), so that engines starting at once apply them one after the
// other: the first creates or updates, the others find the schedules as
// declared and write nothing. The rows concerned are locked (FOR UPDATE,
// in key order), cronslot.Declare decides, and the changes are written in
// one round trip. The leader's FireSchedules skips rows locked here (SKIP
// LOCKED) and finds them updated afterwards.
func (s *Store) DeclareSchedules(ctx context.Context, p *store.DeclareSchedulesParams) (*store.DeclareSchedulesResult, error) {
	var res *store.DeclareSchedulesResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = &store.DeclareSchedulesResult{}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("declare", s.schema)); err != nil {
			return err
		}
		now, err := s.dbNow(ctx, tx, p.Now)
		if err != nil {
			return err
		}
		tenants := make([]string, len(p.Schedules))
		names := make([]string, len(p.Schedules))
		for i, d := range p.Schedules {
			tenants[i], names[i] = d.Tenant, d.Name
		}
		workflows := p.Workflows
		if workflows == nil {
			workflows = []string{}
		}
		rows, err := tx.Query(ctx, s.q.lockDeclared, tenants, names, workflows)
		if err != nil {
			return err
		}
		var loaded []*durabletype.Schedule
		for rows.Next() {
			sc, err := scanSchedule(rows)
			if err != nil {
				rows.Close()
				return err
			}
			loaded = append(loaded, sc)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		decided, err := cronslot.Declare(p, loaded, now)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		wake := false
		for _, d := range decided {
			switch d.Action {
			case cronslot.DeclareKeep:
				res.Unchanged = append(res.Unchanged, d.Key)
				continue
			case cronslot.DeclareDelete:
				b.Queue(s.q.deleteSchedule, d.Key.Tenant, d.Key.Name)
				res.Deleted = append(res.Deleted, d.Key)
				continue
			}
			r := d.Row
			shape, err := json.Marshal(r.Shape)
			if err != nil {
				return fmt.Errorf("pgstore: %w: shape: %w", durabletype.ErrInvalidSchedule, err)
			}
			errText := pgtype.Text{String: r.Error, Valid: r.Error != ""}
			if d.Action == cronslot.DeclareCreate {
				b.Queue(s.q.insertDeclared,
					p16(&r.ID), r.Tenant, r.Name, r.Workflow, r.Input, r.Cron, r.TimeZone, string(shape), r.Paused,
					stamp(r.NextAt), now, r.DeclaredPaused)
				res.Created = append(res.Created, d.Key)
			} else {
				// last_slot and last_run_id are FireSchedules' alone.
				b.Queue(s.q.updateDeclared,
					r.Tenant, r.Name, r.Workflow, r.Input, r.Cron, r.TimeZone, string(shape), r.Paused,
					stamp(r.NextAt), errText, now, r.DeclaredPaused)
				res.Updated = append(res.Updated, d.Key)
			}
			wake = wake || d.Wake
		}
		if wake {
			b.Queue(s.q.notify, s.channel, []string{string(store.TopicSchedule)})
		}
		if b.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			// A schedule created through the API between the read and the
			// write (the declarations' lock does not cover CreateSchedule).
			return nil, fmt.Errorf("pgstore: declare schedules: %w: %s", durabletype.ErrScheduleExists, pgErr.Detail)
		}
		return nil, classify(fmt.Errorf("pgstore: declare schedules: %w", err))
	}
	return res, nil
}
