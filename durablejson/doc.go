// Package durablejson defines the JSON documents that both of durable's
// operator tools print: the HTTP API (package httpapi) answers with them,
// and the CLI (package durablecli) prints the same ones with --json, so one
// definition serves both and the two cannot drift apart. Each document is
// a Go type with JSON tags and a function that builds it from what the
// engine returns.
//
// The documents: what each run status means (Statuses, GET
// /api/v1/statuses), the stats (Stats: GET /api/v1/stats, "durable stats
// --json"), the workers (Workers: GET /api/v1/workers, "durable workers
// --json") and a page of runs (RunList: GET /api/v1/runs, "durable runs
// list --json").
package durablejson
