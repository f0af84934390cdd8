package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/effectivelabs/durable/cmd/durable/internal/bench"
	"github.com/effectivelabs/durable/internal/tools/cliflag"
)

const benchUsage = `Usage: durable bench --database-url URL --scenario NAME [flags]

Measures durable on PostgreSQL and prints the figures next to their goals
(and, where comparable, River's and Hatchet's figures on the same machine
kind). Each run works in a fresh schema, durable_bench_<random>, dropped at
the end unless --keep. Times come from the database's own timestamps.

Scenarios:
  single    --runs one-step bench-noop runs (100,000) inserted first, then
            worked: runs/s from the first claim to the last completion
            (goal ≥ 20,000), and the insert rate
  dag       --runs bench-dag runs (10,000; root → 8 parallel → join, 10
            tasks each) inserted first, then worked: tasks/s (goal ≥ 15,000)
  func      --runs bench-func runs (10,000; a durable function making 10
            no-op durable.Do calls in a row: 100,000 steps) inserted first,
            then worked: steps/s from the first claim to the last
            completion, to compare with dag's tasks/s on the same machine
            (goal ≥ 15,000, dag's: a step run inline by a claimed function
            should cost less than a claimed task)
  latency   --runs bench-chain runs (500; a → b) triggered one at a time to
            idle, listening workers: trigger → first step started and parent
            completed → child started, p50/p95/p99/max (goals p50 ≤ 2 ms,
            p99 ≤ 10 ms)
  fairness  --tenants tenants (10) with backlogs of --tenant-step, 2×, ...
            runs (100 ... 1,000) worked together: Jain's index over the
            completions while all are backlogged (goal ≥ 0.99); then tenant B
            queues --runs runs (10,000) and tenant A one, and one worker with
            concurrency 1 starts: A's claim position (goal ≤ 2)
  idle      --workers idle workers (3) on an empty queue, in a scratch
            database created for the run: statements per second over
            --duration (60s) of the leader and of each other worker (goal
            ≤ 1 each). The server counts them: the scratch database logs
            every statement (log_statement = 'all', which needs a
            superuser), and each "statement:" or "execute" line of the
            server log between two marker statements counts, pings, BEGIN
            and COMMIT included, for the worker owning its backend PID. The
            log is pg_current_logfile() with the logging collector on, else
            --server-log (default: Debian's file for the cluster,
            /var/log/postgresql/postgresql-<version>-<cluster>.log). Without
            a usable log: pg_stat_statements calls when loaded, else
            pg_stat_database transactions, which undercount statements. The
            report says which method counted. In-process workers are also
            counted on their connections (pgx tracer, round trips)
  list      --runs runs (1,000,000) created through the engine over --tenants
            tenants (100) while workers work them: 1% fail, up to 300 stay
            in flight (a day-long sleep), the rest complete; the setup time
            is reported. The runs table is then vacuumed and analyzed, and
            ListRuns pages of 50 are timed --repeat times each (200),
            p50/p95/p99: the first page, a deep page (half-way down, its
            cursor found by walking pages of 1,000), and the first pages of
            a tenant (and a deep one), status FAILED, status RUNNING, a
            creation-time range, a tenant's FAILED and RUNNING runs, and a
            workflow; and Stats (checked against the runs). Goal: first and
            deep page p50 ≤ 5 ms. --autovacuum applies during the setup, as
            for soak
  soak      one-step bench-noop runs triggered at --rate runs/s (5,000) for
            --duration (10m) in small batches, with the workers'
            Config.Retention at --retention (1m), so that the leader prunes
            all along. Every --sample (10s): runs triggered and completed,
            p50/p99 trigger → completed (database times) of the runs
            completed in the interval, runs in flight and kept, runs
            pruned, each table of the schema (its size with indexes and
            its dead tuples), and Stats and the runs list's first page
            (median of 3 calls each). Goals, on the run's second half (at
            5,000 runs/s for 20 minutes with 1 minute of retention: the
            last 10): the last minute's throughput, p99, Stats and list
            within 5% of the early minute's, the one opening that half
            (Stats and list: or within 1 ms), the last minute at ≥ 95% of
            the rate, and the tables' largest size after the early minute
            within 5% of their largest in it (a plateau, peaks against
            peaks: partitions dropped whole make a sawtooth). A window is
            min(1 minute, --duration/5). --autovacuum says who vacuums:
            the server's autovacuum, or the bench standing in for it (the
            same thresholds, naptime and cost delay) when the server has it
            off, as by default
  cron      --runs schedules (10,000) of bench-noop firing every minute,
            created through the engine, then workers for --duration (150s):
            each minute boundary fires every schedule. Slots fired per
            second at a boundary, fire lag p50/p99/max (run created after
            its slot time), and a check that each boundary fired every
            schedule exactly once
  map       one bench-map run of --runs items (10,000; list → items, a
            map step running a no-op per item → join), created first,
            then worked: items/s from the first item claimed to the last
            completed, the fan-out (map step claimed → its items queued,
            and → the first item claimed) and the join (last item → join
            started, and → run settled); checks the run COMPLETED with
            exactly --runs items, all completed, and a join output of
            --runs. With --tenants T above 1, T-1 other tenants queue
            --runs bench-noop runs each, and each tenant's share of the
            claims while every tenant has work is shown, with Jain's index
            over them. No goal; seen on a shared 2-core machine: 13,000 to
            16,000 items/s, the fan-out of 10,000 items 0.4-0.5s (100,000:
            4.3s)
  events    --runs bench-wait runs (100,000), each waiting for its own
            event, created while the workers run; once every wait task is
            WAITING, the workers idle for --duration (10s): their RSS (this
            process's, or the worker processes') and goroutines
            (in-process) before the runs, then at the start and at the end
            of the quiet period. Then every event is sent, --send-batch
            (1,000) per SendEvents call from --senders goroutines (4: 1
            gave 9,500 events/s, 2 16,400, 4 18,300, 8 17,000): events
            delivered/s from the first event
            recorded to the last run settled, the calls' rate and p50/p99;
            checks that every run COMPLETED with its own event's payload
            and that the calls' delivered counts sum to --runs. No goal;
            seen on a shared 2-core machine: RSS and goroutines flat while
            100,000 runs wait (26-29 MiB after GC, 7 MiB of heap, 17
            goroutines; 25 MiB, 6 MiB and 17 with 5,000 runs waiting),
            18,000 events/s
  children  --runs bench-parent runs (1,000; 10 child steps, each
            starting a one-step bench-child run and waiting for it, → join:
            10,000 child runs) inserted first, then worked: parent and
            child runs/s from the first claim to the last parent settled,
            child step claimed → child run created and child settled →
            parent step completed, p50/p99/max; checks that every parent
            and child COMPLETED and that each child step started exactly
            one child. No goal; seen on a 2-core machine: 3,600 child
            runs/s, 360 parent runs/s

With --wal (single, dag and func), the server's WAL position is read before
the inserts, after them, after the checkpoint that precedes the work and
once every run has settled: WAL bytes per run (and per task for dag, per
step for func) of the insert phase, the work phase and in all (goals, from
issue #23: ≤ 1,500 B/run single, ≤ 1,200 B/task dag; func has none). With pg_walinspect (created in the
bench's schema when the database has none; needs a superuser or
pg_read_server_files) each phase's WAL is read back and attributed: by
operation (create, claim, finish, settle, counts, events: each transaction
classed by the tables it writes), by relation (the bench schema's tables and
indexes, named from the records' block references) and by record type
(Heap INSERT, HOT_UPDATE, Btree INSERT_LEAF, Transaction COMMIT, ...),
full-page images (FPI) counted apart. The WAL is the server's: measure on a
quiet server. A temporary replication slot holds the WAL until it is read.

Workers run in this process (--processes 0) or as --processes P
"durable worker" processes of this executable. With --json, stdout is one
JSON object and the table goes to stderr with the progress lines. Exit
status: 0 done, 1 failed (runs not completed, database errors), 2 bad flags.

Flags:
`

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o bench.Options
	var asJSON bool
	var cpuProfile string
	var url cliflag.Secret
	cliflag.SecretVar(fs, &url, "database-url", cliflag.EnvDatabaseURL, "PostgreSQL `URL`, e.g. postgres://user@127.0.0.1:5432/db", cliflag.Redact)
	fs.StringVar(&o.Schema, "schema", "", "use (and keep) this schema instead of a fresh durable_bench_<random> one; no other workers may serve it")
	fs.StringVar(&o.Scenario, "scenario", "", "single, dag, func, latency, fairness, idle, list, soak, concurrency, cron, map, events or children (required)")
	fs.BoolVar(&asJSON, "json", false, "print the report as one JSON object on stdout")
	fs.BoolVar(&o.Keep, "keep", false, "keep the fresh schema (and idle's scratch database) instead of dropping it")
	fs.BoolVar(&o.SameDatabase, "same-database", false, "idle: measure in the --database-url database instead of a scratch one created for the run")
	fs.StringVar(&o.ServerLog, "server-log", "", "idle: the server's log file when the logging collector is off (default /var/log/postgresql/postgresql-<version>-<cluster>.log)")
	fs.IntVar(&o.Keys, "keys", 0, "concurrency: distinct concurrency keys, each capped at one running step (0: 1000)")
	fs.IntVar(&o.Runs, "runs", 0, "runs: single 100000, dag 10000, func 10000, latency 500, list 1000000, concurrency 100000, events 100000, children 1000 (parents); map: items of its one run, 10000; cron: schedules, 10000; fairness: tenant B's backlog, 10000 (0: the scenario's default)")
	fs.IntVar(&o.Processes, "processes", 0, "run the workers as this many \"durable worker\" processes (0: in this process)")
	fs.IntVar(&o.Workers, "workers", 0, "in-process workers (engines), each with its own pool (0: 3 for idle, 1 otherwise)")
	fs.IntVar(&o.Concurrency, "concurrency", 0, fmt.Sprintf("steps each worker runs at once (0: %d for single, dag, func, list, soak, concurrency, map, events and children, 100, the engine's default, otherwise)", bench.ThroughputConcurrency))
	fs.IntVar(&o.ClaimBatch, "claim-batch", 0, "each worker's Config.ClaimBatch (0: the engine's default; in-process only)")
	fs.IntVar(&o.FinishBatch, "finish-batch", 0, "each worker's Config.FinishBatch (0: the engine's default; in-process only)")
	fs.IntVar(&o.Tenants, "tenants", 0, "single, dag, func, soak, events, children: spread runs over this many tenants (0: 1); list: (0: 100); fairness: tenants with skewed backlogs (0: 10); map: above 1, that many minus one other tenants queue --runs bench-noop runs each, competing with the items")
	fs.IntVar(&o.TenantStep, "tenant-step", 100, "fairness: the backlogs are this many runs, twice as many, ...")
	fs.IntVar(&o.InsertBatch, "insert-batch", 5000, "runs per RunManyNoWait call when inserting (soak: the most per call)")
	fs.DurationVar(&o.Interval, "interval", 0, "latency: pause between runs (0: 10ms)")
	fs.DurationVar(&o.Duration, "duration", 0, "idle: how long to measure (0: 60s); soak: how long to trigger runs (0: 10m); cron: how long the workers run (0: 150s); events: the quiet period while every run waits (0: 10s)")
	fs.IntVar(&o.Senders, "senders", 0, fmt.Sprintf("events: goroutines sending the events (0: %d)", bench.DefaultSenders))
	fs.IntVar(&o.SendBatch, "send-batch", 0, "events: events per SendEvents call (0: 1000)")
	fs.IntVar(&o.Repeat, "repeat", 0, "list: how many times each kind of page is timed (0: 200)")
	fs.IntVar(&o.Rate, "rate", 0, "soak: runs triggered per second (0: 5000)")
	fs.DurationVar(&o.Retention, "retention", 0, "soak: the workers' Config.Retention (0: 1m); at least --sample + 1s")
	fs.DurationVar(&o.Sample, "sample", 0, "soak: the sampling interval (0: 10s)")
	fs.StringVar(&o.Autovacuum, "autovacuum", bench.VacuumAuto, "list (its setup) and soak: who vacuums the tables: server (PostgreSQL's autovacuum, even if off), bench (the bench, as autovacuum would), or auto (server if its autovacuum is on, else bench)")
	fs.DurationVar(&o.Settle, "settle", 0, "idle: how long the workers idle before measuring, at least 2s (0: 35s, as the idle poll backs off to 30s)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "give up waiting for the work after this long and fail (0: 10m; list: for the runs to settle)")
	fs.StringVar(&o.WorkerExe, "worker-exe", "", "the durable binary started for --processes (default: this executable)")
	fs.BoolVar(&o.WAL, "wal", false, "single, dag and func: measure the WAL per run (task, step) of the insert and work phases and, with pg_walinspect, attribute it by operation, relation and record type")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process (in-process workers included) to this file")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	o.DatabaseURL = url.Value()
	if o.DatabaseURL == "" {
		fmt.Fprintf(stderr, "durable bench: --database-url (or $%s) is required\n", cliflag.EnvDatabaseURL)
		return exitUsage
	}
	// The bench's errors may quote the URL: its password is not shown.
	var redact cliflag.Redactor
	redact.WatchURL(&url)
	stderr = redact.Writer(stderr)
	if o.Processes > 0 && o.WorkerExe == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "durable bench: finding this executable for --processes: %v\n", err)
			return 1
		}
		o.WorkerExe = exe
	}
	o.Log = stderr

	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "durable bench: --cpuprofile: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "durable bench: --cpuprofile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}

	rep, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "durable bench: %v\n", err)
		if errors.Is(err, bench.ErrInvalidOptions) {
			fs.Usage()
			return exitUsage
		}
		return 1
	}
	text := stdout
	if asJSON {
		text = stderr
		if err := rep.WriteJSON(stdout); err != nil {
			fmt.Fprintf(stderr, "durable bench: %v\n", err)
			return 1
		}
	}
	if err := rep.WriteText(text); err != nil {
		fmt.Fprintf(stderr, "durable bench: %v\n", err)
		return 1
	}
	if !rep.Verified {
		return 1
	}
	return 0
}
