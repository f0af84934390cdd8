package httpapi

import (
	_ "embed"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
)

// workflowInfo is a registered workflow and its DAG.
type workflowInfo struct {
	Name      string     `json:"name"`
	Steps     []stepInfo `json:"steps"`
	OnFailure bool       `json:"on_failure"`
	ChildOnly bool       `json:"child_only,omitempty"`
}

type stepInfo struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Parents []string `json:"parents"`
	Sleep   string   `json:"sleep,omitempty"`
	Signal  string   `json:"signal,omitempty"`
	Child   string   `json:"child,omitempty"`
	MapOver string   `json:"map_over,omitempty"`
}

func workflowJSON(w durable.WorkflowInfo) workflowInfo {
	out := workflowInfo{Name: w.Name, OnFailure: w.OnFailure, ChildOnly: w.ChildOnly, Steps: make([]stepInfo, len(w.Steps))}
	for i, s := range w.Steps {
		si := stepInfo{Name: s.Name, Kind: string(s.Kind), Parents: s.Parents, Signal: s.Signal, Child: s.Child, MapOver: s.MapOver}
		if si.Parents == nil {
			si.Parents = []string{}
		}
		if s.Sleep > 0 {
			si.Sleep = s.Sleep.String()
		}
		out.Steps[i] = si
	}
	return out
}

func (h *Handler) listWorkflows(w http.ResponseWriter, r *http.Request, _ scope) error {
	wfs := h.e.Workflows()
	out := struct {
		Workflows []workflowInfo `json:"workflows"`
	}{Workflows: make([]workflowInfo, len(wfs))}
	for i, wf := range wfs {
		out.Workflows[i] = workflowJSON(wf)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *Handler) getWorkflow(w http.ResponseWriter, r *http.Request, _ scope) error {
	name := r.PathValue("name")
	for _, wf := range h.e.Workflows() {
		if wf.Name == name {
			writeJSON(w, http.StatusOK, workflowJSON(wf))
			return nil
		}
	}
	return &problem{status: http.StatusNotFound, code: "workflow_not_found", detail: "no workflow of that name is registered"}
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
}

// triggerResponse says what a trigger did.
type triggerResponse struct {
	RunID     uuid.UUID `json:"run_id"`
	Duplicate bool      `json:"duplicate"`
}

// tenantFor returns the tenant a request that names tenant acts for: the
// scope's when it names none; another tenant than the scope's is
// forbidden.
func tenantFor(sc scope, tenant string) (string, error) {
	if sc.all {
		if tenant == "" {
			return "", badRequest("invalid_tenant", "tenant is required")
		}
		return tenant, nil
	}
	if tenant != "" && tenant != sc.tenant {
		return "", &problem{status: http.StatusForbidden, code: "forbidden_tenant", detail: "this request may not act for that tenant"}
	}
	return sc.tenant, nil
}

func (h *Handler) trigger(w http.ResponseWriter, r *http.Request, sc scope) error {
	var req triggerRequest
	if err := h.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	tenant, err := tenantFor(sc, req.Tenant)
	if err != nil {
		return err
	}
	var opts []durable.TriggerOption
	if req.IdempotencyKey != "" {
		opts = append(opts, durable.WithIdempotencyKey(req.IdempotencyKey))
	}
	if req.RunID != "" {
		id, err := parseID(req.RunID)
		if err != nil {
			return err
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
			return badRequest("invalid_trigger", d.name+`: want a duration such as "90s" or "2h"`)
		}
		opts = append(opts, d.opt(dur))
	}
	name := r.PathValue("name")
	st, err := h.e.StartByName(r.Context(), name, tenant, payload(req.Input), opts...)
	if errors.Is(err, durable.ErrWorkflowNotRegistered) {
		return &problem{status: http.StatusNotFound, code: "workflow_not_found", detail: h.notStartable(name), err: err}
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/runs/"+st.RunID.String())
	status := http.StatusCreated
	if st.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, triggerResponse{RunID: st.RunID, Duplicate: st.Duplicate})
	return nil
}

// notStartable says that this server cannot start the workflow name, and
// which workflows it can start: those registered on its engine, but the
// ones registered only as the children of others.
func (h *Handler) notStartable(name string) string {
	var names []string
	for _, wf := range h.e.Workflows() {
		if !wf.ChildOnly {
			names = append(names, strconv.Quote(wf.Name))
		}
	}
	if len(names) == 0 {
		return "no workflow " + strconv.Quote(name) + " here: this server can start no workflow (its engine registers none)"
	}
	return "no workflow " + strconv.Quote(name) + " here: this server can start " + strings.Join(names, ", ")
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
	writeJSON(w, http.StatusOK, map[string]int{"delivered": n})
	return nil
}

// statsJSON is the answer of GET /api/v1/stats.
type statsJSON struct {
	Window string       `json:"window"`
	Queues []queueStats `json:"queues"`
	Runs   []runCount   `json:"runs"`
}

type queueStats struct {
	Workflow    string     `json:"workflow"`
	Tenant      string     `json:"tenant"`
	Ready       int        `json:"ready"`
	Waiting     int        `json:"waiting"`
	Running     int        `json:"running"`
	OldestReady *time.Time `json:"oldest_ready,omitempty"`
}

type runCount struct {
	Workflow string `json:"workflow"`
	Tenant   string `json:"tenant"`
	Status   string `json:"status"`
	Settled  bool   `json:"settled"`
	Count    int    `json:"count"`
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
	out := statsJSON{Window: window.String(), Queues: make([]queueStats, len(st.Queues)), Runs: make([]runCount, len(st.Runs))}
	for i, q := range st.Queues {
		out.Queues[i] = queueStats{Workflow: q.Workflow, Tenant: q.Tenant, Ready: q.Ready, Waiting: q.Waiting,
			Running: q.Running, OldestReady: timePtr(q.OldestReady)}
	}
	for i, c := range st.Runs {
		out.Runs[i] = runCount{Workflow: c.Workflow, Tenant: c.Tenant, Status: string(c.Status), Settled: c.Settled, Count: c.Count}
	}
	writeJSON(w, http.StatusOK, out)
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
