package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Who vacuums the durable tables during soak (Options.Autovacuum).
const (
	// VacuumAuto is VacuumServer when the server's autovacuum is on, else
	// VacuumBench.
	VacuumAuto = "auto"
	// VacuumServer leaves it to PostgreSQL's autovacuum (which may be off).
	VacuumServer = "server"
	// VacuumBench has the bench vacuum as autovacuum would.
	VacuumBench = "bench"
)

// avSettings are the server's autovacuum settings, which the bench's
// stand-in follows.
type avSettings struct {
	naptime                    time.Duration
	maxWorkers                 int
	vacThreshold, vacScale     float64
	insThreshold, insScale     float64
	analyzeThreshold, anaScale float64
	costDelayMS                float64
	costLimit                  int
	autovacuumOn               bool
}

func (b *bencher) readAVSettings(ctx context.Context) (avSettings, error) {
	rows, err := b.monitor.Query(ctx, `SELECT name, setting FROM pg_settings WHERE name IN (
'autovacuum', 'autovacuum_naptime', 'autovacuum_max_workers', 'autovacuum_vacuum_threshold',
'autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_insert_threshold', 'autovacuum_vacuum_insert_scale_factor',
'autovacuum_analyze_threshold', 'autovacuum_analyze_scale_factor', 'autovacuum_vacuum_cost_delay',
'autovacuum_vacuum_cost_limit', 'vacuum_cost_delay', 'vacuum_cost_limit')`)
	if err != nil {
		return avSettings{}, fmt.Errorf("reading the autovacuum settings: %w", err)
	}
	set := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return avSettings{}, fmt.Errorf("reading the autovacuum settings: %w", err)
		}
		set[k] = v
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return avSettings{}, fmt.Errorf("reading the autovacuum settings: %w", err)
	}
	num := func(k string) float64 {
		v, _ := strconv.ParseFloat(set[k], 64)
		return v
	}
	s := avSettings{
		autovacuumOn: set["autovacuum"] == "on",
		naptime:      time.Duration(num("autovacuum_naptime") * float64(time.Second)),
		maxWorkers:   int(num("autovacuum_max_workers")),
		vacThreshold: num("autovacuum_vacuum_threshold"), vacScale: num("autovacuum_vacuum_scale_factor"),
		insThreshold: num("autovacuum_vacuum_insert_threshold"), insScale: num("autovacuum_vacuum_insert_scale_factor"),
		analyzeThreshold: num("autovacuum_analyze_threshold"), anaScale: num("autovacuum_analyze_scale_factor"),
		costDelayMS: num("autovacuum_vacuum_cost_delay"), costLimit: int(num("autovacuum_vacuum_cost_limit")),
	}
	if s.costDelayMS < 0 {
		s.costDelayMS = num("vacuum_cost_delay")
	}
	if s.costLimit <= 0 {
		s.costLimit = int(num("vacuum_cost_limit"))
	}
	s.naptime = max(s.naptime, time.Second)
	s.maxWorkers = max(s.maxWorkers, 1)
	return s, nil
}

func (s avSettings) String() string {
	return fmt.Sprintf("every %s (autovacuum_naptime), up to %d at once, a table once its dead rows exceed %g + %g × its rows, "+
		"or its inserts since the last vacuum %g + %g × its rows (analyze: changes over %g + %g × its rows), "+
		"with a cost delay of %gms per %d",
		s.naptime, s.maxWorkers, s.vacThreshold, s.vacScale, s.insThreshold, s.insScale,
		s.analyzeThreshold, s.anaScale, s.costDelayMS, s.costLimit)
}

// vacuumMode resolves Options.Autovacuum against the server's setting
// and notes who vacuums in the report.
func (b *bencher) vacuumMode(ctx context.Context, rep *Report) (string, avSettings, error) {
	av, err := b.readAVSettings(ctx)
	if err != nil {
		return "", av, err
	}
	mode := b.o.Autovacuum
	if mode == VacuumAuto {
		mode = VacuumServer
		if !av.autovacuumOn {
			mode = VacuumBench
		}
	}
	rep.Params.Autovacuum = mode
	switch {
	case mode == VacuumBench:
		rep.Note("the bench vacuumed the schema's tables as autovacuum would (the server's autovacuum is %s): %s",
			map[bool]string{true: "on", false: "off"}[av.autovacuumOn], av)
	case !av.autovacuumOn:
		rep.Note("the server's autovacuum is OFF and the bench did not stand in for it: nothing vacuumed the tables")
	default:
		rep.Note("the server's autovacuum vacuumed the tables (naptime %s, up to %d workers)", av.naptime, av.maxWorkers)
	}
	return mode, av, nil
}

// loadAvg is the machine's 1-minute load average, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// VacuumRun is one vacuum or analyze the bench's stand-in ran.
type VacuumRun struct {
	Table   string  `json:"table"`
	Vacuum  bool    `json:"vacuum"`
	Analyze bool    `json:"analyze"`
	StartS  float64 `json:"start_s"` // since triggering began
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// vacuumer stands in for autovacuum on a server that has it off: every
// naptime it starts a worker (while fewer than maxWorkers run) that
// vacuums, then analyzes, each table of the schema past autovacuum's
// thresholds that no other worker has, with autovacuum's cost-based delay.
// Unlike autovacuum, the workers do not share one cost limit.
type vacuumer struct {
	b     *bencher
	s     avSettings
	pool  *pgxpool.Pool
	start time.Time

	mu     sync.Mutex
	busy   map[string]bool
	active int
	runs   []VacuumRun
	wg     sync.WaitGroup
}

func (b *bencher) startVacuumer(ctx context.Context, s avSettings, start time.Time) (*vacuumer, error) {
	cfg, err := b.poolConfig("vacuum", int32(s.maxWorkers))
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["vacuum_cost_delay"] = strconv.FormatFloat(s.costDelayMS, 'f', -1, 64) + "ms"
	cfg.ConnConfig.RuntimeParams["vacuum_cost_limit"] = strconv.Itoa(s.costLimit)
	pool, err := connectPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &vacuumer{b: b, s: s, pool: pool, start: start, busy: map[string]bool{}}, nil
}

// run launches workers every naptime until ctx ends, then waits for them.
func (v *vacuumer) run(ctx context.Context) {
	t := time.NewTicker(v.s.naptime)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			v.wg.Wait()
			return
		case <-t.C:
			v.mu.Lock()
			if v.active < v.s.maxWorkers {
				v.active++
				v.wg.Go(func() {
					v.worker(ctx)
					v.mu.Lock()
					v.active--
					v.mu.Unlock()
				})
			}
			v.mu.Unlock()
		}
	}
}

func (v *vacuumer) close() { v.pool.Close() }

// due lists the tables past a threshold: what to vacuum and to analyze.
func (v *vacuumer) due(ctx context.Context) (map[string][2]bool, error) {
	rows, err := v.pool.Query(ctx, `
SELECT c.relname, greatest(c.reltuples, 0)::float8, s.n_dead_tup, s.n_ins_since_vacuum, s.n_mod_since_analyze
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = $1 AND c.relkind = 'r'`, v.b.schema)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	due := map[string][2]bool{}
	for rows.Next() {
		var name string
		var tuples float64
		var dead, ins, mod int64
		if err := rows.Scan(&name, &tuples, &dead, &ins, &mod); err != nil {
			return nil, err
		}
		vac := float64(dead) > v.s.vacThreshold+v.s.vacScale*tuples ||
			float64(ins) > v.s.insThreshold+v.s.insScale*tuples
		ana := float64(mod) > v.s.analyzeThreshold+v.s.anaScale*tuples
		if vac || ana {
			due[name] = [2]bool{vac, ana}
		}
	}
	return due, rows.Err()
}

func (v *vacuumer) worker(ctx context.Context) {
	due, err := v.due(ctx)
	if err != nil {
		if ctx.Err() == nil {
			v.b.logf("autovacuum stand-in: %v", err)
		}
		return
	}
	names := make([]string, 0, len(due))
	for n := range due {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		v.mu.Lock()
		if v.busy[name] {
			v.mu.Unlock()
			continue
		}
		v.busy[name] = true
		v.mu.Unlock()
		// Like autovacuum, look again just before: another worker may
		// have done it meanwhile.
		if now, err := v.due(ctx); err == nil {
			what, ok := now[name]
			if ok {
				v.vacuum(ctx, name, what[0], what[1])
			}
		}
		v.mu.Lock()
		delete(v.busy, name)
		v.mu.Unlock()
	}
}

func (v *vacuumer) vacuum(ctx context.Context, name string, vac, ana bool) {
	sql := "VACUUM " + pgx.Identifier{v.b.schema, name}.Sanitize()
	switch {
	case vac && ana:
		sql = "VACUUM (ANALYZE) " + pgx.Identifier{v.b.schema, name}.Sanitize()
	case ana:
		sql = "ANALYZE " + pgx.Identifier{v.b.schema, name}.Sanitize()
	}
	t := time.Now()
	_, err := v.pool.Exec(ctx, sql)
	r := VacuumRun{Table: name, Vacuum: vac, Analyze: ana, StartS: t.Sub(v.start).Seconds(), Seconds: time.Since(t).Seconds()}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		r.Error = err.Error()
	}
	r.StartS, r.Seconds = math.Round(r.StartS*10)/10, math.Round(r.Seconds*1000)/1000
	v.mu.Lock()
	v.runs = append(v.runs, r)
	v.mu.Unlock()
}

// summary tabulates the vacuums per table.
func (v *vacuumer) summary() Table {
	v.mu.Lock()
	defer v.mu.Unlock()
	type agg struct {
		vacuums, analyzes, errors int
		total, longest            float64
	}
	per := map[string]*agg{}
	var names []string
	for _, r := range v.runs {
		a := per[r.Table]
		if a == nil {
			a = &agg{}
			per[r.Table] = a
			names = append(names, r.Table)
		}
		if r.Vacuum {
			a.vacuums++
		}
		if r.Analyze {
			a.analyzes++
		}
		if r.Error != "" {
			a.errors++
		}
		a.total += r.Seconds
		a.longest = max(a.longest, r.Seconds)
	}
	sort.Strings(names)
	t := Table{Title: "VACUUMS BY THE BENCH (standing in for autovacuum)",
		Columns: []string{"table", "vacuums", "analyzes", "errors", "total s", "longest s"}}
	for _, n := range names {
		a := per[n]
		t.Rows = append(t.Rows, []any{n, a.vacuums, a.analyzes, a.errors, math.Round(a.total*10) / 10, math.Round(a.longest*10) / 10})
	}
	return t
}
