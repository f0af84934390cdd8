// Command durable is the command-line companion of the durable library: a
// demo, and (with PostgreSQL) migrations, workers, an HTTP API, triggers,
// operating runs (list, show, cancel, replay, prune, stats), listing the live
// workers, sending events and signals to the steps waiting for them, and
// benchmarks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `durable runs durable DAG workflows on PostgreSQL (or in memory).

Usage:
  durable <command> [flags]

Commands:
  demo      run the order-processing demo workflow and watch it
  migrate   create or update the PostgreSQL schema (up, down, status, sql)
  worker    serve the built-in workflows until SIGTERM, then drain
  serve     serve the HTTP API (runs, triggers, events, signals, stats)
  bench     measure throughput, latency, fairness and idle cost on PostgreSQL
  trigger   start runs of a built-in workflow, optionally wait for them
  runs      operate runs: list (filter by status, workflow, tenant, time,
            parent run), show RUN_ID (input, steps, what they wait for,
            parent and child runs, outputs, events), cancel and replay
            (by ID or by filter), prune (delete old settled runs)
  events    send an event to the steps of a tenant's runs waiting for its
            key (events send)
  signal    send a signal to the steps of a run waiting for it
  stats     queue depths and run counts by workflow and tenant
  workers   the live workers (host, version, workflows, steps in flight,
            leader) and the queued workflows no live worker serves
  schedules cron schedules of built-in workflows: create, list, pause,
            resume, delete
  version   print this binary's version, VCS revision and Go version
  help      show this help

Run "durable <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// exitUsage is the exit code for bad command lines.
const exitUsage = 2

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) int{
		"demo":      demoCmd,
		"migrate":   migrateCmd,
		"worker":    workerCmd,
		"serve":     serveCmd,
		"bench":     benchCmd,
		"trigger":   triggerCmd,
		"runs":      runsCmd,
		"events":    eventsCmd,
		"signal":    signalCmd,
		"stats":     statsCmd,
		"workers":   workersCmd,
		"schedules": schedulesCmd,
		"version":   versionCmd,
	}
	switch name := args[0]; name {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		cmd, ok := cmds[name]
		if !ok {
			fmt.Fprintf(stderr, "durable: unknown command %q\n\n%s", name, usage)
			return exitUsage
		}
		return cmd(ctx, args[1:], stdout, stderr)
	}
}

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
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, maxArgs int) int {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() > maxArgs {
		fmt.Fprintf(stderr, "durable %s: unexpected argument %q\n", fs.Name(), fs.Arg(maxArgs))
		fs.Usage()
		return exitUsage
	}
	return -1
}
