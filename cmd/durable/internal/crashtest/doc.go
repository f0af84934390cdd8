// Package crashtest holds crash proofs that run the real durable CLI as
// separate worker processes against PostgreSQL, and then kill them, stop
// them during durable sleeps, and restart and stop PostgreSQL under them.
//
// The tests build ./cmd/durable once, give each test its own schema, and
// check afterwards, from the database and the engine's API, that every run
// completed, child runs included, that every step's and every map item's
// outcome was recorded exactly once, that the event logs are consistent,
// that each event wait received the first event sent for it (the tests send
// the chaos runs' events, some before the runs wait and some while they
// do), that each child step's result is its one completed child run's, and
// how fast the steps of killed workers were run again.
//
// TestTxStepExactlyOnce is the proof of transactional steps
// (durable.TxStep) with real processes: three workers of a service of its
// own (./txapp, its workflow in ./txeffects) are killed 40 times, and
// stopped three times for longer than a rescue takes, while 300 runs write
// rows through their steps' transactions; every run must complete with
// exactly one row per transactional step, that of the attempt whose outcome
// was recorded. Plain steps writing the same rows outside the transaction
// are its control: their duplicates under the same kills are logged.
//
// TestFunctionChaos is the proof of durable functions: 200 runs of the
// built-in function crash-fn (steps, a retried step, a transactional step,
// a durable sleep, steps in parallel, a child run, an event and a signal)
// on three workers SIGKILLed 20 times or more; every run and child run must
// complete with each call recorded once, each recorded result that of one
// of the step's executions, the output made of the recorded results, and
// exactly one transactional row per run, that of the recorded execution.
// TestRollingDeployFunction and TestRollingDeployFunctionVersion deploy a
// new build of a function (./deployapp, deploy.NewFunc) over runs in
// flight: a change by durable.Patched under the same version, taken over by
// the new workers, and a new version, whose old runs drain on the old
// workers; no run fails.
//
// They are heavy and one of them restarts the PostgreSQL server, so they
// skip unless DURABLE_CRASH_TESTS=1, and must not run beside other tests:
//
//	DURABLE_CRASH_TESTS=1 DURABLE_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	    go test -count=1 -v ./cmd/durable/internal/crashtest/
//
// TestPostgresRestart restarts PostgreSQL under three busy workers;
// TestPostgresOutage stops it for longer than the workers' --dead-after and
// starts it again: no worker may be taken for dead for that silence, so no
// step that ran is rescued and run again. Both use pg_ctlcluster (Debian's
// postgresql-common) on the cluster the database reports in cluster_name,
// so they need a local server and root; without them they skip (fail under
// CI=true).
//
// DURABLE_CRASH_NEW_IDS=1 makes the chaos test restart killed workers under
// new worker IDs instead of their own (see TestChaos).
//
// When a test fails, the worker processes print their goroutines (SIGQUIT)
// into their logs, the logs are kept and their paths logged, and with
// DURABLE_CRASH_KEEP=1 the test's schema is kept too.
package crashtest
