-- durable: drop the initial schema's objects (the schema itself is kept).
DROP TABLE IF EXISTS {{schema}}.events;
DROP SEQUENCE IF EXISTS {{schema}}.event_blocks;
DROP TABLE IF EXISTS {{schema}}.frontier;
DROP TABLE IF EXISTS {{schema}}.tenants;
DROP SEQUENCE IF EXISTS {{schema}}.tenant_groups;
DROP TABLE IF EXISTS {{schema}}.incoming;
DROP TABLE IF EXISTS {{schema}}.ready;
DROP TABLE IF EXISTS {{schema}}.tasks;
DROP TABLE IF EXISTS {{schema}}.runs;
DROP TABLE IF EXISTS {{schema}}.shapes;
