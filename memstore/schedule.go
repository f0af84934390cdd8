package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/cronslot"
	"github.com/effectivelabs/durable/store"
)

var _ store.Scheduler = (*Store)(nil)

func cloneSchedule(sc *durabletype.Schedule) *durabletype.Schedule {
	c := *sc
	c.Input = clone(sc.Input)
	return &c
}

// CreateSchedule implements store.Scheduler.
func (s *Store) CreateSchedule(ctx context.Context, p *store.CreateScheduleParams) (*durabletype.Schedule, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := now(p.Now)
	next, err := cronslot.Check(p, t)
	if err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	key := durabletype.ScheduleKey{Tenant: p.Tenant, Name: p.Name}
	s.mu.Lock()
	if s.schedules == nil {
		s.schedules = make(map[durabletype.ScheduleKey]*durabletype.Schedule)
	}
	if _, ok := s.schedules[key]; ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("memstore: schedule %s/%s: %w", p.Tenant, p.Name, durabletype.ErrScheduleExists)
	}
	for _, sc := range s.schedules {
		if sc.ID == p.ID {
			s.mu.Unlock()
			return nil, fmt.Errorf("memstore: schedule ID %s: %w", p.ID, durabletype.ErrScheduleExists)
		}
	}
	sc := &durabletype.Schedule{
		ID: p.ID, Tenant: p.Tenant, Name: p.Name, Workflow: p.Workflow, Input: clone(p.Input),
		Cron: p.Cron, TimeZone: p.TimeZone, Shape: p.Shape, Paused: p.Paused, NextAt: next,
		CreatedAt: t, UpdatedAt: t,
	}
	s.schedules[key] = sc
	out := cloneSchedule(sc)
	s.mu.Unlock()
	if !p.Paused {
		s.publishTopic(store.TopicSchedule)
	}
	return out, nil
}

func (s *Store) publishTopic(topic store.Topic) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for _, deliver := range s.subs {
		deliver(store.Notification{Topic: topic})
	}
}

// GetSchedule implements store.Scheduler.
func (s *Store) GetSchedule(ctx context.Context, p *store.GetScheduleParams) (*durabletype.Schedule, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.schedules[p.Key]
	if !ok {
		return nil, fmt.Errorf("memstore: schedule %s/%s: %w", p.Key.Tenant, p.Key.Name, durabletype.ErrScheduleNotFound)
	}
	return cloneSchedule(sc), nil
}

func compareKeys(a, b durabletype.ScheduleKey) int {
	return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Name, b.Name))
}

// ListSchedules implements store.Scheduler.
func (s *Store) ListSchedules(ctx context.Context, p *store.ListSchedulesParams) (*store.ListSchedulesResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Limit < 1 {
		return nil, fmt.Errorf("memstore: list schedules: limit %d: %w", p.Limit, durabletype.ErrInvalidSchedule)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*durabletype.Schedule
	for k, sc := range s.schedules {
		if (p.Tenant == "" || k.Tenant == p.Tenant) && (p.After == nil || compareKeys(k, *p.After) > 0) {
			all = append(all, sc)
		}
	}
	slices.SortFunc(all, func(a, b *durabletype.Schedule) int {
		return compareKeys(durabletype.ScheduleKey{Tenant: a.Tenant, Name: a.Name}, durabletype.ScheduleKey{Tenant: b.Tenant, Name: b.Name})
	})
	res := &store.ListSchedulesResult{}
	if len(all) > p.Limit {
		all, res.More = all[:p.Limit], true
	}
	for _, sc := range all {
		res.Schedules = append(res.Schedules, cloneSchedule(sc))
	}
	return res, nil
}

// PauseSchedule implements store.Scheduler.
func (s *Store) PauseSchedule(ctx context.Context, p *store.PauseScheduleParams) (*durabletype.Schedule, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := now(p.Now)
	s.mu.Lock()
	sc, ok := s.schedules[p.Key]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("memstore: schedule %s/%s: %w", p.Key.Tenant, p.Key.Name, durabletype.ErrScheduleNotFound)
	}
	row, err := cronslot.Pause(sc, p.Paused, t)
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("memstore: schedule %s/%s: %w: %w", p.Key.Tenant, p.Key.Name, durabletype.ErrInvalidSchedule, err)
	}
	resumed := row != nil && !row.Paused
	if row != nil {
		*sc = *row
	}
	out := cloneSchedule(sc)
	s.mu.Unlock()
	if resumed {
		s.publishTopic(store.TopicSchedule)
	}
	return out, nil
}

// DeleteSchedule implements store.Scheduler.
func (s *Store) DeleteSchedule(ctx context.Context, p *store.DeleteScheduleParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.schedules[p.Key]; !ok {
		return fmt.Errorf("memstore: schedule %s/%s: %w", p.Key.Tenant, p.Key.Name, durabletype.ErrScheduleNotFound)
	}
	delete(s.schedules, p.Key)
	return nil
}

// FireSchedules implements store.Scheduler. A schedule whose run cannot be
// created (its shape is invalid, the fair queue has no room for its tenant)
// is marked broken rather than failing the call, so that it never stops the
// others.
func (s *Store) FireSchedules(ctx context.Context, p *store.FireSchedulesParams) (*store.FireSchedulesResult, error) {
	if err := s.fenced(ctx); err != nil {
		return nil, err
	}
	limit := max(p.Limit, 1)
	t := now(p.Now)
	res := &store.FireSchedulesResult{}
	var n notes
	s.mu.Lock()
	var due []*durabletype.Schedule
	for _, sc := range s.schedules {
		if !sc.Paused && !sc.NextAt.IsZero() && !sc.NextAt.After(t) {
			due = append(due, sc)
		}
	}
	slices.SortFunc(due, func(a, b *durabletype.Schedule) int {
		return cmp.Or(a.NextAt.Compare(b.NextAt), compareKeys(durabletype.ScheduleKey{Tenant: a.Tenant, Name: a.Name}, durabletype.ScheduleKey{Tenant: b.Tenant, Name: b.Name}))
	})
	if len(due) > limit {
		due, res.More = due[:limit], true
	}
	for _, sc := range due {
		key := durabletype.ScheduleKey{Tenant: sc.Tenant, Name: sc.Name}
		f, ok, err := cronslot.Plan(sc, t, p.Shapes)
		if err == nil && ok {
			if _, exists := s.runs[f.Run.ID]; !exists {
				_, err = s.createRuns(&store.CreateRunsParams{Now: t, Runs: []store.NewRun{f.Run}}, t, &n)
			}
		}
		if err != nil {
			sc.NextAt, sc.Error, sc.UpdatedAt = time.Time{}, err.Error(), t
			res.Broken = append(res.Broken, store.BrokenSchedule{Key: key, Error: sc.Error})
			continue
		}
		if !ok {
			continue
		}
		sc.NextAt, sc.LastSlot, sc.LastRunID, sc.UpdatedAt = f.Next, f.Fire, f.Run.ID, t
		res.Fired = append(res.Fired, store.FiredSlot{
			Schedule: sc.ID, Tenant: sc.Tenant, Name: sc.Name, Slot: f.Fire, RunID: f.Run.ID, At: t, Missed: f.Missed,
		})
	}
	var next time.Time
	for _, sc := range s.schedules {
		if !sc.Paused && !sc.NextAt.IsZero() && (next.IsZero() || sc.NextAt.Before(next)) {
			next = sc.NextAt
		}
	}
	s.mu.Unlock()
	s.publish(&n)
	if !next.IsZero() {
		res.HasNext, res.Next = true, max(next.Sub(t), 0)
	}
	return res, nil
}

var _ store.ScheduleDeclarer = (*Store)(nil)

// DeclareSchedules implements store.ScheduleDeclarer: under the store's
// lock, as cronslot.Declare decides.
func (s *Store) DeclareSchedules(ctx context.Context, p *store.DeclareSchedulesParams) (*store.DeclareSchedulesResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := now(p.Now)
	s.mu.Lock()
	var loaded []*durabletype.Schedule
	for _, sc := range s.schedules {
		if cronslot.Loads(p, sc) {
			loaded = append(loaded, cloneSchedule(sc))
		}
	}
	decided, err := cronslot.Declare(p, loaded, t)
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("memstore: %w", err)
	}
	for _, d := range decided {
		if d.Action != cronslot.DeclareCreate {
			continue
		}
		for _, sc := range s.schedules {
			if sc.ID == d.Row.ID {
				s.mu.Unlock()
				return nil, fmt.Errorf("memstore: schedule ID %s: %w", sc.ID, durabletype.ErrScheduleExists)
			}
		}
	}
	if s.schedules == nil {
		s.schedules = make(map[durabletype.ScheduleKey]*durabletype.Schedule)
	}
	res := &store.DeclareSchedulesResult{}
	wake := false
	for _, d := range decided {
		switch d.Action {
		case cronslot.DeclareKeep:
			res.Unchanged = append(res.Unchanged, d.Key)
		case cronslot.DeclareCreate:
			s.schedules[d.Key] = cloneSchedule(d.Row)
			res.Created = append(res.Created, d.Key)
		case cronslot.DeclareUpdate:
			s.schedules[d.Key] = cloneSchedule(d.Row)
			res.Updated = append(res.Updated, d.Key)
		case cronslot.DeclareDelete:
			delete(s.schedules, d.Key)
			res.Deleted = append(res.Deleted, d.Key)
		}
		wake = wake || d.Wake
	}
	s.mu.Unlock()
	if wake {
		s.publishTopic(store.TopicSchedule)
	}
	return res, nil
}
