package durablecli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/effectivelabs/durable/pgstore"
)

const migrateUsage = `Usage: {name} migrate <up|down|status|sql> [flags]

  up      apply pending migrations (all, or --steps N): durable's, then
          this program's own
  down    revert applied migrations (one, or --steps N): durable's, or
          with --revert app this program's own, newest first (--revert
          all: the program's, then durable's)
  status  list migrations and whether they are applied, durable's and
          this program's own
  sql     print the SQL of durable's migrations (--direction up|down),
          for users who run their own migration tool; needs no database

Migrations are safe to run from several processes at once: they take an
advisory lock, the program's own migrations too. They run in one
transaction: interrupted by SIGTERM or SIGINT, they roll back, and the
command exits with status 130. A failing migration of the program's own
is named as such ("application migration 003_create_payments up"), and
nothing of the command was applied.

Exit status: 0 done, 1 failed, 2 bad command line, 130 interrupted by a
signal (nothing half applied).

Flags:
`

func (c *cli) migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := c.flagSet("migrate", migrateUsage, stderr)
	db := c.dbFlags(fs)
	steps := fs.Int("steps", 0, "most migrations to apply or revert (default: all for up, 1 for down)")
	direction := fs.String("direction", "up", "for sql: up or down")
	revertFlag := fs.String("revert", "durable", "for down: the migrations to revert: durable (durable's own), app (this program's own) "+
		"or all (the program's, then durable's)")
	if code := subcommandHelp(fs, args, stderr); code >= 0 {
		return code
	}
	action := args[0]
	if code := c.parseFlags(fs, args[1:], stderr, 0); code >= 0 {
		return code
	}
	fail := func(err error) int {
		if ctx.Err() != nil {
			// Migrations run in one transaction: interrupted, it rolled
			// back (or, stopped in its COMMIT, applied in whole).
			fmt.Fprintf(stderr, "%s migrate %s: interrupted by a signal: the migrations run in one transaction, "+
				"so none was half applied (see migrate status): %v\n", c.name, action, err)
			return exitInterrupted
		}
		fmt.Fprintf(stderr, "%s migrate %s: %v\n", c.name, action, err)
		return 1
	}
	switch action {
	case "sql":
		dir, err := pgstore.ParseDirection(*direction)
		if err != nil {
			fmt.Fprintf(stderr, "%s migrate sql: %v\n", c.name, err)
			return exitUsage
		}
		sql, err := pgstore.MigrationSQL(db.Schema, dir)
		if err != nil {
			return fail(err)
		}
		fmt.Fprint(stdout, sql)
		return 0
	case "up", "down", "status":
	default:
		fmt.Fprintf(stderr, "%s migrate: unknown action %q\n\n", c.name, action)
		fs.SetOutput(stderr)
		fs.Usage()
		return exitUsage
	}
	if db.URL() == "" {
		fmt.Fprintf(stderr, "%s migrate %s: %s\n", c.name, action, missingURL)
		return exitUsage
	}
	revert, err := pgstore.ParseRevert(*revertFlag)
	if err != nil {
		fmt.Fprintf(stderr, "%s migrate %s: --revert: %v\n", c.name, action, err)
		return exitUsage
	}
	if revert != pgstore.RevertDurable && action != "down" {
		fmt.Fprintf(stderr, "%s migrate %s: --revert is for down\n", c.name, action)
		return exitUsage
	}
	pool, err := db.Open(ctx, 2)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()

	if action == "status" {
		states, err := pgstore.MigrationStatus(ctx, pool, db.Schema)
		if err != nil {
			return fail(err)
		}
		app, err := pgstore.AppMigrationStatus(ctx, pool, db.Schema, db.App)
		if err != nil {
			return fail(err)
		}
		printStates(stdout, states)
		if len(app) > 0 {
			fmt.Fprintf(stdout, "\nthis program's own migrations (table app_migrations):\n")
			printStates(stdout, app)
		}
		return 0
	}
	cfg := &pgstore.MigrateConfig{Schema: db.Schema, Direction: pgstore.Up, App: db.App}
	switch {
	case action == "down":
		cfg.Direction, cfg.Steps, cfg.Revert = pgstore.Down, 1, revert
		if *steps > 0 {
			cfg.Steps = *steps
		}
	case *steps > 0:
		cfg.Steps = *steps
	}
	res, err := pgstore.Migrate(ctx, pool, cfg)
	if err != nil {
		return fail(err)
	}
	if len(res.Versions) == 0 && len(res.App) == 0 {
		fmt.Fprintf(stdout, "schema %s: nothing to do\n", db.Schema)
		return 0
	}
	verb := map[pgstore.Direction]string{pgstore.Up: "applied", pgstore.Down: "reverted"}[res.Direction]
	own := func() {
		for _, v := range res.Versions {
			fmt.Fprintf(stdout, "schema %s: %s migration %03d\n", db.Schema, verb, v)
		}
	}
	if res.Direction == pgstore.Up {
		own()
	}
	for _, m := range res.App {
		fmt.Fprintf(stdout, "schema %s: %s application migration %03d_%s\n", db.Schema, verb, m.Version, m.Name)
	}
	if res.Direction == pgstore.Down {
		own()
	}
	return 0
}

// printStates prints a table of migrations and whether they are applied.
func printStates(w io.Writer, states []pgstore.MigrationState) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "VERSION\tNAME\tAPPLIED\n")
	for _, s := range states {
		applied := "no"
		if s.Applied {
			applied = s.AppliedAt.Local().Format(time.RFC3339)
		}
		if s.Undeclared {
			applied += " (not declared by this program)"
		}
		fmt.Fprintf(tw, "%03d\t%s\t%s\n", s.Version, s.Name, applied)
	}
	tw.Flush()
}
