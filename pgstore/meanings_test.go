package pgstore

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
)

// statusLiteral finds a string literal compared with a column named status
// (a run's status: tasks have a state), either way round: status = 'X',
// status <> 'X', status IN ('X', ...), status = ANY (ARRAY['X']), 'X' =
// status.
var statusLiteral = regexp.MustCompile(`(?i)\bstatus\s*(?:=|<>|!=|(?:not\s+)?in\s*\(|=\s*any\s*\(\s*(?:array\s*\[)?)\s*'` +
	`|'\s*(?:=|<>|!=)\s*(?:[a-z_]+\.)?status\b`)

// TestSQLNamesNoRunStatus: no statement of sql/ and no SQL written in the
// package's Go code compares a run's status with a status it names: the
// statuses the SQL asks about are lists made from durabletype's predicates
// (sqlStatuses), so that a new status takes its place in them, or in none,
// by its meaning. (The migrations are the history of the schema and are
// left as written; TestRunStatusCheckAllowsEveryStatus holds their CHECK
// to RunStatuses.)
func TestSQLNamesNoRunStatus(t *testing.T) {
	for _, bad := range []string{
		"status IN ('FAILED', 'CANCELLED')", "r.status = 'RUNNING'", "u.status <> 'COMPLETED'",
		"status NOT IN ('X')", "status = ANY (ARRAY['PAUSED'])", "'FAILED' = r.status",
	} {
		require.Regexp(t, statusLiteral, bad, "the scan misses %s", bad)
	}
	for _, fine := range []string{"status IN ({{unsuccessfulStatuses}})", "t.state = 'RUNNING'", "r.status IN (\" + lits"} {
		require.NotRegexp(t, statusLiteral, fine)
	}
	files, err := filepath.Glob("sql/*.sql")
	require.NoError(t, err)
	gos, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range append(files, gos...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(text), "\n") {
			if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "--") || strings.HasPrefix(trimmed, "//") {
				continue
			}
			if statusLiteral.MatchString(line) {
				t.Errorf("%s:%d names a run status: %s\n\tmake the list from durabletype's predicates (sqlStatuses)", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestStatusListsFollowTheMeanings: the lists of statuses substituted into
// the SQL are those of the predicates, and an empty list holds for no
// row.
func TestStatusListsFollowTheMeanings(t *testing.T) {
	// list quotes the statuses pred holds for, as the SQL must name them.
	list := func(pred func(durabletype.RunStatus) bool) string {
		var q []string
		for _, s := range durabletype.RunStatuses {
			if pred(s) {
				q = append(q, "'"+string(s)+"'")
			}
		}
		if len(q) == 0 {
			return "NULL"
		}
		return strings.Join(q, ", ")
	}
	require.Contains(t, sqlConstants["unsuccessfulStatuses"], "'FAILED', 'CANCELLED'")
	require.Equal(t, list(durabletype.RunStatus.Unsuccessful), sqlConstants["unsuccessfulStatuses"])
	held := list(func(s durabletype.RunStatus) bool { return s.InFlight() && !s.Active() })
	require.Equal(t, held, sqlConstants["heldStatuses"], "the statuses in flight without being active")
	require.Equal(t, "NULL", sqlStatuses(func(durabletype.RunStatus) bool { return false }))
	require.Equal(t, list(durabletype.RunStatus.InFlight), sqlStatuses(durabletype.RunStatus.InFlight))
	require.Contains(t, sqlStatuses(durabletype.RunStatus.InFlight), "'RUNNING'")
	require.Contains(t, newQueries("s").statsInflight, "status IN ("+held+")", "the held runs' branch of inflightRuns")
}
