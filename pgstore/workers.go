package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/store"
)

var (
	_ store.WorkerRegistry  = (*Store)(nil)
	_ store.LeaderRefresher = (*Store)(nil)
)

// LeaderRefresh implements store.LeaderRefresher: while an engine leads,
// the health check of its election connection (every 5s, plus the round
// trip) is an update of its worker record's last_seen instead of an empty
// ping.
func (s *Store) LeaderRefresh() time.Duration { return s.health + pingTimeout }

const workerCols = `id, host, version, workflows, concurrency, in_flight, leader, dead_after, started_at, last_seen, accepts`

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
	_, err := s.pool.Exec(ctx, render(s.schema, `
INSERT INTO {{schema}}.workers AS w (`+workerCols+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9::timestamptz, now()), coalesce($9::timestamptz, now()), $11)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, version = excluded.version, workflows = excluded.workflows, accepts = excluded.accepts,
    concurrency = excluded.concurrency, in_flight = excluded.in_flight, leader = excluded.leader,
    dead_after = excluded.dead_after, last_seen = excluded.last_seen,
    started_at = CASE WHEN $10::boolean THEN excluded.started_at ELSE w.started_at END`),
		w.ID, w.Host, w.Version, workflows, w.Concurrency, w.InFlight, w.Leader, w.DeadAfter.Microseconds(),
		stamp(nowOf(p.Now)), p.Started, accepts)
	if err != nil {
		return classify(fmt.Errorf("pgstore: register worker: %w", err))
	}
	return nil
}

// RemoveWorker implements store.WorkerRegistry.
func (s *Store) RemoveWorker(ctx context.Context, p *store.RemoveWorkerParams) error {
	if _, err := s.pool.Exec(ctx, render(s.schema, `DELETE FROM {{schema}}.workers WHERE id = $1`), p.ID); err != nil {
		return classify(fmt.Errorf("pgstore: remove worker: %w", err))
	}
	return nil
}

// ListWorkers implements store.WorkerRegistry. Liveness is judged on the
// database's clock (or at p.Now), by dag.WorkerLive. The leader is the
// worker named in the leader table (written by the elector's connection as
// soon as it holds the leader's advisory lock) while that connection's
// backend holds the lock now, as pg_locks says: a leader whose session died
// (its process was killed, its connection dropped) is not listed as the
// leader beside the next one, whatever its record says. Reading pg_locks
// costs the listing a look at the lock table; it costs an idle worker
// nothing.
func (s *Store) ListWorkers(ctx context.Context, p *store.ListWorkersParams) (*store.ListWorkersResult, error) {
	key := uint64(lockKey("leader", s.schema))
	rows, err := s.pool.Query(ctx, render(s.schema, `
SELECT n.now, `+workerCols+`, coalesce(w.id = l.worker, false)
FROM (SELECT coalesce($1::timestamptz, now()) AS now) n
LEFT JOIN {{schema}}.workers w ON true
LEFT JOIN (
    SELECT ld.worker FROM {{schema}}.leader ld
    WHERE EXISTS (SELECT FROM pg_locks k
                  WHERE k.locktype = 'advisory' AND k.granted AND k.pid = ld.pid
                    AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND k.classid = $2::bigint::oid AND k.objid = $3::bigint::oid AND k.objsubid = 1)
) l ON true
ORDER BY w.id`), stamp(nowOf(p.Now)), int64(key>>32), int64(key&0xffffffff))
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
			leader             pgtype.Bool // as the worker last reported it; the lock decides

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
	return res, classify(err)
}

func (s *Store) pruneWorkers(ctx context.Context, p *store.PruneWorkersParams) (*store.PruneWorkersResult, error) {
	rows, err := s.pool.Query(ctx, render(s.schema, `
WITH n AS (SELECT coalesce($1::timestamptz, now()) AS now)
SELECT id, last_seen, dead_after, n.now FROM {{schema}}.workers, n
WHERE last_seen <= n.now - make_interval(secs => $2::bigint / 1e6)`),
		stamp(nowOf(p.Now)), dag.WorkerPruneAfter.Microseconds())
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
	ct, err := s.pool.Exec(ctx, render(s.schema, `
DELETE FROM {{schema}}.workers w USING unnest($1::text[], $2::timestamptz[]) AS c(id, seen)
WHERE w.id = c.id AND w.last_seen = c.seen`), ids, seen)
	if err != nil {
		return nil, fmt.Errorf("pgstore: prune workers: %w", err)
	}
	res.Deleted = int(ct.RowsAffected())
	return res, nil
}
