DROP INDEX {{schema}}.ready_rate_until_idx;
ALTER TABLE {{schema}}.ready DROP COLUMN rate_until;
DROP TABLE {{schema}}.rate_limits;
DROP TABLE {{schema}}.concurrency_waiting;
DROP TABLE {{schema}}.concurrency_slots;
ALTER TABLE {{schema}}.tasks DROP COLUMN ckey, DROP COLUMN rkey;
