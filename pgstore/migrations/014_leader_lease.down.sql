DROP FUNCTION {{schema}}.fence(bigint);
DELETE FROM {{schema}}.leader;
ALTER TABLE {{schema}}.leader
    DROP COLUMN term,
    DROP COLUMN expires_at,
    ADD COLUMN pid integer NOT NULL;
