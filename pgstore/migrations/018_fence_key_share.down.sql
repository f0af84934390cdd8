CREATE OR REPLACE FUNCTION {{schema}}.fence(t bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM {{schema}}.leader WHERE one AND term = t AND expires_at > clock_timestamp() FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'durable: term % is not the current leader''s', t USING ERRCODE = 'DU001';
    END IF;
END
$$;

DROP INDEX {{schema}}.leader_term_key;
