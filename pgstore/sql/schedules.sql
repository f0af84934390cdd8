-- Schedules (schedule.go, declare.go; the rules are internal/core/cronslot's).
-- The statements that return schedules return the columns scanSchedule
-- reads, in its order (TestStatementVariants holds them to one list).

-- name: createSchedule
INSERT INTO {{schema}}.schedules (id, tenant, name, workflow, input, cron, time_zone, shape, paused, next_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
ON CONFLICT DO NOTHING
RETURNING id, tenant, name, workflow, input, cron, time_zone, shape, paused, next_at, last_slot, last_run_id,
          coalesce(error, ''), created_at, updated_at, declared, declared_paused;

-- name: getSchedule
SELECT id, tenant, name, workflow, input, cron, time_zone, shape, paused, next_at, last_slot, last_run_id,
       coalesce(error, ''), created_at, updated_at, declared, declared_paused
FROM {{schema}}.schedules WHERE tenant = $1 AND name = $2;

-- name: listSchedules
-- A page of the schedules of the tenant $1 (any when NULL), after the
-- cursor ($2, $3) when given, in key order.
SELECT id, tenant, name, workflow, input, cron, time_zone, shape, paused, next_at, last_slot, last_run_id,
       coalesce(error, ''), created_at, updated_at, declared, declared_paused
FROM {{schema}}.schedules
WHERE ($1::text IS NULL OR tenant = $1) AND ($2::text IS NULL OR (tenant, name) > ($2, $3::text))
ORDER BY tenant, name LIMIT $4;

-- name: lockSchedule
SELECT id, tenant, name, workflow, input, cron, time_zone, shape, paused, next_at, last_slot, last_run_id,
       coalesce(error, ''), created_at, updated_at, declared, declared_paused
FROM {{schema}}.schedules WHERE tenant = $1 AND name = $2 FOR UPDATE;

-- name: pauseSchedule
-- The record cronslot.Pause decided.
UPDATE {{schema}}.schedules SET paused = $3, next_at = $4, updated_at = $5, error = nullif($6, '')
WHERE tenant = $1 AND name = $2
RETURNING id, tenant, name, workflow, input, cron, time_zone, shape, paused, next_at, last_slot, last_run_id,
          coalesce(error, ''), created_at, updated_at, declared, declared_paused;

-- name: deleteSchedule
DELETE FROM {{schema}}.schedules WHERE tenant = $1 AND name = $2;

-- name: scheduleCheck
-- The next schedule due and the time, read before FireSchedules opens a
-- transaction.
SELECT min(next_at), coalesce($1, now()) FROM {{schema}}.schedules WHERE NOT paused AND next_at IS NOT NULL;

-- name: dueSchedules
SELECT id, tenant, name, workflow, input, cron, time_zone, shape, paused, next_at, last_slot, last_run_id,
       coalesce(error, ''), created_at, updated_at, declared, declared_paused
FROM {{schema}}.schedules
WHERE NOT paused AND next_at IS NOT NULL AND next_at <= $1
ORDER BY next_at LIMIT $2 FOR UPDATE SKIP LOCKED;

-- name: advanceSchedules
-- The schedules fired: their next slot, and the slot and run just fired.
UPDATE {{schema}}.schedules s SET next_at = u.next_at, last_slot = u.slot, last_run_id = u.run_id, updated_at = $5
FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::uuid[]) AS u(id, next_at, slot, run_id)
WHERE s.id = u.id;

-- name: breakSchedules
-- The schedules that cannot fire, with the error that says why: they stop
-- until changed.
UPDATE {{schema}}.schedules s SET next_at = NULL, error = u.error, updated_at = $4
FROM unnest($1::text[], $2::text[], $3::text[]) AS u(tenant, name, error)
WHERE s.tenant = u.tenant AND s.name = u.name;

-- name: lockDeclared
-- DeclareSchedules: the schedules declared before for the workflows $3,
-- and those of the keys ($1, $2) declared now, locked.
SELECT id, tenant, name, workflow, input, cron, time_zone, shape, paused, next_at, last_slot, last_run_id,
       coalesce(error, ''), created_at, updated_at, declared, declared_paused
FROM {{schema}}.schedules
WHERE (declared AND workflow = ANY($3::text[]))
   OR (tenant, name) IN (SELECT * FROM unnest($1::text[], $2::text[]))
ORDER BY tenant, name FOR UPDATE;

-- name: insertDeclared
INSERT INTO {{schema}}.schedules (id, tenant, name, workflow, input, cron, time_zone, shape, paused, next_at,
    created_at, updated_at, declared, declared_paused)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, true, $12);

-- name: updateDeclared
-- last_slot and last_run_id are FireSchedules' alone.
UPDATE {{schema}}.schedules SET workflow = $3, input = $4, cron = $5, time_zone = $6, shape = $7, paused = $8,
    next_at = $9, error = $10, updated_at = $11, declared_paused = $12
WHERE tenant = $1 AND name = $2;
