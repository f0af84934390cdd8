package bloat

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
)

func TestJudgeTables(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name             string
		live, dead       int64
		serverAutovacuum bool
		tableAutovacuum  bool
		lastAutovacuum   time.Time
		want             string // a part of the verdict; "" for none
	}{
		{name: "clean", live: 1_000_000, dead: 0, serverAutovacuum: true, tableAutovacuum: true},
		{name: "few dead, large share", live: 10, dead: MinDeadRows - 1, serverAutovacuum: true, tableAutovacuum: true},
		{name: "few dead, autovacuum off", live: 0, dead: MinDeadRows - 1, serverAutovacuum: false, tableAutovacuum: false},
		{name: "many dead, small share", live: 1_000_000, dead: 200_000, serverAutovacuum: true, tableAutovacuum: true},
		{name: "many dead, at the share", live: 40_000, dead: 10_000, serverAutovacuum: true, tableAutovacuum: true},
		{name: "many dead, past the share", live: 39_999, dead: 10_000, serverAutovacuum: true, tableAutovacuum: true,
			want: "10,000 dead rows (20%): autovacuum is behind (never vacuumed)"},
		{name: "behind, vacuumed before", live: 1_000, dead: 1_200_000, serverAutovacuum: true, tableAutovacuum: true,
			lastAutovacuum: at.Add(-3 * time.Hour), want: "1,200,000 dead rows (100%): autovacuum is behind (last vacuumed 3h0m0s ago)"},
		{name: "server off, small share", live: 10_000_000, dead: MinDeadRows, serverAutovacuum: false, tableAutovacuum: true,
			want: "10,000 dead rows (0%) and autovacuum is off on this server"},
		{name: "table off, small share", live: 10_000_000, dead: 50_000, serverAutovacuum: true, tableAutovacuum: false,
			want: "50,000 dead rows (0%) and autovacuum is off for this table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &durabletype.Storage{At: at, Autovacuum: tc.serverAutovacuum, TrackCounts: true,
				Tables: []durabletype.TableStorage{{Name: "tasks", LiveRows: tc.live, DeadRows: tc.dead,
					Autovacuum: tc.tableAutovacuum, LastAutovacuum: tc.lastAutovacuum}}}
			Judge(st)
			got := st.Tables[0].Attention
			if tc.want == "" {
				require.Empty(t, got)
				return
			}
			require.True(t, strings.HasPrefix(got, tc.want), "verdict %q, want it to begin with %q", got, tc.want)
		})
	}
}

func TestJudgeServer(t *testing.T) {
	t.Parallel()
	st := &durabletype.Storage{Autovacuum: true, TrackCounts: true, Warnings: []string{"stale"}}
	Judge(st)
	require.Empty(t, st.Warnings)

	st = &durabletype.Storage{Autovacuum: false, TrackCounts: false}
	Judge(st)
	require.Len(t, st.Warnings, 2)
	require.Contains(t, st.Warnings[0], "track_counts is off")
	require.Contains(t, st.Warnings[1], "autovacuum is off on this server")
}

func TestCount(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -12345: "-12,345"} {
		require.Equal(t, want, Count(n))
	}
}
