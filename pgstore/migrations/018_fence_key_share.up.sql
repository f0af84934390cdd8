-- durable 018: a fenced write no longer holds up its own leader's renewal
-- (see docs/semantics.md, "Leader").
--
-- term becomes a key (a unique index; the table has one row), and the
-- fence holds the lease row FOR KEY SHARE instead of FOR SHARE. A
-- takeover changes term, so its UPDATE takes the row FOR UPDATE and still
-- waits for every fenced transaction to end: what a leader wrote under
-- its term commits before the next term begins, or is refused. A renewal
-- or a release changes only expires_at: its UPDATE takes the row FOR NO
-- KEY UPDATE, which a key share does not block. Before, a fenced write
-- that waited (a new leader's rescue waiting for the locks of a frozen
-- process's open transaction, until the server ends that session) held
-- up the leader's renewal, and the leader lost its lease to its own
-- write.
CREATE UNIQUE INDEX leader_term_key ON {{schema}}.leader (term);

CREATE OR REPLACE FUNCTION {{schema}}.fence(t bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM {{schema}}.leader WHERE one AND term = t AND expires_at > clock_timestamp() FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'durable: term % is not the current leader''s', t USING ERRCODE = 'DU001';
    END IF;
END
$$;
