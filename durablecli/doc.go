// Package durablecli is durable's command line as a library: a program
// that calls Main with its own workflows becomes their worker, their HTTP
// API and dashboard, and the operator tool for their runs, with the
// commands, flags and exit statuses of cmd/durable:
//
//	func main() {
//		durablecli.Main(durablecli.Config{
//			Workflows: []durable.Definition{signup},
//		})
//	}
//
// gives the binary these commands (run "NAME help" and "NAME <command>
// -h" for their flags; docs/cli.md describes them):
//
//   - migrate up|down|status|sql: the PostgreSQL schema, durable's
//     migrations and the program's own (Config.Migrations, applied once
//     under durable's migration lock).
//   - worker: serves the workflows until SIGTERM or SIGINT, then drains
//     (--drain-timeout); a second signal during the drain exits at once.
//     --retention, --metrics-addr, --no-migrate, --log-format, ...
//   - serve: the HTTP API and the dashboard (--token, --tenant, ...).
//   - trigger: starts runs of a workflow by name (--workflow, --input),
//     optionally waits for them (--wait).
//   - runs list|show|cancel|replay|upgrade|prune, stats, workers:
//     operate runs; runs upgrade moves runs to another version of their
//     workflow.
//   - workflows: the versions of each workflow (registered here, recorded
//     by runs, served by live workers), their runs in flight and the
//     unserved ones.
//   - events send, signal: end the waits of steps.
//   - schedules create|list|pause|resume|delete: cron schedules.
//   - version, help; and the program's own Config.Commands.
//
// Every command that talks to PostgreSQL takes --database-url (default
// $DURABLE_DATABASE_URL) and --schema (default $DURABLE_SCHEMA, else
// "durable"); serve takes --token (default $DURABLE_API_TOKEN). Neither
// the help, nor the errors, nor the logs show the URL's password or the
// token.
//
// Exit statuses: 0 done (a worker or a server stopped by SIGTERM or
// SIGINT at any moment, its start included), 1 failed (could not connect,
// a run not found or not completed, ...), 2 bad command line (an unknown
// command, flag, workflow or version, an input that does not decode into
// the workflow's input type, or a name or text that breaks the rule of its
// kind), 130 a worker stopped by a second signal during its drain, or a
// migrate interrupted by a signal (its transaction rolled back).
//
// Starting by name: "trigger --workflow W --input JSON", "schedules
// create" and the HTTP API's POST /api/v1/workflows/W/runs start any of
// Config.Workflows (and the child workflows their steps start). The input
// is decoded into the workflow's input type by the engine's codec; a
// workflow given a DefaultInput may be triggered without --input, and its
// --input is checked strictly before connecting. A workflow the program
// does not serve is a usage error that lists those it does.
package durablecli
