package main

import (
	"fmt"
	"strings"
)

// design is one data model measured: its tables (DDL, %[1]s is the
// schema) and how its statements differ.
type design struct {
	name string
	desc string
	// ready: the queue is a table of its own (D0, today's engine);
	// otherwise it is a partial index of tasks.
	ready bool
	// fairPred: the queue index's predicate is fair_id IS NOT NULL, and a
	// claim clears fair_id (the claim token keeps it); otherwise the
	// predicate is state = 'QUEUED' and fair_id stays.
	fairPred bool
	// noPriority: the claim has no priority probe (no index serves it).
	noPriority bool
	ddl        string
}

// The tables every design shares: lanes (fair ids), frontier (claimers'
// progress), run_counts (settled runs per minute) and the event id
// sequence, as migrated (pg_dump of a migrated schema).
const sharedDDL = `
CREATE SEQUENCE %[1]s.event_blocks;
CREATE TABLE %[1]s.lanes (
    workflow text NOT NULL COLLATE "C",
    tenant text NOT NULL COLLATE "C",
    grp bigint NOT NULL,
    last_block bigint,
    CONSTRAINT lanes_grp_check CHECK (grp >= 0 AND grp < 1048576),
    CONSTRAINT lanes_pkey PRIMARY KEY (workflow, tenant)
);
CREATE TABLE %[1]s.frontier (
    shard text NOT NULL COLLATE "C",
    block bigint NOT NULL,
    workflows text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT frontier_pkey PRIMARY KEY (shard)
);
CREATE TABLE %[1]s.run_counts (
    minute timestamp with time zone NOT NULL,
    workflow text NOT NULL COLLATE "C",
    tenant text NOT NULL COLLATE "C",
    status text NOT NULL,
    shard smallint NOT NULL,
    n bigint NOT NULL,
    CONSTRAINT run_counts_pkey PRIMARY KEY (minute, workflow, tenant, status, shard)
);
`

// runsDDL is runs_default of migration 017 as a plain table (the
// partitioned parent has no storage of its own; its default partition is
// an ordinary heap with these indexes), at fillfactor 40 (migration 012).
const runsDDL = `
CREATE TABLE %[1]s.runs (
    id uuid NOT NULL,
    workflow text NOT NULL COLLATE "C",
    tenant text NOT NULL COLLATE "C",
    shape_id uuid NOT NULL,
    status text NOT NULL,
    input bytea,
    failed_step text,
    error text,
    created_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    unsuccessful boolean DEFAULT false NOT NULL,
    idem_key text COLLATE "C",
    priority smallint DEFAULT 0 NOT NULL,
    deadline_at timestamp with time zone,
    parent_id uuid,
    parent_step text COLLATE "C",
    parent_result text COLLATE "C",
    trace_parent text,
    version text DEFAULT ''::text NOT NULL COLLATE "C",
    CONSTRAINT runs_priority_check CHECK (priority >= 0 AND priority <= 3),
    CONSTRAINT runs_status_check CHECK (status = ANY (ARRAY['RUNNING'::text, 'COMPLETED'::text, 'FAILED'::text, 'CANCELLED'::text]))
) WITH (fillfactor='40');
ALTER TABLE %[1]s.runs ADD CONSTRAINT runs_pkey PRIMARY KEY (id);
`

const runsIndexesDDL = `
CREATE INDEX runs_created_idx ON %[1]s.runs USING btree (created_at, id);
CREATE INDEX runs_deadline_idx ON %[1]s.runs USING btree (deadline_at, id) WHERE (deadline_at IS NOT NULL);
CREATE INDEX runs_idem_key_created_idx ON %[1]s.runs USING btree (idem_key, created_at, id) WHERE (idem_key IS NOT NULL);
CREATE INDEX runs_parent_idx ON %[1]s.runs USING btree (parent_id, created_at, id) WHERE (parent_id IS NOT NULL);
CREATE INDEX runs_shape_idx ON %[1]s.runs USING btree (shape_id);
CREATE INDEX runs_tenant_created_idx ON %[1]s.runs USING btree (tenant, created_at, id);
CREATE INDEX runs_tenant_unsuccessful_idx ON %[1]s.runs USING btree (tenant, created_at, id) WHERE unsuccessful;
CREATE INDEX runs_unsuccessful_idx ON %[1]s.runs USING btree (created_at, id) WHERE unsuccessful;
CREATE INDEX runs_workflow_created_idx ON %[1]s.runs USING btree (workflow, created_at, id);
`

// tasksColumns are tasks_default's columns (migration 017), to which the
// designs without a ready table add the queue's (%[2]s).
const tasksDDL = `
CREATE TABLE %[1]s.tasks (
    run_id uuid NOT NULL,
    name text NOT NULL COLLATE "C",
    tenant text NOT NULL COLLATE "C",
    idx integer NOT NULL,
    kind text NOT NULL,
    state text NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    token bigint DEFAULT 0 NOT NULL,
    worker text COLLATE "C",
    due_at timestamp with time zone,
    output bytea,
    error text,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    q_id bigint,
    q_at timestamp with time zone,
    q_attempt integer,
    s_id bigint,
    c_id bigint,
    timeout_at timestamp with time zone,
    timeout_us bigint,
    ckey text COLLATE "C",
    rkey text COLLATE "C",
    wait_key text COLLATE "C",
    child_id uuid,
    items integer,
    items_left integer,
    item integer,
    item_input bytea,
    lost integer,%[2]s
    CONSTRAINT tasks_attempt_check CHECK (attempt >= 0),
    CONSTRAINT tasks_idx_check CHECK (idx >= 0),
    CONSTRAINT tasks_kind_check CHECK (kind = ANY (ARRAY['step'::text, 'sleep'::text, 'on_failure'::text, 'event'::text, 'child'::text, 'map'::text, 'item'::text, 'func'::text])),
    CONSTRAINT tasks_state_check CHECK (state = ANY (ARRAY['PENDING'::text, 'QUEUED'::text, 'RUNNING'::text, 'SLEEPING'::text, 'WAITING'::text, 'COMPLETED'::text, 'FAILED'::text, 'SKIPPED'::text, 'CANCELLED'::text]))
) WITH (fillfactor='40');
ALTER TABLE %[1]s.tasks ADD CONSTRAINT tasks_pkey PRIMARY KEY (run_id, name);
`

// The columns the queue needs in tasks when it has no table of its own
// (ready's: the fair id, the workflow and version the claim filters on,
// priority and rate_until; queued_at is tasks.q_at already).
const queueColumns = `
    fair_id bigint,
    workflow text NOT NULL COLLATE "C",
    version text DEFAULT ''::text NOT NULL COLLATE "C",
    priority smallint DEFAULT 0 NOT NULL,
    rate_until timestamp with time zone,`

// The timer indexes of tasks (due times, timeouts): their columns do not
// change on the happy path.
const tasksTimerIndexesDDL = `
CREATE INDEX tasks_due_at_idx ON %[1]s.tasks USING btree (due_at, run_id, idx) WHERE (due_at IS NOT NULL);
CREATE INDEX tasks_timeout_idx ON %[1]s.tasks USING btree (timeout_at, run_id, idx) WHERE (timeout_at IS NOT NULL);
`

const tasksStateIndexesDDL = `
CREATE INDEX tasks_running_idx ON %[1]s.tasks USING btree (tenant) WHERE (state = 'RUNNING'::text);
CREATE INDEX tasks_waiting_idx ON %[1]s.tasks USING btree (tenant, wait_key) WHERE (state = 'WAITING'::text);
`

const readyDDL = `
CREATE TABLE %[1]s.ready (
    id bigint NOT NULL,
    run_id uuid NOT NULL,
    name text NOT NULL COLLATE "C",
    workflow text NOT NULL COLLATE "C",
    tenant text NOT NULL COLLATE "C",
    queued_at timestamp with time zone DEFAULT now() NOT NULL,
    priority smallint DEFAULT 0 NOT NULL,
    rate_until timestamp with time zone,
    version text DEFAULT ''::text NOT NULL COLLATE "C",
    CONSTRAINT ready_id_check CHECK (id > 0)
);
ALTER TABLE %[1]s.ready ADD CONSTRAINT ready_pkey PRIMARY KEY (id, workflow);
ALTER TABLE %[1]s.ready ADD CONSTRAINT ready_run_id_name_key UNIQUE (run_id, name);
CREATE INDEX ready_priority_idx ON %[1]s.ready USING btree (workflow, tenant, priority DESC, id) WHERE (priority > 0);
CREATE INDEX ready_rate_until_idx ON %[1]s.ready USING btree (rate_until, run_id, name) WHERE (rate_until IS NOT NULL);
`

var designs = []design{
	{
		name:  "d0",
		desc:  "today's design: runs (5 indexes written), tasks (pkey, running/waiting/timer partial indexes), ready table (pkey, unique (run_id, name))",
		ready: true,
		ddl: sharedDDL + runsDDL + runsIndexesDDL + fmt.Sprintf(tasksDDL, "%[1]s", "") +
			tasksTimerIndexesDDL + tasksStateIndexesDDL + readyDDL,
	},
	{
		name: "d1",
		desc: "no ready table: tasks carries the queue's columns, queue = partial index (fair_id, workflow) WHERE state = 'QUEUED' AND due_at IS NULL; running/waiting indexes as today",
		ddl: sharedDDL + runsDDL + runsIndexesDDL + fmt.Sprintf(tasksDDL, "%[1]s", queueColumns) +
			tasksTimerIndexesDDL + tasksStateIndexesDDL + `
CREATE INDEX tasks_queue_idx ON %[1]s.tasks USING btree (fair_id, workflow) WHERE (state = 'QUEUED'::text AND due_at IS NULL);
CREATE INDEX tasks_priority_idx ON %[1]s.tasks USING btree (workflow, tenant, priority DESC, fair_id) WHERE (priority > 0 AND state = 'QUEUED'::text);
CREATE INDEX tasks_rate_until_idx ON %[1]s.tasks USING btree (rate_until, run_id, name) WHERE (rate_until IS NOT NULL);
`,
	},
	{
		name:     "d2",
		desc:     "UPPER BOUND of a HOT finish: d1 with no state in any index (queue WHERE fair_id IS NOT NULL, the claim clears fair_id; waiting index on a stored generated column) and NO index of running tasks",
		fairPred: true,
		ddl: sharedDDL + runsDDL + runsIndexesDDL + fmt.Sprintf(tasksDDL, "%[1]s", queueColumns+`
    waiting boolean GENERATED ALWAYS AS (state = 'WAITING') STORED,`) +
			tasksTimerIndexesDDL + `
CREATE INDEX tasks_waiting_idx ON %[1]s.tasks USING btree (tenant, wait_key) WHERE waiting;
CREATE INDEX tasks_queue_idx ON %[1]s.tasks USING btree (fair_id, workflow) WHERE (fair_id IS NOT NULL);
CREATE INDEX tasks_priority_idx ON %[1]s.tasks USING btree (workflow, tenant, priority DESC, fair_id) WHERE (priority > 0 AND fair_id IS NOT NULL);
CREATE INDEX tasks_rate_until_idx ON %[1]s.tasks USING btree (rate_until, run_id, name) WHERE (rate_until IS NOT NULL);
`,
	},
	{
		name:       "d3",
		desc:       "skeletal lower bound: runs with its primary key only; tasks with its primary key and the queue index (fair_id) WHERE fair_id IS NOT NULL only; d2's transactions, less the claim's priority probe",
		fairPred:   true,
		noPriority: true,
		ddl: sharedDDL + runsDDL + fmt.Sprintf(tasksDDL, "%[1]s", queueColumns) + `
CREATE INDEX tasks_queue_idx ON %[1]s.tasks USING btree (fair_id) WHERE (fair_id IS NOT NULL);
`,
	},
	{
		name:     "d4",
		desc:     "beyond the brief: d3 with the columns that a claim, a finish and a settlement change placed last in tasks and runs, so that a same-page update logs only the changed tail (PostgreSQL's prefix/suffix compression of update records)",
		fairPred: true, noPriority: true,
		ddl: sharedDDL + `
CREATE TABLE %[1]s.runs (
    id uuid NOT NULL,
    workflow text NOT NULL COLLATE "C",
    tenant text NOT NULL COLLATE "C",
    shape_id uuid NOT NULL,
    input bytea,
    failed_step text,
    error text,
    created_at timestamp with time zone NOT NULL,
    unsuccessful boolean DEFAULT false NOT NULL,
    idem_key text COLLATE "C",
    priority smallint DEFAULT 0 NOT NULL,
    deadline_at timestamp with time zone,
    parent_id uuid,
    parent_step text COLLATE "C",
    parent_result text COLLATE "C",
    trace_parent text,
    version text DEFAULT ''::text NOT NULL COLLATE "C",
    status text NOT NULL,
    finished_at timestamp with time zone
) WITH (fillfactor='40');
ALTER TABLE %[1]s.runs ADD CONSTRAINT runs_pkey PRIMARY KEY (id);
CREATE TABLE %[1]s.tasks (
    run_id uuid NOT NULL,
    name text NOT NULL COLLATE "C",
    tenant text NOT NULL COLLATE "C",
    idx integer NOT NULL,
    kind text NOT NULL,
    workflow text NOT NULL COLLATE "C",
    version text DEFAULT ''::text NOT NULL COLLATE "C",
    priority smallint DEFAULT 0 NOT NULL,
    q_id bigint,
    q_at timestamp with time zone,
    q_attempt integer,
    timeout_us bigint,
    due_at timestamp with time zone,
    error text,
    heartbeat_at timestamp with time zone,
    ckey text COLLATE "C",
    rkey text COLLATE "C",
    wait_key text COLLATE "C",
    child_id uuid,
    items integer,
    items_left integer,
    item integer,
    item_input bytea,
    lost integer,
    rate_until timestamp with time zone,
    timeout_at timestamp with time zone,
    attempt integer DEFAULT 0 NOT NULL,
    token bigint DEFAULT 0 NOT NULL,
    worker text COLLATE "C",
    started_at timestamp with time zone,
    s_id bigint,
    fair_id bigint,
    state text NOT NULL,
    finished_at timestamp with time zone,
    c_id bigint,
    output bytea
) WITH (fillfactor='40');
ALTER TABLE %[1]s.tasks ADD CONSTRAINT tasks_pkey PRIMARY KEY (run_id, name);
CREATE INDEX tasks_queue_idx ON %[1]s.tasks USING btree (fair_id) WHERE (fair_id IS NOT NULL);
`,
	},
}

func designByName(name string) (design, bool) {
	for _, d := range designs {
		if d.name == name {
			return d, true
		}
	}
	return design{}, false
}

// renderDDL fills the schema into a design's DDL.
func renderDDL(tmpl, schema string) string {
	return strings.ReplaceAll(tmpl, "%[1]s", schema)
}
