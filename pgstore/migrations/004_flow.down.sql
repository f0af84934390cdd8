-- durable 004, reverted.
ALTER TABLE {{schema}}.incoming DROP COLUMN priority;
DROP INDEX {{schema}}.ready_priority_idx;
ALTER TABLE {{schema}}.ready DROP COLUMN priority;
DROP INDEX {{schema}}.tasks_timeout_idx;
ALTER TABLE {{schema}}.tasks DROP COLUMN timeout_us;
ALTER TABLE {{schema}}.tasks DROP COLUMN timeout_at;
DROP INDEX {{schema}}.runs_deadline_idx;
ALTER TABLE {{schema}}.runs DROP COLUMN deadline_at;
ALTER TABLE {{schema}}.runs DROP COLUMN priority;
DROP INDEX {{schema}}.runs_idem_key_idx;
ALTER TABLE {{schema}}.runs DROP COLUMN idem_key;
