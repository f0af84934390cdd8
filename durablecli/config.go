package durablecli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/pgstore"
)

// Config configures a program's command line. Only Workflows is needed:
// every other field has a documented default.
type Config struct {
	// Name is the program's name in usage texts and messages ("Usage:
	// NAME worker ..."). Defaults to the base name of os.Args[0].
	Name string

	// Workflows are the workflows the program serves ("worker"), starts
	// by name ("trigger", "schedules create" and the HTTP API of "serve")
	// and describes (the dashboard of "serve", the help texts, and
	// "workflows", which lists their versions even before a run records
	// them; "runs upgrade" can move runs to them). The child workflows
	// their steps start are registered with them. Defaults to none: the
	// operator commands (runs, stats, workflows, ...) work without any.
	Workflows []durable.Definition

	// DefaultInputs, each made by DefaultInput, give workflows an input
	// that "trigger" and "schedules create" use when --input is not
	// given; without one, --input is required. Defaults to none.
	DefaultInputs []Input

	// Flags, if set, lets the program add flags of its own to the
	// commands that register the workflows: it is called with the
	// command's name ("worker", "serve", "trigger" or "schedules create")
	// and flag set before the arguments are parsed. The Load it returns,
	// if not nil, builds the workflows from those flags once they are
	// parsed. The help texts list Workflows all the same: a program that
	// builds its workflows in Load gives them there too, built with the
	// flags' defaults (as cmd/durable does). Defaults to nil: no flags of
	// the program's own.
	Flags func(command string, fs *flag.FlagSet) Load

	// Engine, if set, adjusts the configuration of every engine the
	// commands create (a Codec, a TracerProvider, ...), after the flags
	// are applied: the worker's, and the clients that start and operate
	// runs. Defaults to nil: the flags' configuration as it is.
	Engine func(*durable.Config)

	// Migrations are the program's own schema migrations (its tables,
	// types, indexes), declared in Go or read from files with
	// pgstore.AppMigrationsFS. "migrate up", and every command that
	// migrates before it works ("worker" unless --no-migrate, "trigger"),
	// apply the pending ones after durable's, in version order, in
	// durable's migration transaction and under its advisory lock: workers
	// that start together apply each once. They are recorded in the table
	// app_migrations of durable's schema. "migrate status" lists them;
	// "migrate down --revert app" (or all) reverts them, newest first. An
	// invalid one (a version not positive or given twice, no Up, ...) is a
	// Config error. Defaults to none.
	Migrations []pgstore.AppMigration

	// Commands are commands of the program's own, listed in the help
	// after the standard ones, such as cmd/durable's demo and bench. A
	// name taken by a standard command is an error. Defaults to none.
	Commands []Command

	// Stdin is what a file flag given as "-" reads ("trigger --input-file
	// -", "trigger --jsonl -", "events send --payload-file -"). Defaults
	// to os.Stdin.
	Stdin io.Reader
}

// Load returns a command's workflows and their default inputs, built from
// the flags that Config.Flags added; they take the place of
// Config.Workflows and Config.DefaultInputs for the command. It runs once
// the flags are parsed and checked, before the command checks its
// connection. An error that wraps ErrUsage ends the command with exit
// status 2 (a bad flag), any other with status 1.
type Load func(ctx context.Context, db DB) ([]durable.Definition, []Input, error)

// DB is the database of a command, for Load.
type DB struct {
	// Pool is the command's connection pool. It connects on first use:
	// Load runs before the command checks that the database answers and
	// before the worker migrates the schema: the tables of
	// Config.Migrations may not exist yet when it runs.
	Pool *pgxpool.Pool
	// Schema is the schema holding durable's tables (--schema).
	Schema string
}

// ErrUsage marks the errors of Load that are a bad command line: the
// command prints the error and exits with status 2.
var ErrUsage = errors.New("usage")

// Command is a command of the program's own.
type Command struct {
	// Name selects the command: "NAME <command> [args]".
	Name string
	// Summary describes the command in one line of the help.
	Summary string
	// Run runs the command with the arguments after its name and returns
	// its exit status. ctx is cancelled by the first SIGINT or SIGTERM
	// (under Main). Its writers are Run's stdout and stderr.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// Input is a workflow's default input, made by DefaultInput.
type Input struct {
	workflow string
	// encode encodes the default input with the engine's codec.
	encode func(durable.Codec) ([]byte, error)
	// prepare decodes an encoded input into the workflow's input type and
	// returns what starts runs with it.
	prepare func(durable.Codec, []byte) (starter, error)
}

// DefaultInput gives the workflow wf the input in, for the runs that
// "trigger" and "schedules create" start without --input. Knowing wf's
// input type, the commands also decode a given --input into it before
// they connect: strictly with the default JSON codec (an unknown field or
// data after the value is a usage error), with the codec's Unmarshal
// otherwise. And "trigger --count N" starts the N runs in one
// transaction, where a workflow without a default input has its runs
// started one by one (Engine.StartByName).
func DefaultInput[I any](wf *durable.Workflow[I], in I) Input {
	return Input{
		workflow: wf.Name(),
		encode:   func(c durable.Codec) ([]byte, error) { return c.Marshal(in) },
		prepare: func(c durable.Codec, b []byte) (starter, error) {
			var v I
			if err := decodeInput(c, b, &v); err != nil {
				return nil, err
			}
			return func(ctx context.Context, e *durable.Engine, tenant string, count int, opts []durable.TriggerOption) ([]durable.Started, error) {
				ts := make([]durable.Trigger[I], count)
				for i := range ts {
					ts[i] = durable.Trigger[I]{Tenant: tenant, Input: v, Options: opts}
				}
				return wf.StartMany(ctx, e, ts)
			}, nil
		},
	}
}

// name returns the program's name.
func (cfg *Config) name() string {
	if cfg.Name != "" {
		return cfg.Name
	}
	if len(os.Args) > 0 && os.Args[0] != "" {
		return filepath.Base(os.Args[0])
	}
	return "durable"
}

// check reports the mistakes of a Config that no command line can fix.
func (cfg *Config) check() error {
	var errs []error
	seen := map[string]bool{}
	for _, c := range cfg.Commands {
		switch {
		case c.Name == "" || c.Run == nil:
			errs = append(errs, fmt.Errorf("command %q: a Name and a Run are required", c.Name))
		case standardCommands[c.Name] || isHelp(c.Name):
			errs = append(errs, fmt.Errorf("command %q: the name of a standard command", c.Name))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("command %q: given twice", c.Name))
		}
		seen[c.Name] = true
	}
	if err := pgstore.ValidateAppMigrations(cfg.Migrations); err != nil {
		errs = append(errs, fmt.Errorf("Migrations: %w", err))
	}
	for _, in := range cfg.DefaultInputs {
		if in.encode == nil {
			errs = append(errs, errors.New("an Input not made by DefaultInput"))
		}
	}
	return errors.Join(errs...)
}

// UsageErrorf formats an error for Load to return when a flag of the
// program's own is bad: its message is the formatted text, and it wraps
// ErrUsage, so that the command exits with status 2.
func UsageErrorf(format string, a ...any) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

type usageError struct{ err error }

func (e *usageError) Error() string   { return e.err.Error() }
func (e *usageError) Unwrap() []error { return []error{ErrUsage, e.err} }
