DROP FUNCTION {{schema}}.input_json(bytea);
DROP INDEX {{schema}}.runs_idem_key_created_idx;
