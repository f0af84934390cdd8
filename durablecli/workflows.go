package durablecli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/pgstore"
)

// The workflows of a command: Config.Workflows, or those Config.Flags'
// Load builds, registered on the command's engine; and how "trigger" and
// "schedules create" start them by name.

// starter starts count runs of one workflow with an input already checked.
type starter func(ctx context.Context, e *durable.Engine, tenant string, count int, opts []durable.TriggerOption) ([]durable.Started, error)

// workflowFlags is the hook of Config.Flags for one command.
type workflowFlags struct {
	load Load
}

// workflowFlags lets the program add its flags to the command's flag set.
func (c *cli) workflowFlags(command string, fs *flag.FlagSet) *workflowFlags {
	w := &workflowFlags{}
	if c.cfg.Flags != nil {
		w.load = c.cfg.Flags(command, fs)
	}
	return w
}

// workflows are the workflows of a command and their default inputs.
type workflows struct {
	defs   []durable.Definition
	inputs map[string]Input
	codec  durable.Codec
	// unknownFields lets inputs hold fields their type does not have
	// (trigger --allow-unknown-fields): a default input's workflow is then
	// started by name, as the others, with durable.WithUnknownFields.
	unknownFields bool
}

// loadErr is an error of Load; usage says whether it is a bad flag.
type loadErr struct {
	err   error
	usage bool
}

// workflows returns the command's workflows, from Load if the program
// gave one.
func (c *cli) workflows(ctx context.Context, w *workflowFlags, pool *pgxpool.Pool, schema string) (*workflows, *loadErr) {
	defs, inputs := c.cfg.Workflows, c.cfg.DefaultInputs
	if w != nil && w.load != nil {
		var err error
		defs, inputs, err = w.load(ctx, DB{Pool: pool, Schema: schema})
		if err != nil {
			return nil, &loadErr{err: c.redact.Error(err), usage: errors.Is(err, ErrUsage)}
		}
	}
	out := &workflows{defs: defs, inputs: map[string]Input{}, codec: c.engineConfig(durable.Config{}).Codec}
	if out.codec == nil {
		out.codec = durable.JSONCodec{}
	}
	names := map[string]bool{}
	for _, n := range workflowNames(defs) {
		names[n] = true
	}
	for _, in := range inputs {
		switch {
		case in.encode == nil:
			return nil, &loadErr{err: errors.New("an Input not made by DefaultInput")}
		case !names[in.workflow]:
			return nil, &loadErr{err: fmt.Errorf("a default input for %s, which is not among the workflows", dag.Quote(in.workflow))}
		}
		out.inputs[in.workflow] = in
	}
	return out, nil
}

func (le *loadErr) Error() string { return le.err.Error() }

// report prints a Load error and returns the exit status.
func (le *loadErr) report(stderr io.Writer, prefix string) int {
	fmt.Fprintf(stderr, "%s: %v\n", prefix, le.err)
	if le.usage {
		return exitUsage
	}
	return 1
}

// engineConfig applies Config.Engine to cfg.
func (c *cli) engineConfig(cfg durable.Config) durable.Config {
	if c.cfg.Engine != nil {
		c.cfg.Engine(&cfg)
	}
	return cfg
}

// workflowNames returns the names of defs, in order.
func workflowNames(defs []durable.Definition) []string {
	var names []string
	for _, d := range defs {
		// Several versions of a workflow may be given, side by side.
		if n, ok := d.(interface{ Name() string }); ok && !slices.Contains(names, n.Name()) {
			names = append(names, n.Name())
		}
	}
	return names
}

// names returns the names of the workflows given, in order: those the
// program lists as the ones it starts (it can start the child workflows
// their steps start too).
func (w *workflows) names() []string { return workflowNames(w.defs) }

// registered reports whether e has the workflow name.
func registered(e *durable.Engine, name string) bool {
	for _, wf := range e.Workflows() {
		if wf.Name == name {
			return true
		}
	}
	return false
}

// unknownWorkflow says that a program cannot start the workflow name, and
// which workflows it can start.
func (w *workflows) unknownWorkflow(name string) string {
	names := w.names()
	if len(names) == 0 {
		return fmt.Sprintf("unknown workflow %s: this program serves no workflow", dag.Quote(name))
	}
	return fmt.Sprintf("unknown workflow %s: this program can start %s", dag.Quote(name), strings.Join(names, ", "))
}

// input returns the encoded input of a run of the workflow name: --input
// as given, or the workflow's default input; and, for a workflow with a
// default input, the starter that starts runs with it. Its errors are
// usage errors: the input does not decode into the workflow's input type,
// or none was given and the workflow has no default.
func (w *workflows) input(name, input string, given bool) ([]byte, starter, error) {
	in, typed := w.inputs[name]
	var b []byte
	switch {
	case given:
		b = []byte(input)
	case typed:
		var err error
		if b, err = in.encode(w.codec); err != nil {
			return nil, nil, fmt.Errorf("encoding the default input of %s: %w", name, err)
		}
	default:
		return nil, nil, fmt.Errorf("--input is required: workflow %s has no default input", name)
	}
	if typed && !w.unknownFields {
		start, err := in.prepare(w.codec, b)
		if err != nil {
			return nil, nil, fmt.Errorf("--input for %s: %w", name, err)
		}
		return b, start, nil
	}
	if isJSON(w.codec) {
		// The engine decodes it when starting; a value that is not JSON
		// is refused before connecting.
		if err := decodeStrict(b, new(json.RawMessage)); err != nil {
			return nil, nil, fmt.Errorf("--input for %s: %w", name, err)
		}
	}
	return b, nil, nil
}

// byName is the starter of a workflow without a default input: the
// engine decodes the input into the workflow's type, and starts the runs
// one by one.
func byName(name string, input []byte) starter {
	return func(ctx context.Context, e *durable.Engine, tenant string, count int, opts []durable.TriggerOption) ([]durable.Started, error) {
		out := make([]durable.Started, 0, count)
		for range count {
			st, err := e.StartByName(ctx, name, tenant, input, opts...)
			if err != nil {
				return out, err
			}
			out = append(out, st)
		}
		return out, nil
	}
}

// isJSON reports whether codec is the engine's default JSON codec.
func isJSON(codec durable.Codec) bool {
	switch codec.(type) {
	case durable.JSONCodec, *durable.JSONCodec:
		return true
	}
	return false
}

// decodeInput decodes b into v: strictly with the JSON codec (see
// decodeStrict), with the codec's Unmarshal otherwise.
func decodeInput(codec durable.Codec, b []byte, v any) error {
	if codec == nil || isJSON(codec) {
		return decodeStrict(b, v)
	}
	return codec.Unmarshal(b, v)
}

// decodeStrict decodes one JSON value into v, rejecting unknown fields and
// trailing data, so that a typo in a field name is an error rather than a
// zero value.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("invalid JSON: unexpected data after the value")
	}
	return nil
}

// client returns an engine on the schema, with the workflows registered,
// that is never started: a client of the workers, which starts and
// operates runs. It logs warnings and errors to stderr.
func (c *cli) client(pool *pgxpool.Pool, schema string, set *workflows, name string, stderr io.Writer) (*durable.Engine, error) {
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	if err != nil {
		return nil, err
	}
	var h slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	if name == "trigger" {
		h = dropMessage{Handler: h, msg: startWarningLog} // the command prints it (warnStale)
	}
	e, err := durable.New(s, c.engineConfig(durable.Config{Logger: slog.New(h), WorkerID: "durable-" + name}))
	if err != nil {
		return nil, err
	}
	if err := e.Register(set.defs...); err != nil {
		return nil, err
	}
	return e, nil
}

// workflowList returns the names of Config.Workflows after sep, or "" when
// there are none, for flag help texts.
func (c *cli) workflowList(sep string) string {
	names := workflowNames(c.cfg.Workflows)
	if len(names) == 0 {
		return ""
	}
	return sep + strings.Join(names, ", ")
}

// withWorkflows adds to a command's usage text, before its flags, the
// workflows of the program and, with inputs set, which have a default
// input.
func (c *cli) withWorkflows(usage string, inputs bool) string {
	names := workflowNames(c.cfg.Workflows)
	text := "Workflows: none (this program serves no workflow)."
	if len(names) > 0 {
		text = "Workflows: " + strings.Join(names, ", ") + "."
	}
	if len(names) > 0 && inputs {
		var withInput []string
		for _, in := range c.cfg.DefaultInputs {
			withInput = append(withInput, in.workflow)
		}
		switch len(withInput) {
		case 0:
			text += " None has a default input: --input is required."
		case len(names):
			text += " Each has a default input."
		default:
			text += " With a default input: " + strings.Join(withInput, ", ") + "."
		}
	}
	para := wrap("", text, 76, "") + "\n\n"
	if i := strings.LastIndex(usage, "Flags:\n"); i >= 0 {
		return usage[:i] + para + usage[i:]
	}
	return usage + "\n" + para
}
