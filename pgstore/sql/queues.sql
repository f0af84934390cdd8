-- The queue tables (ready, incoming, inbox, concurrency_waiting) hold work
-- that waits to be taken: a row is inserted, then deleted once taken. Each
-- delete leaves a dead row that only VACUUM would make room of, and a
-- server whose autovacuum is off or falls behind grows them without end.
-- The leader recycles them whole instead (recycle.go): with few live rows
-- left, it takes the table's exclusive lock, reads what is left, truncates
-- the table and writes those rows back. These fragments are those steps;
-- {{table}} is one of the queue tables, named by recycle.go.

-- fragment: recycleLock
-- Waits at most lock_timeout (SET LOCAL before it) for the transactions
-- using the table to end; new ones queue behind it until it commits.
LOCK TABLE {{schema}}.{{table}} IN ACCESS EXCLUSIVE MODE

-- fragment: recycleRead
-- Every live row, to write back after the truncate (at most
-- recycleMaxLive: the leader check found them few; more than
-- recycleReadLimit, and the leader gives up this time).
SELECT * FROM {{schema}}.{{table}} LIMIT {{recycleReadLimit}}

-- fragment: recycleTruncate
-- A new, empty file for the table; the identity columns' sequences go on
-- (CONTINUE IDENTITY), so ids are never reused.
TRUNCATE {{schema}}.{{table}} CONTINUE IDENTITY
