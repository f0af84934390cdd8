// Package durablejson defines the JSON documents that both of durable's
// operator tools print: the HTTP API (package httpapi) answers with them,
// and the CLI (package durablecli) prints the same ones with --json, so one
// definition serves both and the two cannot drift apart. Each document is
// a Go type with JSON tags and a function that builds it from what the
// engine returns.
//
// The documents: what each run status means (Statuses, GET
// /api/v1/statuses), the stats (Stats: GET /api/v1/stats, "durable stats
// --json"), the storage of the store's tables (Storage: GET
// /api/v1/storage, "durable stats --storage --json"), the workers (Workers: GET /api/v1/workers, "durable workers
// --json"), a page of runs (RunList: GET /api/v1/runs, "durable runs list
// --json"), a run with its steps (RunDetail: GET /api/v1/runs/{id} and
// the answers of cancel and replay, "durable runs show --json"), its event
// log (EventLog: GET /api/v1/runs/{id}/events, the "events" of "durable
// runs show --events --json"), the workflows with their versions
// (WorkflowList: GET /api/v1/workflows, "durable workflows --json"), an
// event sent (EventSent: POST /api/v1/events, "durable events send
// --json") and an upgrade (Upgrade: POST /api/v1/workflows/{name}/upgrade,
// "durable runs upgrade --json").
//
// Where the two tools had printed a document in different shapes, the
// more structured one was kept (a run's error is an object); where a field
// had two names, both stay (window and window_s).
package durablejson
