package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/effectivelabs/durable/pgstore"
)

const migrateUsage = `Usage: durable migrate <up|down|status|sql> [flags]

  up      apply pending migrations (all, or --steps N)
  down    revert applied migrations (one, or --steps N)
  status  list migrations and whether they are applied
  sql     print the SQL of every migration (--direction up|down), for
          users who run their own migration tool; needs no database

Migrations are safe to run from several processes at once: they take an
advisory lock.

Flags:
`

func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	var db dbFlags
	db.register(fs, true)
	steps := fs.Int("steps", -1, "most migrations to apply or revert (default: all for up, 1 for down)")
	direction := fs.String("direction", "up", "for sql: up or down")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), migrateUsage)
		fs.PrintDefaults()
	}
	if code := subcommandHelp(fs, args, stderr); code >= 0 {
		return code
	}
	action := args[0]
	if code := parseFlags(fs, args[1:], stderr, 0); code >= 0 {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "durable migrate %s: %v\n", action, err)
		return 1
	}
	switch action {
	case "sql":
		dir, err := pgstore.ParseDirection(*direction)
		if err != nil {
			fmt.Fprintf(stderr, "durable migrate sql: %v\n", err)
			return exitUsage
		}
		sql, err := pgstore.MigrationSQL(db.schema, dir)
		if err != nil {
			return fail(err)
		}
		fmt.Fprint(stdout, sql)
		return 0
	case "up", "down", "status":
	default:
		fmt.Fprintf(stderr, "durable migrate: unknown action %q\n\n", action)
		fs.SetOutput(stderr)
		fs.Usage()
		return exitUsage
	}
	if db.url == "" {
		fmt.Fprintf(stderr, "durable migrate %s: --database-url (or $%s) is required\n", action, envDatabaseURL)
		return exitUsage
	}
	pool, err := db.open(ctx, 2)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()

	if action == "status" {
		states, err := pgstore.MigrationStatus(ctx, pool, db.schema)
		if err != nil {
			return fail(err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "VERSION\tNAME\tAPPLIED\n")
		for _, s := range states {
			applied := "no"
			if s.Applied {
				applied = s.AppliedAt.Local().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%03d\t%s\t%s\n", s.Version, s.Name, applied)
		}
		tw.Flush()
		return 0
	}
	cfg := &pgstore.MigrateConfig{Schema: db.schema, Direction: pgstore.Up}
	switch {
	case action == "down":
		cfg.Direction, cfg.Steps = pgstore.Down, 1
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
	if len(res.Versions) == 0 {
		fmt.Fprintf(stdout, "schema %s: nothing to do\n", db.schema)
		return 0
	}
	verb := map[pgstore.Direction]string{pgstore.Up: "applied", pgstore.Down: "reverted"}[res.Direction]
	for _, v := range res.Versions {
		fmt.Fprintf(stdout, "schema %s: %s migration %03d\n", db.schema, verb, v)
	}
	return 0
}
