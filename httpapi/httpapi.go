// Package httpapi serves durable's operator and trigger API over HTTP: a
// JSON API under /api/v1/ (runs, their steps and events, cancel, replay,
// signals, events, triggering a registered workflow by name, the workflows
// known here with their versions and DAGs, moving runs between versions,
// stats, the storage of the store's tables, the live workers, what each run status means), /healthz and /readyz, and optionally a web dashboard
// at / (Options.Dashboard). Mount the *Handler that New returns in your own
// server, or run "durable serve".
//
// Errors are RFC 9457 problem details (application/problem+json). Every
// request but /healthz and /readyz passes Options.Authenticate, and every
// read and action is scoped to the tenant Options.Tenant allows: another
// tenant's run is not found (404), never forbidden, so that its existence
// does not leak. The API needs the engine's default Codec (JSON): inputs,
// outputs and payloads travel as JSON.
package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// DefaultMaxBodyBytes is the default of Options.MaxBodyBytes: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// DefaultMaxValueBytes is the Options.MaxValueBytes of zero Options: 64
// KiB.
const DefaultMaxValueBytes = 64 << 10

// Options configure a Handler.
type Options struct {
	// Authenticate, when set, is called for every request but /healthz and
	// /readyz before anything else; an error answers 401 Unauthorized
	// (its message is not shown to the client). See BearerToken. Without
	// it every request is let through: put the handler behind your own
	// authentication, or set it.
	Authenticate func(r *http.Request) error
	// Tenant, when set, says which tenant an authenticated request may see
	// and act on: tenant, or every tenant when all is set. An error
	// answers 403 Forbidden. Runs of other tenants are not found (404);
	// triggering a run or sending an event for another tenant is refused
	// with 403, and a request that names no tenant acts for the allowed
	// one. Without Tenant every request sees every tenant (an operator's
	// view).
	Tenant func(r *http.Request) (tenant string, all bool, err error)
	// MaxBodyBytes bounds request bodies; larger ones answer 413. Defaults
	// to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxValueBytes bounds each input and output a run's answer (GET
	// /api/v1/runs/{id}, and the answers of cancel and replay) shows: a
	// larger one is left out, its size in bytes said instead
	// (input_omitted, output_omitted), unless the request asks for
	// ?full=true. Defaults to DefaultMaxValueBytes.
	MaxValueBytes int
	// Logger receives the errors answered with 500. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Dashboard serves the web dashboard at / (its assets under /ui/): the
	// runs with filters, a run's DAG, attempts and events, cancel and
	// replay, the workflows with their versions, the workers, the
	// queues and the storage of the store's tables. It calls this API
	// from the browser, so it sees what the API lets the browser's
	// requests see; it asks for a bearer token when the API answers 401.
	Dashboard bool
}

// Handler is the HTTP API of one engine. It is an http.Handler.
type Handler struct {
	e    *durable.Engine
	opts Options
	mux  *http.ServeMux
	top  http.Handler
	// routes are the API's routes, for the OpenAPI check and the 405
	// answers.
	routes []route
}

// route is one method and path pattern of the API.
type route struct {
	method, pattern string
	public          bool // no authentication (probes)
	h               func(w http.ResponseWriter, r *http.Request, sc scope) error
}

// New returns the API of engine e. The engine need not be started: an
// engine that only triggers and operates runs (a client of the workers)
// serves the whole API; register the workflows that may be triggered by
// name (the others the store or the live workers know are listed and
// drawn all the same, from the DAGs their runs recorded).
func New(e *durable.Engine, opts Options) *Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxValueBytes <= 0 {
		opts.MaxValueBytes = DefaultMaxValueBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Handler{e: e, opts: opts, mux: http.NewServeMux()}
	// Adding an endpoint is one line here and one method.
	h.routes = []route{
		{method: "GET", pattern: "/healthz", public: true, h: h.healthz},
		{method: "GET", pattern: "/readyz", public: true, h: h.readyz},
		{method: "GET", pattern: "/api/v1/openapi.json", h: h.openAPI},
		{method: "GET", pattern: "/api/v1/runs", h: h.listRuns},
		{method: "GET", pattern: "/api/v1/runs/{id}", h: h.getRun},
		{method: "GET", pattern: "/api/v1/runs/{id}/events", h: h.runEvents},
		{method: "POST", pattern: "/api/v1/runs/{id}/cancel", h: h.cancelRun},
		{method: "POST", pattern: "/api/v1/runs/{id}/replay", h: h.replayRun},
		{method: "POST", pattern: "/api/v1/runs/{id}/signals", h: h.signalRun},
		{method: "GET", pattern: "/api/v1/workflows", h: h.listWorkflows},
		{method: "GET", pattern: "/api/v1/workflows/{name}", h: h.getWorkflow},
		{method: "POST", pattern: "/api/v1/workflows/{name}/runs", h: h.trigger},
		{method: "POST", pattern: "/api/v1/workflows/{name}/runs/batch", h: h.triggerBatch},
		{method: "POST", pattern: "/api/v1/workflows/{name}/upgrade", h: h.upgrade},
		{method: "POST", pattern: "/api/v1/events", h: h.sendEvent},
		{method: "GET", pattern: "/api/v1/stats", h: h.stats},
		{method: "GET", pattern: "/api/v1/storage", h: h.storage},
		{method: "GET", pattern: "/api/v1/statuses", h: h.statuses},
		{method: "GET", pattern: "/api/v1/workers", h: h.listWorkers},
	}
	allow := map[string][]string{}
	for _, rt := range h.routes {
		h.mux.Handle(rt.method+" "+rt.pattern, h.serve(rt))
		allow[rt.pattern] = append(allow[rt.pattern], rt.method)
	}
	for pattern, methods := range allow {
		if slices.Contains(methods, "GET") {
			methods = append(methods, "HEAD")
		}
		list := strings.Join(methods, ", ")
		h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", list)
			writeProblem(w, r, &problem{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
				detail: "this resource allows " + list})
		})
	}
	if opts.Dashboard {
		h.registerDashboard()
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, &problem{status: http.StatusNotFound, code: "not_found", detail: "no such resource"})
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, &problem{status: http.StatusForbidden, code: "cross_origin",
			detail: "cross-origin request refused"})
	}))
	h.top = cop.Handler(h.mux)
	return h
}

// ServeHTTP serves the API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.top.ServeHTTP(w, r)
}

// serve wraps a route: authentication, tenant scope, and errors turned
// into problem details.
func (h *Handler) serve(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sc scope
		if !rt.public {
			if h.opts.Authenticate != nil {
				if err := h.opts.Authenticate(r); err != nil {
					w.Header().Set("WWW-Authenticate", `Bearer realm="durable"`)
					writeProblem(w, r, &problem{status: http.StatusUnauthorized, code: "unauthenticated",
						detail: "missing or invalid credentials"})
					return
				}
			}
			var err error
			if sc, err = h.scope(r); err != nil {
				h.fail(w, r, err)
				return
			}
		}
		if err := rt.h(w, r, sc); err != nil {
			h.fail(w, r, err)
		}
	})
}

// operator is what the API does with runs: *durable.Engine for every
// tenant, *durable.TenantRuns for one.
type operator interface {
	ListRuns(ctx context.Context, opts durable.ListOptions) (*durable.RunPage, error)
	Get(ctx context.Context, id uuid.UUID) (*durable.RunResult, error)
	Events(ctx context.Context, id uuid.UUID) ([]durabletype.Event, error)
	Cancel(ctx context.Context, id uuid.UUID, reason string) error
	Replay(ctx context.Context, id uuid.UUID, opts durable.ReplayOptions) error
	Signal(ctx context.Context, id uuid.UUID, name string, payload any) error
	Stats(ctx context.Context, opts durable.StatsOptions) (*durabletype.Stats, error)
	Waits(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]durable.StepWait, error)
	UpgradeRuns(ctx context.Context, workflow, from, to string, opts durable.UpgradeOptions) (*durable.UpgradeResult, error)
}

var (
	_ operator = (*durable.Engine)(nil)
	_ operator = (*durable.TenantRuns)(nil)
)

// scope is what one request may see: every tenant (all), or one.
type scope struct {
	all    bool
	tenant string
	ops    operator
}

func (h *Handler) scope(r *http.Request) (scope, error) {
	if h.opts.Tenant == nil {
		return scope{all: true, ops: h.e}, nil
	}
	t, all, err := h.opts.Tenant(r)
	if err != nil {
		return scope{}, &problem{status: http.StatusForbidden, code: "forbidden", detail: "no tenant allowed", err: err}
	}
	if all {
		return scope{all: true, ops: h.e}, nil
	}
	return scope{tenant: t, ops: h.e.Tenant(t)}, nil
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request, _ scope) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readyTimeout bounds the store check of /readyz.
const readyTimeout = 5 * time.Second

func (h *Handler) readyz(w http.ResponseWriter, r *http.Request, _ scope) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := h.e.Check(ctx); err != nil {
		h.opts.Logger.Warn("httpapi: not ready", slog.Any("error", err))
		return &problem{status: http.StatusServiceUnavailable, code: "not_ready",
			detail: "the store is not reachable or its schema is not current", err: err}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

// BearerToken returns an Options.Authenticate that accepts the requests
// whose Authorization header is "Bearer " followed by token, compared in
// constant time. An empty token accepts nothing.
func BearerToken(token string) func(*http.Request) error {
	want := []byte(token)
	return func(r *http.Request) error {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || len(want) == 0 || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			return errUnauthenticated
		}
		return nil
	}
}

var errUnauthenticated = errors.New("httpapi: missing or invalid bearer token")
