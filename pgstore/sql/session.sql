-- Statements that read or write no table: the planner settings each
-- transaction of the store starts with, the database's clock,
-- notifications and transaction advisory locks.

-- name: genericPlans
-- The store's statements are prepared once per connection and executed
-- with array parameters; PostgreSQL's default (auto) keeps re-planning
-- them as custom plans, which costs as much as running them. Every
-- transaction the store owns starts with this; a caller's transaction
-- (CreateRunsTx) is left alone.
--
-- A generic plan lives as long as the connection (or until the table is
-- next analyzed), so one made while the tables were nearly empty would
-- keep scanning them whole as they grow. Every statement here reaches its
-- rows by key, so sequential scans are priced out
-- (TestGenericPlansUseIndexes checks each plan on an empty schema). JIT is
-- off: the inflated cost of the few scans that remain (the
-- one-row-per-claimer frontier) would otherwise compile them at every
-- execution, for milliseconds each. Parallel workers are off: starting
-- them costs tens of milliseconds here, more than any of these statements
-- should take (a list of the runs in flight took 60-100 ms in a parallel
-- plan, 0.3 ms without).
-- Hash and merge joins are off for the same reason as sequential scans:
-- on a table analyzed while empty, as autovacuum finds the queue tables
-- whenever the workers have caught up, they read the whole table into the
-- join, and the plan is kept while the table fills up. (Nested loops can
-- read a whole index on such statistics too; see deleteReady.
-- TestGenericPlansUseIndexes plans every statement after filling,
-- draining, vacuuming and analyzing the queue tables, and fails on such a
-- read.)
-- A transaction of the store's is idle only between its round trips, for
-- milliseconds: one idle for 10 seconds belongs to a process that stopped
-- in the middle (a paused VM, a SIGSTOP, a partition with the TCP
-- connection still up). The server then ends its session, releasing the
-- runs it locked, which would otherwise hold up every transition of those
-- runs, the leader's rescue of the stopped process's own steps included,
-- until the process came back (TestStoreTransactionsTimeOutIdle).
SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
       set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true),
       set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('idle_in_transaction_session_timeout', '10s', true);

-- name: fencedPlans
-- genericPlans, and the fence of a leader's term $1 (migration 014), in
-- one statement: how a leader-only write's transaction starts.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
       set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true),
       set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('idle_in_transaction_session_timeout', '10s', true), {{schema}}.fence($1);

-- name: listPlans
-- Lists take the first rows in index order; without sorts the planner
-- keeps to that order even where it expects few rows (its estimates on an
-- empty table are what a generic plan keeps). The rest is genericPlans.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
       set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true),
       set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('enable_sort', 'off', true);

-- name: queuePlans
-- Reads of whole queues (the stats, the runs in flight) walk their indexes
-- without bitmaps: a plain index scan marks the entries of deleted rows it
-- meets dead, so that the next read skips them without visiting the heap.
-- Until vacuum, a queue's index holds an entry per task that went through
-- it (a million after a million runs); with bitmap scans every read
-- visited all their heap pages (285 ms for the stats on 1,000,000 runs),
-- with index scans the first read does and the next ones take about 2 ms.
-- The rest is genericPlans.
SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
       set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true),
       set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
       set_config('enable_bitmapscan', 'off', true);

-- name: now
SELECT now();

-- name: notify
-- A notification on channel $1 for each topic of $2.
SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p;

-- name: lockKeys
-- Transaction advisory locks, taken in the order given (sorted by the
-- caller).
SELECT pg_advisory_xact_lock(k.key) FROM unnest($1::bigint[]) WITH ORDINALITY AS k(key, ord) ORDER BY k.ord;

-- name: tryTenantLocks
-- Transaction advisory locks taken where free, in the order given,
-- reporting which were.
SELECT k.name, pg_try_advisory_xact_lock(k.key)
FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS k(name, key, ord) ORDER BY k.ord;

-- name: skipTakenKeys
-- Inside a caller's transaction, runs whose idempotency key another
-- transaction took are skipped instead of failing the insert (and the
-- caller's transaction: migration 017's take_idem_key): $1 is 'on' before
-- insertRunsNew, 'off' after.
SELECT set_config('durable.skip_taken_keys', $1::text, true);
