package durablecli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// TestStatsStorage: "stats --storage" prints a row per table of the schema
// with its rows, dead rows and sizes, and names the table whose dead rows
// need attention, in text and in JSON.
func TestStatsStorage(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	code, out, errOut := runCLI(t, p.Flags("stats", "--storage")...)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(out, "\n")
	require.Regexp(t, `^storage of schema `+p.Schema+` \(server: autovacuum (on|off), track_counts on\):$`, lines[0])
	rows := section(t, out, "TABLE ")
	requireAligned(t, rows, "LIVE", "DEAD", "DEAD%", "TOTAL", "DATA", "INDEXES", "VACUUMED", "AUTOVACUUM")
	require.Regexp(t, `(?m)^tasks +0 +0 +0% +[\d.]+ kB +[\d.]+ kB +[\d.]+ kB +never +on$`, out)
	require.Contains(t, out, "\nno table needs attention\n")

	pool := pgtest.Pool(t)
	pgtest.DeadTasks(t, pool, p.Schema, 12_000)
	var doc struct {
		Autovacuum bool     `json:"autovacuum"`
		Warnings   []string `json:"warnings"`
		Attention  int      `json:"attention"`
		Tables     []struct {
			Name       string  `json:"name"`
			LiveRows   int64   `json:"live_rows"`
			DeadRows   int64   `json:"dead_rows"`
			Dead       float64 `json:"dead_fraction"`
			TotalBytes int64   `json:"total_bytes"`
			Autovacuum bool    `json:"autovacuum"`
			Attention  string  `json:"attention"`
		} `json:"tables"`
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, out, errOut = runCLI(t, p.Flags("stats", "--storage", "--json")...)
		require.Equal(t, 0, code, errOut)
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		if doc.Attention > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the dead tasks never showed: %s", out)
		time.Sleep(50 * time.Millisecond) // the statistics show a moment after the deletion: polled with a deadline
	}
	require.Equal(t, 1, doc.Attention, out)
	for _, tb := range doc.Tables {
		if tb.Name != "tasks" {
			require.Empty(t, tb.Attention, tb.Name)
			continue
		}
		require.GreaterOrEqual(t, tb.DeadRows, int64(12_000))
		require.Equal(t, 1.0, tb.Dead)
		require.False(t, tb.Autovacuum)
		require.Positive(t, tb.TotalBytes)
		require.Contains(t, tb.Attention, "autovacuum is off")
	}
	require.Equal(t, !doc.Autovacuum, len(doc.Warnings) == 1, "a warning when the server's autovacuum is off: %v", doc.Warnings)

	code, out, errOut = runCLI(t, p.Flags("stats", "--storage")...)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^tasks +0 +\d{2},\d{3} +100% +[\d.]+ (kB|MB) +[\d.]+ (kB|MB) +[\d.]+ (kB|MB) +never +off$`, out)
	require.Regexp(t, `(?m)^needs attention:\n  tasks: \d{2},\d{3} dead rows \(100%\) and autovacuum is off (on this server|for this table)`, out)
	if !doc.Autovacuum {
		require.Contains(t, out, "\nwarning: autovacuum is off on this server")
	}
	require.NotContains(t, out, "no table needs attention")
}

// TestStatsStorageFlags: --storage takes no --tenant or --window; a schema
// that is not migrated is the operators' usual error.
func TestStatsStorageFlags(t *testing.T) {
	t.Parallel()
	code, _, errOut := runCLI(t, "stats", "--storage", "--tenant", "t", "--database-url", "postgres://x/y")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--storage reads every table: it takes no --tenant or --window")
	code, _, errOut = runCLI(t, "stats", "--storage", "--window", "1m", "--database-url", "postgres://x/y")
	require.Equal(t, exitUsage, code, errOut)

	p := newPG(t, false)
	code, _, errOut = runCLI(t, p.Flags("stats", "--storage")...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "migrate")
	code, _, help := runCLI(t, "stats", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, help, "-storage")
	require.Contains(t, help, "GET\n/api/v1/storage")
}

// TestWorkerMetricsStorage: the leading worker serves the storage of the
// tables at /metrics, by table.
func TestWorkerMetricsStorage(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	pgtest.DeadTasks(t, pgtest.Pool(t), p.Schema, 12_000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	log := clitest.NewLines(pr)
	done := make(chan int, 1)
	go func() {
		var stdout strings.Builder
		done <- run(ctx, p.Flags("worker", "--metrics-addr", "127.0.0.1:0", "--worker-id", "storage"), &stdout, pw)
		pw.Close()
	}()
	log.WaitFor(t, "durable worker: serving", 30*time.Second)
	m := regexp.MustCompile(`serving metrics" addr=(\S+)`).FindStringSubmatch(log.String())
	require.NotNil(t, m, log.String())
	url := "http://" + m[1] + "/metrics"
	scrape := func() string {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	gauge := func(body, name string) (int64, bool) {
		m := regexp.MustCompile(`(?m)^` + name + `\{durable_table="tasks"[^}]*\} (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err, m[0])
		return int64(v), true
	}
	var body string
	require.Eventually(t, func() bool { // the worker leads a moment after it serves
		body = scrape()
		n, ok := gauge(body, "durable_table_dead_rows")
		return ok && n >= 12_000
	}, 30*time.Second, 50*time.Millisecond, "durable_table_dead_rows of tasks")
	size, ok := gauge(body, "durable_table_size_bytes")
	require.True(t, ok, body)
	var want int64
	require.NoError(t, pgtest.Pool(t).QueryRow(ctx, // tasks is partitioned (migration 017): the sum of its partitions
		"SELECT sum(pg_total_relation_size(inhrelid))::int8 FROM pg_inherits WHERE inhparent = $1::regclass",
		pgx.Identifier{p.Schema, "tasks"}.Sanitize()).Scan(&want))
	// The leader may make a period's (empty) partitions between the two
	// readings: a few pages.
	require.InDelta(t, want, size, 256*1024)
	live, ok := gauge(body, "durable_table_live_rows")
	require.True(t, ok, body)
	require.Zero(t, live)
	attention, ok := gauge(body, "durable_table_attention")
	require.True(t, ok, body)
	require.Equal(t, int64(1), attention)
	require.Regexp(t, `(?m)^durable_table_attention\{durable_table="runs"[^}]*\} 0$`, body)
	cancel()
	require.Equal(t, 0, <-done, log.String())
}

func TestBytesCell(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 kB", 8192: "8.0 kB", 40960: "40 kB",
		4_227_072: "4.0 MB", 65 << 30: "65 GB", 3 << 40: "3.0 TB"} {
		require.Equal(t, want, bytesCell(n), n)
	}
}
