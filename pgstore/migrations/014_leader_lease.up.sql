-- durable 014: leadership is a lease (see docs/semantics.md, "Leader", and
-- pgstore/elector.go).
--
-- The one row of the leader table is the lease: term counts the
-- leaderships (the fencing token), worker holds the lease until
-- expires_at, on the database's clock, and has since since. A candidate
-- takes the lease when it has expired (term + 1); the leader renews it
-- while its term is still the row's. Nothing lives in a session, so the
-- election works through a pooler in transaction mode; the advisory lock
-- and the backend that held it (pid) are gone.
ALTER TABLE {{schema}}.leader
    DROP COLUMN pid,
    ADD COLUMN term       bigint NOT NULL DEFAULT 0,
    ADD COLUMN expires_at timestamptz NOT NULL DEFAULT '-infinity';
INSERT INTO {{schema}}.leader (one, worker, since) VALUES (true, '', now()) ON CONFLICT (one) DO NOTHING;

-- fence(term) is the first statement of every leader-only write made
-- under a leader's term (store.WithTerm): it fails with SQLSTATE DU001
-- unless term is the lease's and the lease has not expired, and otherwise
-- holds the lease row FOR SHARE until the transaction ends, so that a
-- takeover (an UPDATE of the row) waits for the fenced transaction to
-- commit or roll back. A leader that lost its lease therefore applies
-- nothing after another took over: what it wrote committed before, or is
-- refused.
CREATE FUNCTION {{schema}}.fence(t bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM {{schema}}.leader WHERE one AND term = t AND expires_at > clock_timestamp() FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'durable: term % is not the current leader''s', t USING ERRCODE = 'DU001';
    END IF;
END
$$;
