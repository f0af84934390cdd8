-- durable 016: finding runs by the caller's own keys (store.RunFilter's
-- IdempotencyKey and InputContains; docs/operating.md, "Finding runs").
--
-- A run is found by its idempotency key alone, newest first, through this
-- index; it holds only the runs created with a key, so a trigger without
-- one writes nothing more. (runs_idem_key_idx, unique per workflow and
-- tenant, cannot serve a lookup that names neither.)
CREATE INDEX runs_idem_key_created_idx ON {{schema}}.runs (idem_key, created_at, id) WHERE idem_key IS NOT NULL;

-- input_json(input) is a run's input as jsonb, or NULL when it is not
-- JSON (a Codec other than JSON, or a string holding \u0000, which jsonb
-- refuses): the input filter then skips the run instead of failing the
-- listing. Inputs are not indexed: a GIN index would cost every trigger a
-- write; the filter applies to the runs the other conditions select,
-- newest first, until the page is full.
CREATE FUNCTION {{schema}}.input_json(input bytea) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN convert_from(input, 'UTF8')::jsonb;
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;
