package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// report prints the Markdown tables of README.md from the JSON lines of
// measurements (-json): for each design, scenario and compression, the
// last measurement without a problem.
func report(path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	type key struct{ design, scenario, compression string }
	last := map[key]*result{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		r := &result{}
		if err := json.Unmarshal(sc.Bytes(), r); err != nil {
			return err
		}
		if r.Problem == "" {
			last[key{r.Design, r.Scenario, r.Compression}] = r
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	per := func(r *result) float64 {
		if r.Scenario == "dag" {
			return float64(r.Tasks)
		}
		return float64(r.Runs)
	}
	cell := func(r *result, what string) string {
		if r == nil {
			return "-"
		}
		n := per(r)
		ins, wk := r.Insert.ownTotal()/n, r.Work.ownTotal()/n
		switch what {
		case "insert":
			return fmt.Sprintf("%.0f", ins)
		case "work":
			return fmt.Sprintf("%.0f (%.0f)", wk, float64(r.Work.OwnFPI)/n)
		case "total":
			return fmt.Sprintf("**%.0f**", ins+wk)
		}
		return ""
	}
	var names []string
	for _, d := range designs {
		names = append(names, d.name)
	}
	fmt.Fprintln(out, "| design | single insert B/run | single work B/run (FPI) | single total B/run | dag insert B/task | dag work B/task (FPI) | dag total B/task | lz4: single total (work FPI) | lz4: dag total (work FPI) |")
	fmt.Fprintln(out, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, d := range names {
		s, g := last[key{d, "single", ""}], last[key{d, "dag", ""}]
		sl, gl := last[key{d, "single", "lz4"}], last[key{d, "dag", "lz4"}]
		lz := func(r *result) string {
			if r == nil {
				return "-"
			}
			n := per(r)
			return fmt.Sprintf("%.0f (%.0f)", (r.Insert.ownTotal()+r.Work.ownTotal())/n, float64(r.Work.OwnFPI)/n)
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", d,
			cell(s, "insert"), cell(s, "work"), cell(s, "total"), cell(g, "insert"), cell(g, "work"), cell(g, "total"), lz(sl), lz(gl))
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Updates of the work phase (pg_stat_user_tables), HOT of all:")
	fmt.Fprintln(out)
	for _, d := range names {
		for _, s := range []string{"single", "dag"} {
			if r := last[key{d, s, ""}]; r != nil {
				fmt.Fprintf(out, "- %s %s: tasks %d updates, %d HOT; runs %d, %d HOT; %d claims, %d finishes\n", d, s, r.TasksUpdates, r.TasksHOT, r.RunsUpdates, r.RunsHOT, r.Claims, r.Finishes)
			}
		}
	}
	for _, d := range names {
		for _, s := range []string{"single", "dag"} {
			r := last[key{d, s, ""}]
			if r == nil {
				continue
			}
			fmt.Fprintf(out, "\n### %s %s, by relation (B/%s)\n\n", d, s, map[bool]string{true: "task", false: "run"}[s == "dag"])
			byRelation(r, per(r), out)
			fmt.Fprintf(out, "\n%s %s, work phase by operation, relation and record type (rows of at least 2 B):\n\n", d, s)
			byType(r, per(r), out)
		}
	}
	return nil
}

// byRelation prints both phases by relation: record bytes with their
// FPIs; page headers and alignment (the LSN distance less the records,
// pro rata) last.
func byRelation(r *result, n float64, out io.Writer) {
	type row struct {
		rel              string
		ins, work, wkFPI float64
	}
	rows := map[string]*row{}
	add := func(p *phase, work bool) {
		for _, g := range p.Groups {
			rel := g.Rel
			if rel == "(none)" || strings.HasPrefix(rel, "other relation") || rel == "event_blocks" {
				rel = "commit records, sequence, catalog"
			}
			x := rows[rel]
			if x == nil {
				x = &row{rel: rel}
				rows[rel] = x
			}
			if work {
				x.work += float64(g.Bytes+g.FPI) / n
				x.wkFPI += float64(g.FPI) / n
			} else {
				x.ins += float64(g.Bytes+g.FPI) / n
			}
		}
	}
	add(&r.Insert, false)
	add(&r.Work, true)
	var list []*row
	for _, x := range rows {
		list = append(list, x)
	}
	slices.SortFunc(list, func(a, b *row) int { return cmp.Compare(b.ins+b.work, a.ins+a.work) })
	fmt.Fprintln(out, "| relation | insert | work (FPI) | total |")
	fmt.Fprintln(out, "|---|--:|--:|--:|")
	var small row
	for _, x := range list {
		if x.ins+x.work < 1 {
			small.ins += x.ins
			small.work += x.work
			small.wkFPI += x.wkFPI
			continue
		}
		fmt.Fprintf(out, "| %s | %.0f | %.0f (%.0f) | %.0f |\n", x.rel, x.ins, x.work, x.wkFPI, x.ins+x.work)
	}
	if small.ins+small.work > 0 {
		fmt.Fprintf(out, "| the rest (lanes, frontier, run_counts, ...) | %.1f | %.1f | %.1f |\n", small.ins, small.work, small.ins+small.work)
	}
	hi, hw := (r.Insert.ownTotal()-float64(r.Insert.Own))/n, (r.Work.ownTotal()-float64(r.Work.Own))/n
	fmt.Fprintf(out, "| page headers, alignment | %.0f | %.0f | %.0f |\n", hi, hw, hi+hw)
	ti, tw := r.Insert.ownTotal()/n, r.Work.ownTotal()/n
	fmt.Fprintf(out, "| **total** | **%.0f** | **%.0f (%.0f)** | **%.0f** |\n", ti, tw, float64(r.Work.OwnFPI)/n, ti+tw)
}

func byType(r *result, n float64, out io.Writer) {
	gs := slices.Clone(r.Work.Groups)
	slices.SortFunc(gs, func(a, b group) int {
		return cmp.Or(strings.Compare(a.Op, b.Op), cmp.Compare(b.Bytes+b.FPI, a.Bytes+a.FPI))
	})
	fmt.Fprintln(out, "| operation | relation | record type | records | B (FPI) |")
	fmt.Fprintln(out, "|---|---|---|--:|--:|")
	for _, g := range gs {
		if float64(g.Bytes+g.FPI)/n < 2 {
			continue
		}
		fmt.Fprintf(out, "| %s | %s | %s | %.2f | %.0f (%.0f) |\n", g.Op, g.Rel, g.Type, float64(g.N)/n, float64(g.Bytes+g.FPI)/n, float64(g.FPI)/n)
	}
}
