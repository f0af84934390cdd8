DROP TABLE {{schema}}.rate_limits;
DROP TABLE {{schema}}.concurrency_waiting;
DROP TABLE {{schema}}.concurrency_slots;
ALTER TABLE {{schema}}.tasks DROP COLUMN ckey, DROP COLUMN rkey;
