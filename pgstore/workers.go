package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

var (
	_ store.WorkerRegistry  = (*Store)(nil)
	_ store.LeaderRefresher = (*Store)(nil)
)

// LeaderRefresh implements store.LeaderRefresher: while an engine leads,
// each renewal of its lease (every third of Config.LeaderLease) also
// refreshes its worker record's last_seen. A renewal that fails is tried
// again within the lease, so the record is refreshed at least every half
// lease while the engine leads.
func (s *Store) LeaderRefresh() time.Duration { return s.lease / 2 }

// RegisterWorker implements store.WorkerRegistry with one statement (an
// upsert).
func (s *Store) RegisterWorker(ctx context.Context, p *store.RegisterWorkerParams) error {
	w := &p.Worker
	if err := dag.CheckWorker(w); err != nil {
		return err
	}
	workflows, accepts := w.Workflows, w.Accepts
	if workflows == nil {
		workflows = []string{}
	}
	if accepts == nil {
		accepts = []string{}
	}
	_, err := s.pool.Exec(ctx, s.q.registerWorker,
		w.ID, w.Host, w.Version, workflows, w.Concurrency, w.InFlight, w.Leader, w.DeadAfter.Microseconds(),
		stamp(nowOf(p.Now)), p.Started, accepts, schemaLevel())
	if err != nil {
		return classify(fmt.Errorf("pgstore: register worker: %w", err))
	}
	return nil
}

// RemoveWorker implements store.WorkerRegistry.
func (s *Store) RemoveWorker(ctx context.Context, p *store.RemoveWorkerParams) error {
	if _, err := s.pool.Exec(ctx, s.q.removeWorker, p.ID); err != nil {
		return classify(fmt.Errorf("pgstore: remove worker: %w", err))
	}
	return nil
}

// ListWorkers implements store.WorkerRegistry. Liveness is judged on the
// database's clock (or at p.Now), by dag.WorkerLive. The leader is the
// worker holding the leader's lease (elector.go) while it has not expired,
// on the database's clock: a leader that died or froze is not listed as
// the leader once its lease expired, whatever its record says, and never
// beside the next one.
func (s *Store) ListWorkers(ctx context.Context, p *store.ListWorkersParams) (*store.ListWorkersResult, error) {
	rows, err := s.pool.Query(ctx, s.q.listWorkers, stamp(nowOf(p.Now)))
	if err != nil {
		return nil, classify(fmt.Errorf("pgstore: list workers: %w", err))
	}
	defer rows.Close()
	res := &store.ListWorkersResult{}
	for rows.Next() {
		var (
			id, host, version  pgtype.Text
			workflows, accepts []string
			conc, inFlight     pgtype.Int4
			leader             pgtype.Bool // as the worker last reported it; the lease decides

			deadAfter                 pgtype.Int8
			startedAt, lastSeen, now0 pgtype.Timestamptz
			holder                    bool
		)
		if err := rows.Scan(&now0, &id, &host, &version, &workflows, &conc, &inFlight, &leader, &deadAfter,
			&startedAt, &lastSeen, &accepts, &holder); err != nil {
			return nil, fmt.Errorf("pgstore: list workers: %w", err)
		}
		res.Now = now0.Time
		if !id.Valid {
			continue // no workers: the row of now alone
		}
		if len(workflows) == 0 {
			workflows = nil
		}
		if len(accepts) == 0 {
			accepts = nil
		}
		w := store.Worker{
			ID: id.String, Host: host.String, Version: version.String, Workflows: workflows, Accepts: accepts,
			Concurrency: int(conc.Int32), InFlight: int(inFlight.Int32), Leader: holder,
			DeadAfter: time.Duration(deadAfter.Int64) * time.Microsecond,
			StartedAt: startedAt.Time, LastSeen: lastSeen.Time,
		}
		w.Live = dag.WorkerLive(w.LastSeen, res.Now, w.DeadAfter)
		res.Workers = append(res.Workers, w)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("pgstore: list workers: %w", err))
	}
	return res, nil
}

// PruneWorkers implements store.WorkerRegistry. One statement reads the
// records not seen for dag.WorkerPruneAfter (as a rescue's query, it only
// preselects); dag.WorkerPrunable decides, and a second statement deletes
// those, unless they were refreshed in between.
func (s *Store) PruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (*store.PruneWorkersResult, error) {
	res, err := s.pruneWorkers(ctx, p)
	return res, classify(s.notLeader(ctx, err))
}

func (s *Store) pruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (*store.PruneWorkersResult, error) {
	rows, err := s.pool.Query(ctx, s.q.staleWorkers, stamp(nowOf(p.Now)), dag.WorkerPruneAfter.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("pgstore: prune workers: %w", err)
	}
	var ids []string
	var seen []time.Time
	for rows.Next() {
		var id string
		var lastSeen, now time.Time
		var deadAfter int64
		if err := rows.Scan(&id, &lastSeen, &deadAfter, &now); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgstore: prune workers: %w", err)
		}
		if dag.WorkerPrunable(lastSeen, now, time.Duration(deadAfter)*time.Microsecond) {
			ids, seen = append(ids, id), append(seen, lastSeen)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: prune workers: %w", err)
	}
	res := &store.PruneWorkersResult{}
	if len(ids) == 0 {
		return res, nil
	}
	ct, err := s.execFenced(ctx, s.q.deleteWorkers, ids, seen)
	if err != nil {
		return nil, fmt.Errorf("pgstore: prune workers: %w", err)
	}
	res.Deleted = int(ct.RowsAffected())
	return res, nil
}
