package durablecli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/effectivelabs/durable/internal/tools/cliflag"
)

// Exit statuses of the commands.
const (
	// exitUsage is the exit status of bad command lines.
	exitUsage = 2
	// exitRefused is the exit status of "events send" and "signal" when
	// waiting steps refused the payload (it was sent all the same).
	exitRefused = 3
	// exitUndelivered is the exit status of "events send
	// --require-delivery" when no step was waiting for the event (it was
	// sent, and kept for lookback, all the same).
	exitUndelivered = 4
	// exitSecondSignal is the exit status of a worker stopped by a second
	// signal during its drain: 128 + SIGINT, as shells report an
	// interrupt.
	exitSecondSignal = 130
	// exitInterrupted is the exit status of a one-shot command (migrate)
	// that a signal stopped before it finished, having changed nothing.
	exitInterrupted = 130
)

// Main runs the command line of os.Args with cfg and exits with its
// status. The first SIGINT or SIGTERM cancels the command's context (the
// worker then drains); during the worker's drain a second one exits at
// once with status 130.
func Main(cfg Config) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, cfg, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run runs the command line args (without the program's name) with cfg,
// writing to stdout and stderr, and returns the exit status: 0 done, 1
// failed, 2 bad command line (usage), 130 a worker stopped by a second
// signal during its drain. Cancelling ctx stops a worker or a server as
// SIGTERM does under Main.
func Run(ctx context.Context, cfg Config, args []string, stdout, stderr io.Writer) int {
	c := newCLI(cfg, stdout, stderr)
	if err := cfg.check(); err != nil {
		fmt.Fprintf(c.stderr, "%s: invalid durablecli.Config: %v\n", c.name, err)
		return 1
	}
	if len(args) == 0 {
		fmt.Fprint(c.stderr, c.usage())
		return exitUsage
	}
	name := args[0]
	if isHelp(name) {
		fmt.Fprint(c.stdout, c.usage())
		return 0
	}
	if cmd, ok := c.commands()[name]; ok {
		return cmd(ctx, args[1:], c.stdout, c.stderr)
	}
	for _, cmd := range cfg.Commands {
		if cmd.Name == name {
			return cmd.Run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintln(c.stderr, c.unknownCommand(name))
	return exitUsage
}

// unknownCommand says that name is no command of the program, on one
// line, with the closest command's name when one is close (a typo).
func (c *cli) unknownCommand(name string) string {
	names := []string{"help"}
	for n := range standardCommands {
		names = append(names, n)
	}
	for _, cmd := range c.cfg.Commands {
		names = append(names, cmd.Name)
	}
	msg := fmt.Sprintf("%s: unknown command %q; see '%s help'", c.name, name, c.name)
	if near := closest(name, names); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return msg
}

// closest returns the name of names nearest to s, if it is at most two
// edits away (an insertion, a deletion, a substitution or a swap of two
// neighbours each) and shorter than s is long; "" otherwise. Ties go to
// the name first in sort order.
func closest(s string, names []string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(s), n); d < bestD && d < len([]rune(s)) {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// the fewest insertions, deletions, substitutions and swaps of two
// neighbouring runes that turn a into b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range rb {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// cli is one run of the command line.
type cli struct {
	cfg    Config
	name   string
	stdout io.Writer
	// stderr replaces the secrets of the flags (the database URL's
	// password, the API token) wherever they would appear.
	stderr io.Writer
	redact *cliflag.Redactor
}

func newCLI(cfg Config, stdout, stderr io.Writer) *cli {
	r := &cliflag.Redactor{}
	return &cli{cfg: cfg, name: cfg.name(), stdout: stdout, stderr: r.Writer(stderr), redact: r}
}

// command runs a standard command.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// standardCommands are the names of the commands every program has.
var standardCommands = map[string]bool{
	"migrate": true, "worker": true, "serve": true, "trigger": true, "runs": true, "events": true,
	"signal": true, "stats": true, "workers": true, "workflows": true, "schedules": true, "version": true,
}

func (c *cli) commands() map[string]command {
	return map[string]command{
		"migrate":   c.migrateCmd,
		"worker":    c.workerCmd,
		"serve":     c.serveCmd,
		"trigger":   c.triggerCmd,
		"runs":      c.runsCmd,
		"events":    c.eventsCmd,
		"signal":    c.signalCmd,
		"stats":     c.statsCmd,
		"workers":   c.workersCmd,
		"workflows": c.workflowsCmd,
		"schedules": c.schedulesCmd,
		"version":   c.versionCmd,
	}
}

func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

const usageHead = `{name} runs durable DAG workflows on PostgreSQL.

Usage:
  {name} <command> [flags]

Commands:
  migrate   create or update the PostgreSQL schema, durable's and the
            program's own migrations (up, down, status, sql)
  worker    serve the workflows until SIGTERM, then drain
  serve     serve the HTTP API (runs, triggers, events, signals, stats)
            and the web dashboard
  trigger   start runs of a workflow, optionally wait for them
  runs      operate runs: list (filter by status, workflow, version,
            tenant, time, parent run), show RUN_ID (input, steps, what
            they wait for, parent and child runs, outputs, events), cancel
            and replay (by ID or by filter), upgrade (move runs to another
            version of their workflow), prune (delete old settled runs)
  events    send an event to the steps of a tenant's runs waiting for its
            key (events send)
  signal    send a signal to the steps of a run waiting for it
  stats     queue depths and run counts by workflow, version and tenant;
            --storage: the tables' dead rows and sizes, and what needs a
            VACUUM
  workers   the live workers (host, version, the workflow versions they
            serve, steps in flight, leader) and the queued versions no
            live worker serves
  workflows the versions of each workflow: which this program registers,
            runs in flight, ready steps, the live workers serving them,
            UNSERVED ones; --steps prints their DAGs
  schedules cron schedules of the workflows: create, list, pause,
            resume, delete
  version   print this binary's version, VCS revision and Go version
`

// usage is the program's help.
func (c *cli) usage() string {
	var b strings.Builder
	b.WriteString(c.text(usageHead))
	for _, cmd := range c.cfg.Commands {
		b.WriteString(wrap(fmt.Sprintf("  %-9s ", cmd.Name), cmd.Summary, 76, strings.Repeat(" ", 12)) + "\n")
	}
	b.WriteString("  help      show this help\n\n")
	names := workflowNames(c.cfg.Workflows)
	if len(names) == 0 {
		b.WriteString("Workflows: none (this program serves no workflow)\n\n")
	} else {
		b.WriteString(wrap("Workflows: ", strings.Join(names, ", "), 76, "  ") + "\n\n")
	}
	b.WriteString(c.text(`Run "{name} <command> -h" for a command's flags.` + "\n"))
	return b.String()
}

// text puts the program's name in a usage text.
func (c *cli) text(s string) string { return strings.ReplaceAll(s, "{name}", c.name) }

// wrap writes prefix and s, broken into lines of at most width bytes at
// spaces (a longer word keeps its line), the lines after the first
// indented.
func wrap(prefix, s string, width int, indent string) string {
	var b strings.Builder
	b.WriteString(prefix)
	line := len(prefix)
	for i, word := range strings.Fields(s) {
		switch {
		case i == 0:
		case line+1+len(word) > width:
			b.WriteString("\n" + indent)
			line = len(indent)
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}

// flagSet returns a flag set for a command, writing to stderr, whose help
// is usage (with the program's name) followed by the flags.
func (c *cli) flagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), c.text(usage))
		fs.PrintDefaults()
	}
	return fs
}

// dbFlags registers --database-url and --schema on fs; the URL's password
// is then kept out of stderr.
func (c *cli) dbFlags(fs *flag.FlagSet) *cliflag.DB {
	db := &cliflag.DB{Redactor: c.redact, App: c.cfg.Migrations}
	db.Register(fs, false)
	return db
}

// missingURL is the usage error of a command without a database URL.
const missingURL = "--database-url (or $" + cliflag.EnvDatabaseURL + ") is required"

// subcommandHelp handles a command with actions ("migrate up")
// called with no action or with -h: it prints the usage and returns the exit
// code, or -1 when args start with an action.
func subcommandHelp(fs *flag.FlagSet, args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] != "-h" && args[0] != "--help" && args[0] != "-help" {
		return -1
	}
	fs.SetOutput(stderr)
	fs.Usage()
	if len(args) == 0 {
		return exitUsage
	}
	return 0
}

// parseFlags parses a command's flags; it returns -1 to continue, or the
// exit code (0 for -h, 2 for bad flags or stray arguments).
func (c *cli) parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, maxArgs int) int {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() > maxArgs {
		fmt.Fprintf(stderr, "%s %s: unexpected argument %q\n", c.name, fs.Name(), fs.Arg(maxArgs))
		fs.Usage()
		return exitUsage
	}
	return -1
}
