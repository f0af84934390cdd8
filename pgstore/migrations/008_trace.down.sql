ALTER TABLE {{schema}}.runs DROP COLUMN trace_parent;
