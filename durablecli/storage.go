package durablecli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/internal/core/bloat"
)

// printStorage prints the storage of the tables of op's schema ("stats
// --storage") and returns the exit status.
func (c *cli) printStorage(ctx context.Context, op *operator, asJSON bool, stdout, stderr io.Writer) int {
	st, err := op.e.Storage(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "%s stats: %v\n", c.name, err)
		return 1
	}
	out := durablejson.NewStorage(st)
	if asJSON {
		b, err := json.Marshal(out)
		if err != nil {
			fmt.Fprintf(stderr, "%s stats: %v\n", c.name, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	writeStorage(stdout, out, op.schema)
	return 0
}

// writeStorage writes the table of st's tables, then its warnings and the
// tables that need attention.
func writeStorage(w io.Writer, st *durablejson.Storage, schema string) {
	fmt.Fprintf(w, "storage of schema %s (server: autovacuum %s, track_counts %s):\n", schema, onOff(st.Autovacuum), onOff(st.TrackCounts))
	if len(st.Tables) == 0 {
		fmt.Fprintln(w, "no table")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprint(tw, "TABLE\tLIVE\tDEAD\tDEAD%\tTOTAL\tDATA\tINDEXES\tVACUUMED\tAUTOVACUUM\n")
		for _, t := range st.Tables {
			name := t.Name
			if t.PartitionOf != "" {
				name += " (of " + t.PartitionOf + ")"
			}
			last := "never"
			if v := lastOf(t.LastVacuum, t.LastAutovacuum); v != nil {
				last = max(st.At.Sub(*v), 0).Round(time.Second).String() + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f%%\t%s\t%s\t%s\t%s\t%s\n", name, bloat.Count(t.LiveRows), bloat.Count(t.DeadRows),
				100*t.DeadFraction, bytesCell(t.TotalBytes), bytesCell(t.TableBytes), bytesCell(t.IndexBytes), last, onOff(t.Autovacuum))
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	for _, warning := range st.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	if st.Attention == 0 {
		fmt.Fprintln(w, "no table needs attention")
		return
	}
	fmt.Fprintln(w, "needs attention:")
	for _, t := range st.Tables {
		if t.Attention != "" {
			fmt.Fprintf(w, "  %s: %s\n", t.Name, t.Attention)
		}
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// lastOf returns the later of two times, either of which may be nil.
func lastOf(a, b *time.Time) *time.Time {
	if a == nil || (b != nil && b.After(*a)) {
		return b
	}
	return a
}

// bytesCell writes a size in units of 1024 bytes (B, kB, MB, GB, TB),
// with one decimal under 10 of a unit.
func bytesCell(n int64) string {
	v, u := float64(n), "B"
	for _, next := range []string{"kB", "MB", "GB", "TB"} {
		if v < 1024 {
			break
		}
		v, u = v/1024, next
	}
	if u == "B" || v >= 10 {
		return fmt.Sprintf("%.0f %s", v, u)
	}
	return fmt.Sprintf("%.1f %s", v, u)
}
