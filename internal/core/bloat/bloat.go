// Package bloat judges a store's storage figures (durabletype.Storage):
// which tables have more dead rows than vacuum should have left, and
// which server settings keep vacuum from reclaiming them. It is the one
// place that rule lives: the engine applies it (Engine.Storage) for the
// CLI, the HTTP API and the metrics alike.
package bloat

import (
	"fmt"
	"strconv"
	"time"

	"github.com/effectivelabs/durable/durabletype"
)

// The thresholds of the rule (Judge).
const (
	// MinDeadRows is the fewest dead rows a table needs to be flagged at
	// all. Below it the dead rows cost little whatever their share: a few
	// megabytes at most, and a vacuum of a small table takes moments.
	// Queue tables that churn pass through small counts all the time.
	MinDeadRows = 10_000
	// MaxDeadFraction is the share of a table's row versions
	// (DeadRows / (LiveRows + DeadRows)) past which its dead rows are
	// more than vacuum should have left. PostgreSQL's autovacuum starts
	// on a table when its dead rows pass 50 + 20% of its live rows
	// (autovacuum_vacuum_scale_factor 0.2, about 17% of all its row
	// versions); a table past 20% that still has them is one autovacuum
	// did not get to or could not clean: it is starved (too few workers,
	// too much cost throttling) or blocked (a long transaction, an
	// abandoned replication slot or prepared transaction holding back
	// the oldest row any snapshot may see).
	MaxDeadFraction = 0.2
)

// Judge fills st's verdicts: the Attention of each table that needs it
// and the Warnings about the server, replacing any already there.
//
// A table needs attention when it has at least MinDeadRows dead rows and
// either nothing will reclaim them (autovacuum is off on the server, or
// for the table), or they are more than MaxDeadFraction of its row
// versions (autovacuum is behind). The server is warned about when
// autovacuum is off, and when track_counts is off (the row counts are
// then zero, and autovacuum cannot run).
func Judge(st *durabletype.Storage) {
	st.Warnings = nil
	if !st.TrackCounts {
		st.Warnings = append(st.Warnings, "track_counts is off on this server: the row counts read zero and autovacuum cannot run; turn it on")
	}
	if !st.Autovacuum {
		st.Warnings = append(st.Warnings, "autovacuum is off on this server: dead rows pile up until a manual VACUUM; turn it on")
	}
	for i := range st.Tables {
		st.Tables[i].Attention = attention(&st.Tables[i], st.Autovacuum, st.At)
	}
}

// attention is the verdict on one table: why it needs attention, or "".
func attention(t *durabletype.TableStorage, serverAutovacuum bool, at time.Time) string {
	if t.DeadRows < MinDeadRows {
		return ""
	}
	dead := fmt.Sprintf("%s dead rows (%.0f%%)", Count(t.DeadRows), 100*t.DeadFraction())
	switch {
	case !serverAutovacuum:
		return fmt.Sprintf("%s and autovacuum is off on this server: run VACUUM on it, and turn autovacuum on", dead)
	case !t.Autovacuum:
		return fmt.Sprintf("%s and autovacuum is off for this table (autovacuum_enabled = false): run VACUUM on it, and reset that setting", dead)
	case t.DeadFraction() > MaxDeadFraction:
		return fmt.Sprintf("%s: autovacuum is behind (%s); look for long transactions and for autovacuum starved of workers or throttled", dead, lastVacuum(t, at))
	}
	return ""
}

// lastVacuum says when t was last vacuumed, by hand or by autovacuum.
func lastVacuum(t *durabletype.TableStorage, at time.Time) string {
	last := t.LastVacuum
	if t.LastAutovacuum.After(last) {
		last = t.LastAutovacuum
	}
	if last.IsZero() {
		return "never vacuumed"
	}
	return "last vacuumed " + max(at.Sub(last), 0).Round(time.Second).String() + " ago"
}

// Count writes n with a comma between each group of three digits
// (1,234,567), as the verdicts write row counts.
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	if neg {
		return "-" + string(b)
	}
	return string(b)
}
