package pgstore

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/fairq"
)

// The store's SQL lives in sql/*.sql, a file per table: a statement is in
// the file of the table it mainly writes, or reads when it writes none
// (session.sql holds those that touch no table). A file is a series of
// blocks, each opened by a line
//
//	-- name: firstEvents
//
// that names the field of queries holding the statement (grep the name to
// find the SQL, the field and its uses). The comment lines right after
// it say what the statement does and why it is written so; the statement
// follows, ending with a semicolon. Comment lines are not sent to the
// server. A block opened by "-- fragment: name" holds a piece of SQL that
// Go code assembles into a statement at run time (ListRuns' query, built
// from its filter); it is not a field of queries.
//
// Statements are written whole, so that the SQL found by a name is the
// SQL sent, with one exception: a statement may include a fragment that
// Go code assembles too, written {{name(param=value)}} (the fragment's
// SQL, its {{param}} replaced by value), so that a rule the two share is
// written once (statsInflight includes inflightRuns). Where several
// statements share a part otherwise (the variants of insertRuns, claim and
// claimIDs, column lists a scanner reads), each block says so, and
// TestStatementVariants fails when they drift apart. In statements,
// {{schema}} stands for the store's quoted schema, substituted at New, and
// a few other {{names}} for Go constants the SQL must agree with
// (sqlConstants), substituted once: among them the lists of the run
// statuses the SQL asks about, made from durabletype's predicates
// (sqlStatuses), so that no statement names a run status
// (TestSQLNamesNoRunStatus).
//
// A field without a statement, a statement without a field, two blocks of
// one name, an unknown {{name}} or a malformed file panics at New: they
// are mistakes in this package, which TestStatementFiles finds without a
// database.

//go:embed sql/*.sql
var sqlFiles embed.FS

// sqlConstants are the Go constants the statements use, by the name of
// their placeholder.
var sqlConstants = map[string]string{
	"eventBlockSize":    strconv.FormatInt(eventBlockSize, 10),
	"blockLength":       strconv.FormatInt(fairq.BlockLength, 10),
	"countShards":       strconv.Itoa(countShards),
	"shapeTrustSeconds": strconv.Itoa(int(shapeTrust / time.Second)),
	"onFailureTask":     durabletype.OnFailureTask,
	"recycleMinBytes":   strconv.Itoa(recycleMinBytes),
	"recycleMaxLive":    strconv.Itoa(recycleMaxLive),
	"recycleReadLimit":  strconv.Itoa(recycleReadLimit),
	// The statuses of the runs that settled unsuccessfully (the runs'
	// unsuccessful column), and of those in flight but not active
	// (heldRun), which may hold no task in a queue.
	"unsuccessfulStatuses": sqlStatuses(durabletype.RunStatus.Unsuccessful),
	"heldStatuses":         sqlStatuses(heldRun),
}

// heldRun reports whether a run in status s is in flight but not active:
// it holds its place without moving on, so that it may have no task in a
// queue, where the runs in flight are found (inflightRuns).
func heldRun(s durabletype.RunStatus) bool { return s.InFlight() && !s.Active() }

// sqlStatuses is the list of the run statuses for which pred holds, as
// SQL literals for "status IN (...)": NULL when there are none, so that
// the condition holds for no row and the planner drops it.
func sqlStatuses(pred func(durabletype.RunStatus) bool) string {
	var lits []string
	for _, st := range durabletype.RunStatusesWhere(pred) {
		lits = append(lits, "'"+string(st)+"'")
	}
	if len(lits) == 0 {
		return "NULL"
	}
	return strings.Join(lits, ", ")
}

// sqlBlock is a statement or fragment of sql/*.sql.
type sqlBlock struct {
	file, name string
	fragment   bool
	sql        string // constants substituted; {{schema}} left
	// route is N of a "-- route: $N" line: the statement touches only rows
	// of runs, tasks and events of the runs whose ids argument N holds, so
	// that the store may send it naming their period's partitions
	// (history.go); 0 when it has none.
	route int
	// includes names the fragments the statement includes.
	includes []string
}

var (
	blockHeader = regexp.MustCompile(`^-- (name|fragment): ([A-Za-z_][A-Za-z0-9_]*)\s*$`)
	placeholder = regexp.MustCompile(`\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}`)
	routeLine   = regexp.MustCompile(`^-- route: \$([1-9][0-9]*)\s*$`)
	include     = regexp.MustCompile(`\{\{([A-Za-z_][A-Za-z0-9_]*)\(([A-Za-z_][A-Za-z0-9_]*)=([^{}()]*)\)\}\}`)
)

// parseSQLFile splits the text of a file of sql/ into its blocks.
func parseSQLFile(file, text string) ([]sqlBlock, error) {
	var out []sqlBlock
	var cur *sqlBlock
	var body []string
	flush := func() error {
		if cur == nil {
			return nil
		}
		sql := strings.TrimSpace(strings.Join(body, "\n"))
		where := file + ": " + cur.name
		switch {
		case sql == "":
			return fmt.Errorf("%s: no SQL", where)
		case cur.fragment && strings.Contains(sql, ";"):
			return fmt.Errorf("%s: a fragment holds a semicolon", where)
		case !cur.fragment && !strings.HasSuffix(sql, ";"):
			return fmt.Errorf("%s: the statement does not end with a semicolon", where)
		case !cur.fragment && strings.Contains(strings.TrimSuffix(sql, ";"), ";"):
			return fmt.Errorf("%s: more than one statement", where)
		}
		cur.sql = strings.TrimSpace(strings.TrimSuffix(sql, ";"))
		out = append(out, *cur)
		cur, body = nil, nil
		return nil
	}
	for i, line := range strings.Split(text, "\n") {
		if m := blockHeader.FindStringSubmatch(line); m != nil {
			if err := flush(); err != nil {
				return nil, err
			}
			cur = &sqlBlock{file: file, name: m[2], fragment: m[1] == "fragment"}
			continue
		}
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") {
			if strings.HasPrefix(trimmed, "-- name:") || strings.HasPrefix(trimmed, "-- fragment:") {
				return nil, fmt.Errorf("%s:%d: malformed block header %q", file, i+1, line)
			}
			if m := routeLine.FindStringSubmatch(trimmed); m != nil && cur != nil && !cur.fragment {
				cur.route, _ = strconv.Atoi(m[1])
			} else if strings.HasPrefix(trimmed, "-- route:") {
				return nil, fmt.Errorf("%s:%d: malformed route line %q", file, i+1, line)
			}
			continue // documentation
		}
		if cur == nil {
			if trimmed != "" {
				return nil, fmt.Errorf("%s:%d: SQL before the first -- name: line", file, i+1)
			}
			continue
		}
		body = append(body, line)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// sqlBlocks are the blocks of every file of sql/, by name, with the
// constants substituted; it panics on a malformed file, a name used twice
// or an unknown placeholder.
var sqlBlocks = sync.OnceValue(func() map[string]sqlBlock {
	blocks, err := loadSQLBlocks(sqlFiles)
	if err != nil {
		panic(err)
	}
	return blocks
})

func loadSQLBlocks(fsys fs.FS) (map[string]sqlBlock, error) {
	files, err := fs.Glob(fsys, "sql/*.sql")
	if err != nil {
		return nil, err
	}
	out := map[string]sqlBlock{}
	var names []string // in the order of the files
	for _, f := range files {
		text, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		blocks, err := parseSQLFile(path.Base(f), string(text))
		if err != nil {
			return nil, fmt.Errorf("pgstore: %w", err)
		}
		for _, b := range blocks {
			if prev, ok := out[b.name]; ok {
				return nil, fmt.Errorf("pgstore: %s: %s is also in %s", b.file, b.name, prev.file)
			}
			out[b.name] = b
			names = append(names, b.name)
		}
	}
	// Fragments first, so that the statements include them with their
	// constants substituted.
	for _, fragments := range []bool{true, false} {
		for _, name := range names {
			b := out[name]
			if b.fragment != fragments {
				continue
			}
			var bad []string
			b.sql = include.ReplaceAllStringFunc(b.sql, func(p string) string {
				m := include.FindStringSubmatch(p)
				if f, ok := out[m[1]]; ok && f.fragment && !b.fragment {
					b.includes = append(b.includes, m[1])
					return strings.ReplaceAll(f.sql, "{{"+m[2]+"}}", m[3])
				}
				bad = append(bad, p)
				return p
			})
			b.sql = placeholder.ReplaceAllStringFunc(b.sql, func(p string) string {
				name := p[2 : len(p)-2]
				if v, ok := sqlConstants[name]; ok {
					return v
				}
				if name != "schema" && !b.fragment {
					bad = append(bad, p)
				}
				return p
			})
			if len(bad) > 0 {
				return nil, fmt.Errorf("pgstore: %s: %s: unknown placeholders %v", b.file, b.name, bad)
			}
			out[name] = b
		}
	}
	return out, nil
}

// newQueries returns the statements of sql/ for schema, each in the field
// of queries of its name. It panics when a field has no statement or a
// statement no field (TestStatementFiles checks both, and that each field
// holds the statement of its own name).
func newQueries(schema string) queries {
	st := &statements{schema: schema, blocks: sqlBlocks(), used: map[string]bool{}}
	q := queries{
		genericPlans:          st.take("genericPlans"),
		historyPeriods:        st.take("historyPeriods"),
		insertHistoryPeriod:   st.take("insertHistoryPeriod"),
		deleteHistoryPeriod:   st.take("deleteHistoryPeriod"),
		goneTables:            st.take("goneTables"),
		freeConstraints:       st.take("freeConstraints"),
		tableGrants:           st.take("tableGrants"),
		skipTakenKeys:         st.take("skipTakenKeys"),
		lockHistory:           st.take("lockHistory"),
		defaultHolds:          st.take("defaultHolds"),
		historyNow:            st.take("historyNow"),
		fencedPlans:           st.take("fencedPlans"),
		listPlans:             st.take("listPlans"),
		queuePlans:            st.take("queuePlans"),
		now:                   st.take("now"),
		loadShapes:            st.take("loadShapes"),
		insertShapes:          st.take("insertShapes"),
		reshapeRuns:           st.take("reshapeRuns"),
		listVersions:          st.take("listVersions"),
		runsExist:             st.take("runsExist"),
		keysExist:             st.take("keysExist"),
		insertRunsNew:         st.take("insertRunsNew"),
		releaseSkippedKeys:    st.take("releaseSkippedKeys"),
		ensureTenants:         st.take("ensureTenants"),
		ensureLanes:           st.take("ensureLanes"),
		lockLanes:             st.take("lockLanes"),
		readFrontiers:         st.take("readFrontiers"),
		pruneFrontier:         st.take("pruneFrontier"),
		leaderCheck:           st.take("leaderCheck"),
		eventBlock:            st.take("eventBlock"),
		updateLanes:           st.take("updateLanes"),
		lockRuns:              st.take("lockRuns"),
		loadTasks:             st.take("loadTasks"),
		lockReady:             st.take("lockReady"),
		deleteReady:           st.take("deleteReady"),
		insertRuns:            st.take("insertRuns"),
		updateRuns:            st.take("updateRuns"),
		countSettled:          st.take("countSettled"),
		insertTasks:           st.take("insertTasks"),
		updateTasks:           st.take("updateTasks"),
		insertTasksWaits:      st.take("insertTasksWaits"),
		updateTasksWaits:      st.take("updateTasksWaits"),
		insertChildRuns:       st.take("insertChildRuns"),
		insertReady:           st.take("insertReady"),
		insertIncoming:        st.take("insertIncoming"),
		takeIncoming:          st.take("takeIncoming"),
		insertEvents:          st.take("insertEvents"),
		notify:                st.take("notify"),
		nextTimer:             st.take("nextTimer"),
		timerCheck:            st.take("timerCheck"),
		dueTimers:             st.take("dueTimers"),
		heartbeatTasks:        st.take("heartbeatTasks"),
		claim:                 st.take("claim"),
		claimIDs:              st.take("claimIDs"),
		claimCandidate:        st.take("claimCandidate"),
		anyPriority:           st.take("anyPriority"),
		displaceAfterClaim:    st.take("displaceAfterClaim"),
		reorderHead:           st.take("reorderHead"),
		reorderBest:           st.take("reorderBest"),
		reorderTake:           st.take("reorderTake"),
		reorderPut:            st.take("reorderPut"),
		tryTenantLocks:        st.take("tryTenantLocks"),
		runningCounts:         st.take("runningCounts"),
		parentOutputs:         st.take("parentOutputs"),
		funcRecords:           st.take("funcRecords"),
		loadRecords:           st.take("loadRecords"),
		getRun:                st.take("getRun"),
		listTasks:             st.take("listTasks"),
		listEvents:            st.take("listEvents"),
		runExists:             st.take("runExists"),
		listWaits:             st.take("listWaits"),
		statsReady:            st.take("statsReady"),
		statsTasks:            st.take("statsTasks"),
		statsInflight:         st.take("statsInflight"),
		statsCounts:           st.take("statsCounts"),
		pruneCounts:           st.take("pruneCounts"),
		compactCounts:         st.take("compactCounts"),
		pruneRuns:             st.take("pruneRuns"),
		pruneRunsDefault:      st.take("pruneRunsDefault"),
		pruneShapes:           st.take("pruneShapes"),
		insertRunsTraced:      st.take("insertRunsTraced"),
		insertChildRunsTraced: st.take("insertChildRunsTraced"),
		insertRunsNewTraced:   st.take("insertRunsNewTraced"),
		createSchedule:        st.take("createSchedule"),
		getSchedule:           st.take("getSchedule"),
		listSchedules:         st.take("listSchedules"),
		lockSchedule:          st.take("lockSchedule"),
		pauseSchedule:         st.take("pauseSchedule"),
		deleteSchedule:        st.take("deleteSchedule"),
		scheduleCheck:         st.take("scheduleCheck"),
		dueSchedules:          st.take("dueSchedules"),
		advanceSchedules:      st.take("advanceSchedules"),
		breakSchedules:        st.take("breakSchedules"),
		lockDeclared:          st.take("lockDeclared"),
		insertDeclared:        st.take("insertDeclared"),
		updateDeclared:        st.take("updateDeclared"),
		registerWorker:        st.take("registerWorker"),
		removeWorker:          st.take("removeWorker"),
		listWorkers:           st.take("listWorkers"),
		staleWorkers:          st.take("staleWorkers"),
		deleteWorkers:         st.take("deleteWorkers"),
		acquireLease:          st.take("acquireLease"),
		renewLease:            st.take("renewLease"),
		releaseLease:          st.take("releaseLease"),
		fence:                 st.take("fence"),
		waitQueries: waitQueries{
			loadItems:     st.take("loadItems"),
			loadMapItems:  st.take("loadMapItems"),
			deleteItems:   st.take("deleteItems"),
			mapOutputs:    st.take("mapOutputs"),
			lockKeys:      st.take("lockKeys"),
			firstEvents:   st.take("firstEvents"),
			firstSignals:  st.take("firstSignals"),
			sendEvents:    st.take("sendEvents"),
			insertSignal:  st.take("insertSignal"),
			insertInbox:   st.take("insertInbox"),
			loadInbox:     st.take("loadInbox"),
			deleteInbox:   st.take("deleteInbox"),
			pendingRuns:   st.take("pendingRuns"),
			pruneEvents:   st.take("pruneEvents"),
			taskCompleted: st.take("taskCompleted"),
		},
		flowQueries: flowQueries{
			lockRates:    st.take("lockRates"),
			lockSlots:    st.take("lockSlots"),
			dequeueKeyed: st.take("dequeueKeyed"),
			parkedHeads:  st.take("parkedHeads"),
			writeSlots:   st.take("writeSlots"),
			dropSlots:    st.take("dropSlots"),
			unpark:       st.take("unpark"),
			park:         st.take("park"),
			writeRates:   st.take("writeRates"),
			pruneRates:   st.take("pruneRates"),
			setKeys:      st.take("setKeys"),
		},
	}
	st.checkUsed()
	return q
}

// routesFor returns the routed statements of sql/ (those with a "-- route:
// $N" line) rendered for schema, each with the index of its argument N.
func routesFor(schema string) map[string]int {
	out := map[string]int{}
	for _, b := range sqlBlocks() {
		if b.route > 0 {
			out[render(schema, b.sql)] = b.route - 1
		}
	}
	return out
}

// statements hands out the statements of sql/ by name, once each.
type statements struct {
	schema string
	blocks map[string]sqlBlock
	used   map[string]bool
}

// take returns the statement of that name, rendered for the schema.
func (st *statements) take(name string) string {
	b, ok := st.blocks[name]
	if !ok || b.fragment {
		panic(fmt.Sprintf("pgstore: no statement %q in sql/*.sql for the field of queries of that name", name))
	}
	if st.used[name] {
		panic(fmt.Sprintf("pgstore: two fields of queries take statement %s", name))
	}
	st.used[name] = true
	return render(st.schema, b.sql)
}

// checkUsed panics when a statement of sql/ went to no field.
func (st *statements) checkUsed() {
	for name, b := range st.blocks {
		if !st.used[name] && !b.fragment {
			panic(fmt.Sprintf("pgstore: %s: statement %s is not a field of queries", b.file, name))
		}
	}
}

// sqlFragment returns the fragment of sql/ of that name, {{schema}} left.
func sqlFragment(name string) string {
	b, ok := sqlBlocks()[name]
	if !ok || !b.fragment {
		panic(fmt.Sprintf("pgstore: no fragment %q in sql/*.sql", name))
	}
	return b.sql
}
