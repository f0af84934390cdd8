package durablecli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/cliflag"
	"github.com/effectivelabs/durable/pgstore"
)

// What the commands that read and operate runs share ("runs ...",
// "stats"): a connection checked against the schema, the flags that
// select runs, and the cursors of "runs list".

// operator is an engine that is never started (a client of the workers) on
// a schema that is checked, never migrated, with its pool.
type operator struct {
	e      *durable.Engine
	pool   *pgxpool.Pool
	schema string
}

// openOperator connects and checks that the schema is migrated, so that a
// wrong --schema is one clear error rather than a failed query.
func (c *cli) openOperator(ctx context.Context, db *cliflag.DB, name string, stderr io.Writer) (*operator, error) {
	pool, err := db.Open(ctx, 2)
	if err != nil {
		return nil, err
	}
	scfg, err := db.StoreConfig()
	var s *pgstore.Store
	if err == nil {
		s, err = pgstore.New(pool, scfg)
	}
	if err == nil {
		err = s.Check(ctx)
	}
	var e *durable.Engine
	if err == nil {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		e, err = durable.New(s, c.engineConfig(durable.Config{Logger: logger, WorkerID: "durable-" + name}))
	}
	if err != nil {
		pool.Close()
		return nil, c.explainSchemaError(err, db.Schema)
	}
	return &operator{e: e, pool: pool, schema: db.Schema}, nil
}

func (o *operator) close() { o.pool.Close() }

// now reads the database's clock: times given as durations ago and the
// ages stats prints are taken on the clock that stamps the runs, not on
// this machine's.
func (o *operator) now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := o.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("reading the database's clock: %w", err)
	}
	return now.UTC(), nil
}

// explainSchemaError says what to do about a schema without durable's
// tables; other errors are returned as they are.
func (c *cli) explainSchemaError(err error, schema string) error {
	var se *pgstore.SchemaError
	if errors.As(err, &se) && se.Have == 0 {
		return fmt.Errorf("schema %s has no durable tables (wrong --schema, or run \"%s migrate up\")", schema, c.name)
	}
	return err
}

// badFilter reports errors that come from the command line (an invalid
// filter or cursor) rather than from the database, for exit status 2.
func badFilter(err error) bool {
	return errors.Is(err, durable.ErrInvalidFilter) || errors.Is(err, durable.ErrInvalidCursor) ||
		errors.Is(err, errCursorMismatch) || invalidValue(err)
}

// filterFlags are the flags that select runs.
type filterFlags struct {
	status, workflow, version, tenant          string
	since, until, finishedSince, finishedUntil string
	topLevel                                   bool
	idempotencyKey, inputContains              string
}

const whenHelp = "an RFC 3339 time (2026-11-24T09:00:00Z) or a duration ago (24h, 90m)"

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.status, "status", "", "only runs in these statuses, comma-separated, any case: "+strings.Join(durablejson.StatusWords(), ", ")+
		" (in_flight: every run not settled; settled; unsuccessful: failed or cancelled)")
	fs.StringVar(&f.workflow, "workflow", "", "only runs of this workflow")
	fs.StringVar(&f.version, "version", "", "only runs pinned to this version of their workflow (the command workflows lists them)")
	fs.StringVar(&f.tenant, "tenant", "", "only runs of this tenant")
	fs.StringVar(&f.since, "since", "", "only runs created at or after this time: "+whenHelp)
	fs.StringVar(&f.until, "until", "", "only runs created before this time (same forms as --since)")
	fs.StringVar(&f.finishedSince, "finished-since", "", "only runs that settled at or after this time (same forms as --since)")
	fs.StringVar(&f.finishedUntil, "finished-until", "", "only runs that settled before this time (same forms as --since)")
	fs.BoolVar(&f.topLevel, "top-level", false, "only top-level runs: leave out child runs (runs a step of another run started)")
	fs.StringVar(&f.idempotencyKey, "idempotency-key", "", "only runs triggered with this idempotency key, exactly (indexed: fast however many runs are kept)")
	fs.StringVar(&f.inputContains, "input-contains", "", `only runs whose JSON input contains this JSON value, as jsonb @> says: '{"customer":"c-42"}' (not indexed: pair it with --workflow, --tenant or --since on large stores)`)
}

// runFilter is a filter from the command line whose times given as
// durations ago are not resolved yet.
type runFilter struct {
	// filter holds the statuses, workflow, tenant and absolute times.
	filter durable.RunFilter
	// rel are the times given as durations ago.
	rel []relTime
	// given is set when any filter flag was given.
	given bool
}

// relTime is a time flag given as a duration ago.
type relTime struct {
	flag string // "since", "until", "finished-since" or "finished-until"
	spec string // as given, e.g. "24h"
	ago  time.Duration
}

// parse checks the flags; its errors are usage errors.
func (f *filterFlags) parse() (*runFilter, error) {
	out := &runFilter{}
	if f.status != "" {
		sts, err := parseStatuses(f.status)
		if err != nil {
			return nil, err
		}
		out.filter.Statuses = sts
		out.given = true
	}
	if err := checkValues(opt(dag.NameRule, "--workflow", f.workflow), opt(dag.VersionRule, "--version", f.version),
		opt(dag.TenantRule, "--tenant", f.tenant)); err != nil {
		return nil, err
	}
	out.filter.Workflow, out.filter.Version, out.filter.Tenant = f.workflow, f.version, f.tenant
	out.filter.TopLevel = f.topLevel
	out.given = out.given || f.workflow != "" || f.version != "" || f.tenant != "" || f.topLevel
	if f.idempotencyKey != "" {
		if err := checkValues(req(dag.IdempotencyKeyRule, "--idempotency-key", f.idempotencyKey)); err != nil {
			return nil, err
		}
		out.filter.IdempotencyKey, out.given = f.idempotencyKey, true
	}
	if f.inputContains != "" {
		if err := dag.CheckJSONFilter([]byte(f.inputContains)); err != nil {
			return nil, fmt.Errorf("--input-contains: %w", err)
		}
		out.filter.InputContains, out.given = json.RawMessage(f.inputContains), true
	}
	for _, tf := range []struct{ flag, spec string }{
		{"since", f.since}, {"until", f.until}, {"finished-since", f.finishedSince}, {"finished-until", f.finishedUntil},
	} {
		if tf.spec == "" {
			continue
		}
		out.given = true
		at, ago, err := parseWhen(tf.flag, tf.spec)
		if err != nil {
			return nil, err
		}
		if at.IsZero() {
			out.rel = append(out.rel, relTime{flag: tf.flag, spec: tf.spec, ago: ago})
		} else {
			setTime(&out.filter, tf.flag, at)
		}
	}
	return out, nil
}

// parseStatuses parses a comma-separated list of run statuses, in any
// case, or of status groups (in_flight, ...): durablejson.ParseStatuses,
// as the API's status filter.
func parseStatuses(s string) ([]durabletype.RunStatus, error) {
	out, err := durablejson.ParseStatuses(s)
	if err != nil {
		return nil, fmt.Errorf("--status %q: %w", s, err)
	}
	return out, nil
}

// parseWhen parses a time flag: an RFC 3339 time (returned in UTC), or a
// duration meaning that long ago (returned with a zero time).
func parseWhen(flag, s string) (time.Time, time.Duration, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC(), 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("--%s %q: want %s", flag, s, whenHelp)
	}
	if d < 0 {
		return time.Time{}, 0, fmt.Errorf("--%s %q: a duration means that long ago and must not be negative", flag, s)
	}
	return time.Time{}, d, nil
}

func setTime(f *durable.RunFilter, flag string, t time.Time) {
	switch flag {
	case "since":
		f.CreatedAfter = t
	case "until":
		f.CreatedBefore = t
	case "finished-since":
		f.FinishedAfter = t
	case "finished-until":
		f.FinishedBefore = t
	}
}

// errCursorMismatch: a --cursor given with other filter flags than the
// listing it continues.
var errCursorMismatch = errors.New("--cursor continues another listing: give it with the filter flags of the listing that printed it")

// resolve returns the filter with its relative times taken on the
// database's clock, or, when continuing a listing, at the times its cursor
// recorded; and the times it used, for the next cursor.
func (f *runFilter) resolve(ctx context.Context, op *operator, cur *listCursor) (durable.RunFilter, map[string]resolvedTime, error) {
	out := f.filter
	times := map[string]resolvedTime{}
	var now time.Time
	for _, r := range f.rel {
		var at time.Time
		if cur != nil {
			t, ok := cur.times[r.flag]
			if !ok || t.Spec != r.spec {
				return out, nil, errCursorMismatch
			}
			at = t.At
		} else {
			if now.IsZero() {
				var err error
				if now, err = op.now(ctx); err != nil {
					return out, nil, err
				}
			}
			// PostgreSQL keeps microseconds: a time with more would not
			// survive the cursor's round trip.
			at = now.Add(-r.ago).Truncate(time.Microsecond)
		}
		setTime(&out, r.flag, at)
		times[r.flag] = resolvedTime{Spec: r.spec, At: at}
	}
	if cur != nil && len(cur.times) != len(times) {
		return out, nil, errCursorMismatch
	}
	for _, rng := range []struct {
		from, to      string
		after, before time.Time
	}{
		{"since", "until", out.CreatedAfter, out.CreatedBefore},
		{"finished-since", "finished-until", out.FinishedAfter, out.FinishedBefore},
	} {
		if !rng.after.IsZero() && !rng.before.IsZero() && rng.before.Before(rng.after) {
			return out, nil, fmt.Errorf("%w: --%s (%s) is before --%s (%s)", durable.ErrInvalidFilter,
				rng.to, rng.before.Format(time.RFC3339), rng.from, rng.after.Format(time.RFC3339))
		}
	}
	return out, times, nil
}

// listCursor is what "runs list --cursor" takes: the engine's cursor and,
// when the listing had times given as durations ago, the times they were
// resolved to, so that repeating "--since 24h" with the cursor continues
// the same listing rather than one shifted by the time between the pages.
// It prints as the engine's cursor, followed by "." and the times in
// base64url-encoded JSON when there are any.
type listCursor struct {
	engine string
	times  map[string]resolvedTime // by flag name
}

type resolvedTime struct {
	Spec string    `json:"s"`
	At   time.Time `json:"t"`
}

func (c *listCursor) String() string {
	if len(c.times) == 0 {
		return c.engine
	}
	js, _ := json.Marshal(c.times) // plain data: cannot fail
	return c.engine + "." + base64.RawURLEncoding.EncodeToString(js)
}

func parseListCursor(s, prog string) (*listCursor, error) {
	engine, times, ok := strings.Cut(s, ".")
	c := &listCursor{engine: engine}
	if !ok {
		return c, nil
	}
	js, err := base64.RawURLEncoding.DecodeString(times)
	if err == nil {
		err = json.Unmarshal(js, &c.times)
	}
	if err != nil || engine == "" {
		return nil, fmt.Errorf("%w: not a cursor printed by \"%s runs list\"", durable.ErrInvalidCursor, prog)
	}
	return c, nil
}

// shellQuote quotes s for a POSIX shell, when needed.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// plural returns "1 run" or "n runs".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
