package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Report is the outcome of one scenario: what was run, the figures measured
// (each with its goal, when it has one), the peers' figures for comparison,
// and whether the work was verified.
type Report struct {
	Scenario    string `json:"scenario"`
	Description string `json:"description"`
	// Schema is the PostgreSQL schema the scenario ran in; SchemaKept
	// tells whether it was left in place (--keep or --schema).
	Schema     string `json:"schema"`
	SchemaKept bool   `json:"schema_kept"`
	// Database is the scratch database idle measured in, if it made one
	// (dropped unless the schema was kept).
	Database string `json:"database,omitempty"`
	Params   Params `json:"params"`
	// Method is how idle counted the server's statements: MethodServerLog,
	// MethodStatements or MethodDatabase (which counts transactions).
	Method string `json:"method,omitempty"`
	// Verified is false when the work did not complete as it should (runs
	// left unfinished, a timeout); Failure says why.
	Verified bool   `json:"verified"`
	Failure  string `json:"failure,omitempty"`
	// ElapsedSeconds is the wall time of the whole scenario, setup included.
	ElapsedSeconds float64  `json:"elapsed_s"`
	Metrics        []Metric `json:"metrics"`
	Tables         []Table  `json:"tables,omitempty"`
	// Series is soak's samples, oldest first.
	Series     []SoakSample `json:"series,omitempty"`
	References []Reference  `json:"references,omitempty"`
	Notes      []string     `json:"notes,omitempty"`
}

// Params are the parameters a scenario ran with, defaults resolved.
type Params struct {
	Runs  int `json:"runs,omitempty"`
	Tasks int `json:"tasks,omitempty"`
	// Items is the map scenario's items; Children the child runs of the
	// children scenario; Steps the func scenario's steps (durable.Do
	// calls, FuncSteps a run).
	Items       int     `json:"items,omitempty"`
	Steps       int     `json:"steps,omitempty"`
	Children    int     `json:"children,omitempty"`
	Mode        string  `json:"mode"` // "in-process" or "processes"
	Workers     int     `json:"workers"`
	Concurrency int     `json:"concurrency"`
	ClaimBatch  int     `json:"claim_batch"`  // 0: the engine's default
	FinishBatch int     `json:"finish_batch"` // 0: the engine's default
	Tenants     int     `json:"tenants,omitempty"`
	TenantStep  int     `json:"tenant_step,omitempty"`
	InsertBatch int     `json:"insert_batch,omitempty"`
	IntervalMS  float64 `json:"interval_ms,omitempty"`
	DurationS   float64 `json:"duration_s,omitempty"`
	SettleS     float64 `json:"settle_s,omitempty"`
	Repeat      int     `json:"repeat,omitempty"`
	Rate        int     `json:"rate,omitempty"`
	RetentionS  float64 `json:"retention_s,omitempty"`
	SampleS     float64 `json:"sample_s,omitempty"`
	// Autovacuum is who vacuumed during soak: VacuumServer or VacuumBench
	// once resolved.
	Autovacuum string `json:"autovacuum,omitempty"`
	// Senders and SendBatch are how events sent its events: goroutines,
	// and events per SendEvents call.
	Senders   int `json:"senders,omitempty"`
	SendBatch int `json:"send_batch,omitempty"`
}

// Metric is one measured figure. Key is stable, for machines; Label is for
// people.
type Metric struct {
	Key   string  `json:"key"`
	Label string  `json:"label"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Goal  *Goal   `json:"goal,omitempty"`
	// Met is set when there is a goal.
	Met *bool `json:"met,omitempty"`
	// Decimals is how many decimals the table shows.
	Decimals int `json:"-"`
}

// Goal is a target for a metric: Value is a bound, Op is "<=" or ">=". Or,
// when set, says what else meets it (AddGoalOr).
type Goal struct {
	Op    string  `json:"op"`
	Value float64 `json:"value"`
	Or    string  `json:"or,omitempty"`
}

// AtLeast and AtMost make goals.
func AtLeast(v float64) *Goal { return &Goal{Op: ">=", Value: v} }
func AtMost(v float64) *Goal  { return &Goal{Op: "<=", Value: v} }

// Met reports whether v meets the goal.
func (g *Goal) Met(v float64) bool {
	if g.Op == "<=" {
		return v <= g.Value
	}
	return v >= g.Value
}

// Table is a breakdown (per tenant, per worker) shown under the figures.
type Table struct {
	Title   string   `json:"title"`
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
}

// Reference is a peer's figure on the same machine kind, for comparison.
type Reference struct {
	System   string `json:"system"`
	Workload string `json:"workload"`
	Figure   string `json:"figure"`
}

// Add appends a metric with no goal.
func (r *Report) Add(key, label string, v float64, unit string, decimals int) {
	r.Metrics = append(r.Metrics, Metric{Key: key, Label: label, Value: v, Unit: unit, Decimals: decimals})
}

// AddGoal appends a metric with a goal and records whether it was met.
func (r *Report) AddGoal(key, label string, v float64, unit string, decimals int, g *Goal) {
	met := g.Met(v)
	r.Metrics = append(r.Metrics, Metric{Key: key, Label: label, Value: v, Unit: unit, Decimals: decimals, Goal: g, Met: &met})
}

// AddGoalOr appends a metric with a goal that another figure may meet
// instead: met when v meets g or orMet; or says what that figure's bound
// is, e.g. "or within 1 ms".
func (r *Report) AddGoalOr(key, label string, v float64, unit string, decimals int, g *Goal, or string, orMet bool) {
	g.Or = or
	met := g.Met(v) || orMet
	r.Metrics = append(r.Metrics, Metric{Key: key, Label: label, Value: v, Unit: unit, Decimals: decimals, Goal: g, Met: &met})
}

// Metric returns the metric with key k.
func (r *Report) Metric(k string) (Metric, bool) {
	for _, m := range r.Metrics {
		if m.Key == k {
			return m, true
		}
	}
	return Metric{}, false
}

// Note appends a note.
func (r *Report) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// WriteJSON writes the report as one JSON object and a newline.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteText writes the report as aligned tables for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "durable bench %s: %s\n", r.Scenario, r.Description)
	fmt.Fprintf(&b, "workers: %s\n", r.Params.workers())
	if r.Method != "" {
		fmt.Fprintf(&b, "statements counted by: %s\n", r.Method)
	}
	kept := "dropped"
	if r.SchemaKept {
		kept = "kept"
	}
	if r.Database != "" {
		fmt.Fprintf(&b, "database: %s, a scratch database (%s)\n", r.Database, kept)
	}
	fmt.Fprintf(&b, "schema: %s (%s)\n\n", r.Schema, kept)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tVALUE\tUNIT\tGOAL\t")
	for _, m := range r.Metrics {
		goal, status := "", ""
		if m.Goal != nil {
			goal = m.Goal.String(m.Decimals)
			status = "met"
			if m.Met != nil && !*m.Met {
				status = "MISSED"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Label, FormatNumber(m.Value, m.Decimals), m.Unit, goal, status)
	}
	tw.Flush()

	for _, t := range r.Tables {
		fmt.Fprintf(&b, "\n%s\n", t.Title)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.ToUpper(strings.Join(t.Columns, "\t"))+"\t")
		for _, row := range t.Rows {
			cells := make([]string, len(row))
			for i, c := range row {
				cells[i] = formatCell(c)
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
		tw.Flush()
	}

	if len(r.References) > 0 {
		fmt.Fprintln(&b, "\nREFERENCE (peers on this machine kind, from PEERS.md)")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, ref := range r.References {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", ref.System, ref.Workload, ref.Figure)
		}
		tw.Flush()
	}

	b.WriteString("\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if r.Verified {
		b.WriteString("verified: yes\n")
	} else {
		fmt.Fprintf(&b, "verified: NO: %s\n", r.Failure)
	}
	fmt.Fprintf(&b, "took %.1fs\n", r.ElapsedSeconds)
	_, err := io.WriteString(w, b.String())
	return err
}

func (p Params) workers() string {
	var b strings.Builder
	plural := func(one, many string) string {
		if p.Workers == 1 {
			return one
		}
		return many
	}
	switch p.Mode {
	case ModeProcesses:
		fmt.Fprintf(&b, "%d `durable worker` %s", p.Workers, plural("process", "processes"))
	default:
		fmt.Fprintf(&b, "%d in-process %s", p.Workers, plural("engine", "engines"))
	}
	fmt.Fprintf(&b, ", concurrency %d each", p.Concurrency)
	batch := func(name string, v int) {
		if v == 0 {
			fmt.Fprintf(&b, ", %s default", name)
		} else {
			fmt.Fprintf(&b, ", %s %d", name, v)
		}
	}
	batch("claim batch", p.ClaimBatch)
	batch("finish batch", p.FinishBatch)
	return b.String()
}

// String renders a goal, e.g. "≥ 20,000".
func (g *Goal) String(decimals int) string {
	op := "≥"
	if g.Op == "<=" {
		op = "≤"
	}
	s := op + " " + FormatNumber(g.Value, decimals)
	if g.Or != "" {
		s += " " + g.Or
	}
	return s
}

func formatCell(c any) string {
	switch v := c.(type) {
	case float64:
		if v == math.Trunc(v) {
			return FormatNumber(v, 0)
		}
		s := strconv.FormatFloat(v, 'f', -1, 64)
		_, frac, _ := strings.Cut(s, ".")
		return FormatNumber(v, min(len(frac), 3))
	case int:
		return FormatNumber(float64(v), 0)
	case int64:
		return FormatNumber(float64(v), 0)
	default:
		return fmt.Sprint(v)
	}
}

// FormatNumber formats v with the given decimals and thousands separators:
// 23456.7 with 0 decimals is "23,457".
func FormatNumber(v float64, decimals int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	s := strconv.FormatFloat(math.Abs(v), 'f', decimals, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if v < 0 && strings.Trim(s, "0.") != "" {
		b.WriteByte('-')
	}
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}
