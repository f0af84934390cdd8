-- durable 002, reverted: one frontier and one lane per tenant again.
DROP INDEX {{schema}}.tasks_due_at_idx;
CREATE INDEX tasks_due_at_idx ON {{schema}}.tasks (due_at) WHERE due_at IS NOT NULL;

ALTER TABLE {{schema}}.ready DROP CONSTRAINT ready_pkey;
ALTER TABLE {{schema}}.ready ADD PRIMARY KEY (id);

ALTER TABLE {{schema}}.frontier DROP COLUMN workflows;

ALTER TABLE {{schema}}.tenants ADD COLUMN last_block bigint;
UPDATE {{schema}}.tenants t SET last_block = l.last_block
FROM (SELECT tenant, max(last_block) AS last_block FROM {{schema}}.lanes GROUP BY tenant) l
WHERE l.tenant = t.name;
DROP TABLE {{schema}}.lanes;
