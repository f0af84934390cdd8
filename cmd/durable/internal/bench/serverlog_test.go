package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// debianLog is a piece of a server log with Debian's log_line_prefix,
// '%m [%p] %q%u@%d ', as PostgreSQL 15 writes it with log_statement = 'all'.
const debianLog = `2026-11-24 04:06:19.000 UTC [2213] LOG:  checkpoint starting: time
2026-11-24 04:06:19.050 UTC [1325] postgres@scratch LOG:  execute stmtcache_1: SELECT 1
2026-11-24 04:06:19.057 UTC [1300] postgres@scratch LOG:  statement: SELECT 'durable-bench-mark:t1:start'
2026-11-24 04:06:19.058 UTC [1325] postgres@scratch LOG:  statement: -- ping
2026-11-24 04:06:19.059 UTC [1325] postgres@scratch LOG:  execute stmtcache_a8: BEGIN
2026-11-24 04:06:19.059 UTC [1325] postgres@scratch LOG:  execute stmtcache_e0: SELECT id
	FROM tasks
	WHERE due_at < now()
2026-11-24 04:06:19.059 UTC [1325] postgres@scratch LOG:  execute stmtcache_79: COMMIT
2026-11-24 04:06:19.065 UTC [1326] postgres@scratch LOG:  execute <unnamed>: SELECT $1::int
2026-11-24 04:06:19.065 UTC [1326] postgres@scratch DETAIL:  parameters: $1 = '5'
2026-11-24 04:06:19.066 UTC [1327] postgres@other LOG:  statement: SELECT 2
2026-11-24 04:06:19.067 UTC [1326] postgres@scratch ERROR:  relation "x" does not exist at character 15
2026-11-24 04:06:19.067 UTC [1326] postgres@scratch STATEMENT:  SELECT * FROM x
2026-11-24 04:06:19.068 UTC [1326] postgres@scratch LOG:  duration: 0.050 ms
2026-11-24 04:06:20.000 UTC [1300] postgres@scratch LOG:  statement: SELECT 'durable-bench-mark:t1:end'
2026-11-24 04:06:20.001 UTC [1325] postgres@scratch LOG:  statement: -- ping
`

func newCount() logCount {
	return logCount{db: "scratch", startMark: "durable-bench-mark:t1:start", endMark: "durable-bench-mark:t1:end"}
}

func TestParseLogLinePrefix(t *testing.T) {
	t.Parallel()
	f, err := parseLogLinePrefix("%m [%p] %q%u@%d ")
	require.NoError(t, err)
	c := newCount()
	for line := range strings.Lines(debianLog) {
		f.add(&c, strings.TrimSuffix(line, "\n"))
	}
	require.True(t, c.started)
	require.True(t, c.ended)
	// Before the start marker, after the end marker, another database,
	// DETAIL, ERROR, STATEMENT, duration and continuation lines do not
	// count; pings, BEGIN and COMMIT do.
	require.Equal(t, map[int32]int64{1325: 4, 1326: 1}, c.perPID)

	for _, tc := range []struct {
		prefix, line string
		pid          int32
	}{
		{"%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ",
			"2026-11-24 04:06:19 UTC [77]: [3-1] user=app,db=scratch,app=durable-bench-w1:s,client=127.0.0.1 LOG:  statement: SELECT 1", 77},
		{"%-8p %d: ", "42       scratch: LOG:  execute S_1: COMMIT", 42},
		{"%n|%c|%p|%d|%%|", "1763957179.057|6923f0f1.52d|1325|scratch|%|LOG:  statement: BEGIN", 1325},
		{"[%p] ", "[9] LOG:  statement: SELECT 1", 9}, // no %d: every database
	} {
		f, err := parseLogLinePrefix(tc.prefix)
		require.NoError(t, err, tc.prefix)
		c := newCount()
		c.started = true
		f.add(&c, tc.line)
		require.Equal(t, map[int32]int64{tc.pid: 1}, c.perPID, "%q: %q", tc.prefix, tc.line)
		f.add(&c, strings.Replace(tc.line, "LOG:  ", "DETAIL:  ", 1))
		require.Equal(t, map[int32]int64{tc.pid: 1}, c.perPID, "not a statement")
	}

	_, err = parseLogLinePrefix("%m %u@%d ")
	require.ErrorIs(t, err, errNoPID)
}

// TestServerLogRead follows a log file as the server appends to it, with a
// line written in two parts.
func TestServerLogRead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "postgresql.log")
	require.NoError(t, os.WriteFile(path, []byte("2026-11-24 04:06:18.000 UTC [1] postgres@scratch LOG:  statement: SELECT 'before'\n"), 0o600))
	f, err := parseLogLinePrefix("%m [%p] %q%u@%d ")
	require.NoError(t, err)
	file, err := os.Open(path)
	require.NoError(t, err)
	st, err := file.Stat()
	require.NoError(t, err)
	l := &serverLog{path: path, format: f, file: file, pos: st.Size(), count: newCount()}
	defer l.close()

	appendLog := func(s string) {
		w, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = w.WriteString(s)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	lines := strings.SplitAfter(debianLog, "\n")
	half := len(lines) / 2
	first := strings.Join(lines[:half], "")
	appendLog(first + lines[half][:20])
	require.NoError(t, l.read())
	require.True(t, l.count.started)
	require.False(t, l.count.ended)
	appendLog(lines[half][20:] + strings.Join(lines[half+1:], ""))
	require.NoError(t, l.read())
	require.True(t, l.count.ended)
	require.Equal(t, map[int32]int64{1325: 4, 1326: 1}, l.count.perPID)

	require.NoError(t, os.Truncate(path, 10))
	require.ErrorContains(t, l.read(), "truncated")
}
