package bench

// Peers' figures from /work/shared/PEERS.md: measured on a 2-core, 24 GiB
// machine of the kind the benchmarks run on, against a local PostgreSQL 15
// with stock settings (2026-11-22). Order of magnitude to beat, not exact.
var (
	riverInsertedFirst = Reference{
		System:   "River 0.43",
		Workload: "200,000 no-op jobs inserted first, then worked (bench --num-total-jobs)",
		Figure:   "24,590 jobs/s (median of 6; 17,992-31,644)",
	}
	riverConcurrent = Reference{
		System:   "River 0.43",
		Workload: "30 s with inserts running concurrently (bench --duration)",
		Figure:   "20,111 jobs/s (median of 6)",
	}
	hatchetSingle = Reference{
		System:   "Hatchet v0.104.7 lite",
		Workload: "one-task no-op workflow, 2,000 runs",
		Figure:   "141 runs/s at the worker (113 confirmed in its run table)",
	}
	hatchetDAG = Reference{
		System:   "Hatchet v0.104.7 lite",
		Workload: "DAG root → 8 parallel no-op tasks → join, 2,000 runs",
		Figure:   "113 tasks/s (11 runs/s)",
	}
	hatchetLatency = Reference{
		System:   "Hatchet v0.104.7 lite",
		Workload: "50 sequential runs, trigger → result",
		Figure:   "no-op p50 26 ms / p95 51 ms; 10-task DAG p50 196 ms / p95 318 ms",
	}
)
