package pgstore

import "strings"

// queries holds the store's SQL with the schema substituted once, at New.
// Statements take arrays and unnest them, so that one statement writes a
// whole batch; pgx prepares and caches each of them per connection.
//
// Each field holds the statement of its name in sql/*.sql ("-- name:
// loadShapes"; see statements.go): a field is added with its statement.
type queries struct {
	genericPlans string
	// history.go
	historyPeriods      string
	insertHistoryPeriod string
	deleteHistoryPeriod string
	goneTables          string
	freeConstraints     string
	tableGrants         string
	skipTakenKeys       string
	lockHistory         string
	defaultHolds        string
	historyNow          string
	fencedPlans         string
	listPlans           string
	queuePlans          string
	now                 string
	loadShapes          string
	insertShapes        string
	reshapeRuns         string
	listVersions        string

	runsExist     string
	keysExist     string
	insertRunsNew string
	// releaseSkippedKeys releases the keys insertRunsNew's trigger took for
	// runs it then skipped.
	releaseSkippedKeys string
	ensureTenants      string
	ensureLanes        string
	lockLanes          string
	readFrontiers      string
	pruneFrontier      string
	leaderCheck        string
	eventBlock         string
	updateLanes        string
	lockRuns           string
	loadTasks          string
	lockReady          string
	deleteReady        string
	insertRuns         string
	updateRuns         string
	countSettled       string
	insertTasks        string
	updateTasks        string
	// The same for batches with waits, maps or items, and child runs.
	insertTasksWaits string
	updateTasksWaits string
	insertChildRuns  string
	insertReady      string
	insertIncoming   string
	takeIncoming     string
	insertEvents     string
	notify           string
	nextTimer        string
	timerCheck       string
	dueTimers        string
	heartbeatTasks   string

	claim              string
	claimIDs           string
	claimCandidate     string
	anyPriority        string
	displaceAfterClaim string
	reorderHead        string
	reorderBest        string
	reorderTake        string
	reorderPut         string
	tryTenantLocks     string
	runningCounts      string
	parentOutputs      string
	funcRecords        string
	loadRecords        string

	getRun     string
	listTasks  string
	listEvents string
	runExists  string
	listWaits  string

	statsReady       string
	statsTasks       string
	statsInflight    string
	statsCounts      string
	pruneCounts      string
	compactCounts    string
	pruneRuns        string
	pruneRunsDefault string
	pruneShapes      string

	// insertRuns, insertChildRuns and insertRunsNew with the runs' trace
	// parents.
	insertRunsTraced, insertChildRunsTraced, insertRunsNewTraced string

	// Schedules (schedule.go, declare.go).
	createSchedule   string
	getSchedule      string
	listSchedules    string
	lockSchedule     string
	pauseSchedule    string
	deleteSchedule   string
	scheduleCheck    string
	dueSchedules     string
	advanceSchedules string
	breakSchedules   string
	lockDeclared     string
	insertDeclared   string
	updateDeclared   string

	// Workers and the leader (workers.go, elector.go).
	registerWorker string
	removeWorker   string
	listWorkers    string
	staleWorkers   string
	deleteWorkers  string
	acquireLease   string
	renewLease     string
	releaseLease   string
	fence          string

	flowQueries
	waitQueries
}

// eventBlockSize is the number of event ids a transaction can number from
// its event block.
const eventBlockSize = 1 << 20

// countShards is the number of rows of run_counts that share one minute,
// workflow, tenant and status: each connection adds to its own (by backend
// PID), so that transactions settling runs at once rarely wait for one
// another.
const countShards = 8

// inflightRuns is the SQL of the IDs of the runs in flight, of the tenant
// given by the SQL expression tenant (a parameter, or NULL for every
// tenant): the fragment inflightRuns of sql/runs.sql.
func inflightRuns(tenant string) string {
	return strings.ReplaceAll(sqlFragment("inflightRuns"), "{{tenant}}", tenant)
}
