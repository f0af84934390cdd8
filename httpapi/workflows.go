package httpapi

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// workflows describes the workflows named name (every one when empty)
// that this server's engine registers, its store records runs of or a
// live worker serves: the registered ones first, in the engine's order,
// then the others by name. The runs counted are those sc may see.
func (h *Handler) workflows(ctx context.Context, sc scope, name string) (*durablejson.WorkflowList, error) {
	vs, err := h.e.Versions(ctx, name)
	if err != nil {
		return nil, err
	}
	if !sc.all && len(vs) > 0 {
		// Workflows and versions are not tenant data; the runs are.
		st, err := sc.ops.Stats(ctx, durable.StatsOptions{})
		if err != nil {
			return nil, err
		}
		type key struct{ workflow, version string }
		inFlight, ready := map[key]int{}, map[key]int{}
		for _, q := range st.Queues {
			ready[key{q.Workflow, q.Version}] += q.Ready
		}
		for _, c := range st.Runs {
			if !c.Settled {
				inFlight[key{c.Workflow, c.Version}] += c.Count
			}
		}
		for i := range vs {
			k := key{vs[i].Workflow, vs[i].Version}
			vs[i].InFlight, vs[i].Ready = inFlight[k], ready[k]
		}
	}
	return durablejson.NewWorkflowList(h.e.Workflows(), vs, name), nil
}

func (h *Handler) listWorkflows(w http.ResponseWriter, r *http.Request, sc scope) error {
	wfs, err := h.workflows(r.Context(), sc, "")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wfs)
	return nil
}

func (h *Handler) getWorkflow(w http.ResponseWriter, r *http.Request, sc scope) error {
	name := r.PathValue("name")
	if err := check(dag.NameRule, "name", name); err != nil {
		return err
	}
	wfs, err := h.workflows(r.Context(), sc, name)
	if err != nil {
		return err
	}
	if len(wfs.Workflows) == 0 {
		return workflowNotFound(name)
	}
	writeJSON(w, http.StatusOK, wfs.Workflows[0])
	return nil
}

// workflowNotFound is the problem of a workflow that nothing here knows.
func workflowNotFound(name string) *problem {
	return &problem{status: http.StatusNotFound, code: "workflow_not_found",
		detail: "no workflow " + strconv.Quote(name) + " is known here: this server's engine does not register it, " +
			"no run in the store recorded it and no live worker serves it"}
}

// triggerRequest is the body of POST /api/v1/workflows/{name}/runs.
type triggerRequest struct {
	// Tenant defaults to the tenant the request is scoped to.
	Tenant string `json:"tenant"`
	// Input is decoded into the workflow's input type; absent, null.
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotency_key"`
	RunID          string          `json:"run_id"`
	Priority       *int            `json:"priority"`
	StartAt        *time.Time      `json:"start_at"`
	StartAfter     string          `json:"start_after"`
	RunTimeout     string          `json:"run_timeout"`
	Deadline       *time.Time      `json:"deadline"`
	// AllowUnknownFields lets Input hold fields the input type does not
	// have (durable.WithUnknownFields): a client newer than this server
	// may send a field its definition does not know yet.
	AllowUnknownFields bool `json:"allow_unknown_fields"`
}

// triggerResponse says what a trigger did.
type triggerResponse struct {
	RunID     uuid.UUID `json:"run_id"`
	Duplicate bool      `json:"duplicate"`
	// Warning is durable.Started's: no live worker serves the version
	// the run was started at, while live workers serve another.
	Warning string `json:"warning,omitempty"`
}

// tenantFor returns the tenant a request that names tenant acts for: the
// scope's when it names none; another tenant than the scope's is
// forbidden.
func tenantFor(sc scope, tenant string) (string, error) {
	if tenant != "" {
		if err := check(dag.TenantRule, "tenant", tenant); err != nil {
			return "", err
		}
	}
	if sc.all {
		if tenant == "" {
			return "", &problem{status: http.StatusBadRequest, code: "invalid_tenant", param: "tenant", detail: "tenant is required"}
		}
		return tenant, nil
	}
	if tenant != "" && tenant != sc.tenant {
		return "", &problem{status: http.StatusForbidden, code: "forbidden_tenant", detail: "this request may not act for that tenant"}
	}
	return sc.tenant, nil
}

func (h *Handler) trigger(w http.ResponseWriter, r *http.Request, sc scope) error {
	if err := check(dag.NameRule, "name", r.PathValue("name")); err != nil {
		return err
	}
	var req triggerRequest
	if err := h.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	tenant, opts, err := req.options(sc)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	st, err := h.e.StartByName(r.Context(), name, tenant, payload(req.Input), opts...)
	if err != nil {
		return h.triggerFailed(r.Context(), name, err)
	}
	w.Header().Set("Location", "/api/v1/runs/"+st.RunID.String())
	status := http.StatusCreated
	if st.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, triggerResponse{RunID: st.RunID, Duplicate: st.Duplicate, Warning: st.Warning})
	return nil
}

// triggerFailed answers an error of starting runs of the workflow name:
// 404 naming the workflows this server can start when it cannot start
// name.
func (h *Handler) triggerFailed(ctx context.Context, name string, err error) error {
	if errors.Is(err, durable.ErrWorkflowNotRegistered) {
		detail, derr := h.notStartable(ctx, name)
		if derr != nil {
			return derr
		}
		return &problem{status: http.StatusNotFound, code: "workflow_not_found", detail: detail, err: err}
	}
	return err
}

// options checks a trigger and returns its tenant and options.
func (req *triggerRequest) options(sc scope) (string, []durable.TriggerOption, error) {
	tenant, err := tenantFor(sc, req.Tenant)
	if err != nil {
		return "", nil, err
	}
	var opts []durable.TriggerOption
	if req.AllowUnknownFields {
		opts = append(opts, durable.WithUnknownFields())
	}
	if req.IdempotencyKey != "" {
		if err := check(dag.IdempotencyKeyRule, "idempotency_key", req.IdempotencyKey); err != nil {
			return "", nil, err
		}
		opts = append(opts, durable.WithIdempotencyKey(req.IdempotencyKey))
	}
	if req.RunID != "" {
		id, err := parseID(req.RunID)
		if err != nil {
			return "", nil, err
		}
		opts = append(opts, durable.WithRunID(id))
	}
	if req.Priority != nil {
		opts = append(opts, durable.WithPriority(durable.Priority(*req.Priority)))
	}
	if req.StartAt != nil {
		opts = append(opts, durable.WithStartAt(*req.StartAt))
	}
	if req.Deadline != nil {
		opts = append(opts, durable.WithDeadline(*req.Deadline))
	}
	for _, d := range []struct {
		name, v string
		opt     func(time.Duration) durable.TriggerOption
	}{{"start_after", req.StartAfter, durable.WithStartAfter}, {"run_timeout", req.RunTimeout, durable.WithRunTimeout}} {
		if d.v == "" {
			continue
		}
		dur, err := time.ParseDuration(d.v)
		if err != nil {
			return "", nil, badRequest("invalid_trigger", d.name+`: want a duration such as "90s" or "2h"`)
		}
		opts = append(opts, d.opt(dur))
	}
	return tenant, opts, nil
}

// batchRequest is the body of POST /api/v1/workflows/{name}/runs/batch.
type batchRequest struct {
	Runs []triggerRequest `json:"runs"`
}

// batchResponse says what a batch trigger did, run by run.
type batchResponse struct {
	Runs []triggerResponse `json:"runs"`
	// Warning is that of the runs started (durable.Started.Warning), said
	// once for the batch.
	Warning string `json:"warning,omitempty"`
}

// MaxBatch is the most runs one POST /api/v1/workflows/{name}/runs/batch
// starts.
const MaxBatch = 1000

// triggerBatch starts many runs of one workflow in one transaction
// (Engine.StartManyByName): every trigger is checked first, and one that
// is refused fails the request, naming it (runs[i]), with nothing
// started.
func (h *Handler) triggerBatch(w http.ResponseWriter, r *http.Request, sc scope) error {
	name := r.PathValue("name")
	if err := check(dag.NameRule, "name", name); err != nil {
		return err
	}
	var req batchRequest
	if err := h.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if len(req.Runs) == 0 || len(req.Runs) > MaxBatch {
		return &problem{status: http.StatusBadRequest, code: "invalid_trigger", param: "runs",
			detail: "runs: want 1 to " + strconv.Itoa(MaxBatch) + " triggers, got " + strconv.Itoa(len(req.Runs))}
	}
	at := func(i int, err error) error {
		var p *problem
		var ive *durabletype.InvalidValueError
		switch {
		case errors.As(err, &p):
		case errors.As(err, &ive):
			p = invalid(ive)
		default:
			return fmt.Errorf("runs[%d]: %w", i, err)
		}
		q := *p
		q.detail = fmt.Sprintf("runs[%d]: %s", i, p.detail)
		if q.param != "" {
			q.param = fmt.Sprintf("runs[%d].%s", i, p.param)
		}
		return &q
	}
	triggers := make([]durable.TriggerByName, len(req.Runs))
	for i := range req.Runs {
		tenant, opts, err := req.Runs[i].options(sc)
		if err != nil {
			return at(i, err)
		}
		triggers[i] = durable.TriggerByName{Tenant: tenant, Input: payload(req.Runs[i].Input), Options: opts}
	}
	started, err := h.e.StartManyByName(r.Context(), name, triggers)
	var te *durable.TriggerError
	if errors.As(err, &te) {
		return at(te.Index, te.Err)
	}
	if err != nil {
		return h.triggerFailed(r.Context(), name, err)
	}
	out := batchResponse{Runs: make([]triggerResponse, len(started))}
	status := http.StatusOK // every trigger a duplicate: nothing started
	for i, st := range started {
		out.Runs[i] = triggerResponse{RunID: st.RunID, Duplicate: st.Duplicate}
		if !st.Duplicate {
			status = http.StatusCreated
		}
		if st.Warning != "" {
			out.Warning = st.Warning
		}
	}
	writeJSON(w, status, out)
	return nil
}

// notStartable says that this server cannot start the workflow name, why
// (nothing here knows it, or it knows it only from the store and the
// workers, without its code), and which workflows it can start: those
// registered on its engine, but the ones registered only as the children
// of others.
func (h *Handler) notStartable(ctx context.Context, name string) (string, error) {
	var names []string
	for _, wf := range h.e.Workflows() {
		if !wf.ChildOnly {
			names = append(names, strconv.Quote(wf.Name))
		}
	}
	why, sep := "no workflow "+strconv.Quote(name)+" here", ": "
	if dag.ValidName(name) {
		vs, err := h.e.Versions(ctx, name)
		if err != nil {
			return "", err
		}
		if len(vs) > 0 {
			why, sep = "workflow "+strconv.Quote(name)+" is known here only from its runs and workers: its code is not "+
				"registered on this server's engine, so this server cannot start it (start it from a process that registers it)", "; "
		}
	}
	if len(names) == 0 {
		return why + sep + "this server can start no workflow (its engine registers none)", nil
	}
	return why + sep + "this server can start " + strings.Join(names, ", "), nil
}

// eventRequest is the body of POST /api/v1/events.
type eventRequest struct {
	// Tenant defaults to the tenant the request is scoped to.
	Tenant  string          `json:"tenant"`
	Key     string          `json:"key"`
	Payload json.RawMessage `json:"payload"`
}

func (h *Handler) sendEvent(w http.ResponseWriter, r *http.Request, sc scope) error {
	var req eventRequest
	if err := h.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	tenant, err := tenantFor(sc, req.Tenant)
	if err != nil {
		return err
	}
	n, err := h.e.SendEvent(r.Context(), tenant, req.Key, payload(req.Payload))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, durablejson.NewEventSent(n, nil))
	return nil
}

// maxWindow bounds the stats window.
const maxWindow = 400 * 24 * time.Hour

func (h *Handler) stats(w http.ResponseWriter, r *http.Request, sc scope) error {
	q := r.URL.Query()
	for name := range q {
		if name != "window" {
			return badRequest("invalid_filter", "unknown query parameter "+strconv.Quote(name))
		}
	}
	window := time.Hour
	if v := q.Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > maxWindow {
			return badRequest("invalid_filter", `window: want a positive duration up to 9600h, such as "1h"`)
		}
		window = d
	}
	st, err := sc.ops.Stats(r.Context(), durable.StatsOptions{Window: window})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, durablejson.NewStats(st, time.Now(), sc.tenant, window))
	return nil
}

// statuses answers GET /api/v1/statuses: what each run status means.
func (h *Handler) statuses(w http.ResponseWriter, r *http.Request, _ scope) error {
	writeJSON(w, http.StatusOK, durablejson.NewStatuses())
	return nil
}

// openAPIDoc is the OpenAPI 3.1 document of the API.
//
//go:embed openapi.json
var openAPIDoc []byte

func (h *Handler) openAPI(w http.ResponseWriter, r *http.Request, _ scope) error {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDoc)
	return nil
}
