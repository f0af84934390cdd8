package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func idPtr(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// waitsOf returns what the steps of a run in flight wait for, as the run's
// steps say (for a store that cannot list waits: see addWaits).
func waitsOf(res *durable.RunResult) []durablejson.RunWait {
	var out []durablejson.RunWait
	for i := range res.Steps {
		s := &res.Steps[i]
		if _, _, call := durablejson.CallName(s); call && durablejson.IsFunction(res) {
			continue // a function's waits are its body's
		}
		if !store.Waits(s.State, s.DueAt) {
			continue
		}
		w := durable.StepWait{Step: s.Name, Kind: s.Kind, State: s.State, EventKey: s.EventKey, Signal: s.Signal,
			ChildRunID: s.ChildRunID, DueAt: s.DueAt, Attempts: s.Attempts, Items: len(s.Items)}
		for k := range s.Items {
			if !s.Items[k].State.Terminal() {
				w.ItemsLeft++
			}
		}
		if rw, ok := waitJSON(w); ok {
			out = append(out, rw)
		}
	}
	return out
}

// waitJSON says what a step waits for: WAITING for an event, a signal, a
// child run or a map step's items, SLEEPING, or QUEUED with a due time (a
// retry's backoff or a delayed start: such a step is not claimable until
// then). It reports false for a step that waits for none of these.
func waitJSON(s durable.StepWait) (durablejson.RunWait, bool) {
	w := durablejson.RunWait{Step: s.Step, DueAt: timePtr(s.DueAt)}
	switch s.State {
	case durabletype.TaskWaiting:
		switch s.Kind {
		case durabletype.KindEvent:
			w.For, w.EventKey = "event", s.EventKey
			if s.Signal != "" {
				w.For, w.Signal, w.EventKey = "signal", s.Signal, ""
			}
		case durabletype.KindChild:
			w.For, w.ChildRunID = "child", idPtr(s.ChildRunID)
		case durabletype.KindMap:
			w.For, w.Items, w.ItemsLeft = "items", s.Items, s.ItemsLeft
		case durabletype.KindFunc:
			// A function's body waits for the event or the signal of
			// its call, or else for its child runs.
			switch {
			case s.Signal != "":
				w.For, w.Signal = "signal", s.Signal
			case s.EventKey != "":
				w.For, w.EventKey = "event", s.EventKey
			default:
				w.For = "child"
			}
		default:
			return w, false
		}
	case durabletype.TaskSleeping:
		w.For = "sleep"
	case durabletype.TaskQueued:
		if w.DueAt == nil {
			return w, false // claimable: queued, not waiting
		}
		w.For, w.Attempts = "start", s.Attempts
		if s.Attempts > 0 {
			w.For = "retry"
		}
	default:
		return w, false
	}
	return w, true
}

// listParams are the query parameters of GET /api/v1/runs.
var listParams = []string{"status", "workflow", "version", "tenant", "created_after", "created_before",
	"finished_after", "finished_before", "parent", "top_level", "idempotency_key", "input_contains", "limit", "cursor", "include"}

// maxIncludeLimit is the largest page of runs that may include waits or
// children: children cost a read per run of the page (and waits, on a
// store that cannot list them in one read).
const maxIncludeLimit = 100

func (h *Handler) listRuns(w http.ResponseWriter, r *http.Request, sc scope) error {
	q := r.URL.Query()
	for name := range q {
		if !slices.Contains(listParams, name) {
			return badRequest("invalid_filter", "unknown query parameter "+strconv.Quote(name))
		}
	}
	var opts durable.ListOptions
	for _, v := range q["status"] {
		for word := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(word) == "" {
				continue // an empty value filters nothing
			}
			sts, err := durablejson.ParseStatuses(word)
			if err != nil {
				return badRequest("invalid_filter", "status: "+err.Error())
			}
			opts.Statuses = append(opts.Statuses, sts...)
		}
	}
	// An empty value filters nothing; any other is checked by the rule of
	// its kind: one that breaks it is a 400, a valid one that matches no
	// run an empty page.
	for _, p := range []struct {
		rule  dag.Rule
		name  string
		field *string
	}{{dag.NameRule, "workflow", &opts.Workflow}, {dag.VersionRule, "version", &opts.Version}, {dag.TenantRule, "tenant", &opts.Tenant},
		{dag.IdempotencyKeyRule, "idempotency_key", &opts.IdempotencyKey}} {
		if v := q.Get(p.name); v != "" {
			if err := check(p.rule, p.name, v); err != nil {
				return err
			}
			*p.field = v
		}
	}
	for _, tp := range []struct {
		name string
		dst  *time.Time
	}{
		{"created_after", &opts.CreatedAfter}, {"created_before", &opts.CreatedBefore},
		{"finished_after", &opts.FinishedAfter}, {"finished_before", &opts.FinishedBefore},
	} {
		if v := q.Get(tp.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return badRequest("invalid_filter", tp.name+": want an RFC 3339 time such as 2026-01-02T15:04:05Z")
			}
			*tp.dst = t
		}
	}
	if v := q.Get("parent"); v != "" {
		id, err := parseID(v)
		if err != nil {
			return err
		}
		opts.Parent = id
	}
	switch v := q.Get("top_level"); v {
	case "", "false":
	case "true":
		if opts.Parent != uuid.Nil {
			return badRequest("invalid_filter", "top_level: parent lists child runs, top_level=true leaves them out: give one")
		}
		opts.TopLevel = true
	default:
		return badRequest("invalid_filter", "top_level: want true or false, got "+strconv.Quote(v))
	}
	if v := q.Get("input_contains"); v != "" {
		if err := dag.CheckJSONFilter([]byte(v)); err != nil {
			return badRequest("invalid_filter", "input_contains: "+err.Error())
		}
		opts.InputContains = json.RawMessage(v)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("invalid_filter", "limit: want a whole number from 1 to 1000")
		}
		opts.Limit = n
	}
	opts.Cursor = q.Get("cursor")
	var withWaits, withChildren bool
	for _, v := range q["include"] {
		for inc := range strings.SplitSeq(v, ",") {
			switch strings.TrimSpace(inc) {
			case "waits":
				withWaits = true
			case "children":
				withChildren = true
			case "":
			default:
				return badRequest("invalid_filter", `include: want "waits" or "children", got `+strconv.Quote(inc))
			}
		}
	}
	if (withWaits || withChildren) && opts.Limit > maxIncludeLimit {
		return badRequest("invalid_filter", "include: at most "+strconv.Itoa(maxIncludeLimit)+" runs a page (limit)")
	}
	page, err := sc.ops.ListRuns(r.Context(), opts)
	if err != nil {
		return err
	}
	var unserved func(workflow, version string) bool
	if durablejson.InFlight(page.Runs) {
		// One listing of the workers for the page, not one per run.
		if unserved, err = h.unservedCheck(r.Context()); err != nil {
			return err
		}
	}
	out := durablejson.NewRunList(page.Runs, page.Next, unserved)
	if withWaits {
		if err := h.addWaits(r.Context(), sc, out.Runs); err != nil {
			return err
		}
	}
	if withChildren {
		if err := h.addChildren(r.Context(), sc, out.Runs); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// addWaits sets what the runs in flight of a page wait for (settled runs
// wait for nothing): one read of the store for the page, or, on a store
// that cannot list waits, one read of the run and its steps per run in
// flight.
func (h *Handler) addWaits(ctx context.Context, sc scope, runs []durablejson.Run) error {
	var ids []uuid.UUID
	for i := range runs {
		if runs[i].Status.InFlight() {
			ids = append(ids, runs[i].ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	waits, err := sc.ops.Waits(ctx, ids)
	if errors.Is(err, durable.ErrWaitsUnsupported) {
		return h.addWaitsByRun(ctx, sc, runs)
	}
	if err != nil {
		return err
	}
	for i := range runs {
		for _, s := range waits[runs[i].ID] {
			if w, ok := waitJSON(s); ok {
				runs[i].Waits = append(runs[i].Waits, w)
			}
		}
	}
	return nil
}

// addWaitsByRun is addWaits for a store that cannot list waits: it reads
// each run in flight with its steps.
func (h *Handler) addWaitsByRun(ctx context.Context, sc scope, runs []durablejson.Run) error {
	for i := range runs {
		if !runs[i].Status.InFlight() {
			continue
		}
		res, err := sc.ops.Get(ctx, runs[i].ID)
		if errors.Is(err, durabletype.ErrRunNotFound) {
			continue // pruned since the listing
		}
		if err != nil {
			return err
		}
		runs[i].Waits = waitsOf(res)
	}
	return nil
}

// addChildren marks the runs of a page that started child runs: one
// indexed probe of the child runs per run, but for the runs of a
// registered workflow without a child step.
func (h *Handler) addChildren(ctx context.Context, sc scope, runs []durablejson.Run) error {
	noChildren := map[string]bool{}
	for _, wf := range h.e.Workflows() {
		noChildren[wf.Name] = !slices.ContainsFunc(wf.Steps, func(s durable.StepInfo) bool {
			return s.Kind == durabletype.KindChild || s.Kind == durabletype.KindFunc
		})
	}
	for i := range runs {
		if noChildren[runs[i].Workflow] {
			continue
		}
		page, err := sc.ops.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Parent: runs[i].ID}, Limit: 1})
		if err != nil {
			return err
		}
		runs[i].HasChildren = len(page.Runs) > 0
	}
	return nil
}

// parseID parses a run ID.
func parseID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, badRequest("invalid_id", "not a run ID: want a UUID such as 01890a5d-ac96-774b-bcce-b302099a8057")
	}
	return id, nil
}

func (h *Handler) getRun(w http.ResponseWriter, r *http.Request, sc scope) error {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	withEvents := false
	for _, v := range r.URL.Query()["include"] {
		for inc := range strings.SplitSeq(v, ",") {
			switch strings.TrimSpace(inc) {
			case "events":
				withEvents = true
			case "":
			default:
				return badRequest("invalid_filter", `include: want "events", got `+strconv.Quote(inc))
			}
		}
	}
	return h.writeRun(w, r, sc, id, http.StatusOK, withEvents)
}

// writeRun answers with the run id (withEvents: and its event log).
func (h *Handler) writeRun(w http.ResponseWriter, r *http.Request, sc scope, id uuid.UUID, status int, withEvents bool) error {
	res, err := sc.ops.Get(r.Context(), id)
	if err != nil {
		return err
	}
	d, err := durablejson.ReadRun(r.Context(), sc.ops, h.e, res)
	if err != nil {
		return err
	}
	maxValue := h.opts.MaxValueBytes
	if r.URL.Query().Get("full") == "true" {
		maxValue = -1
	}
	if withEvents {
		if d.Events, err = sc.ops.Events(r.Context(), id); err != nil {
			return err
		}
	}
	writeJSON(w, status, durablejson.NewRunDetail(d, maxValue))
	return nil
}

func (h *Handler) runEvents(w http.ResponseWriter, r *http.Request, sc scope) error {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	evs, err := sc.ops.Events(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, durablejson.EventLog{Events: durablejson.NewEvents(evs)})
	return nil
}

// cancelRequest is the body of POST /api/v1/runs/{id}/cancel (optional).
type cancelRequest struct {
	Reason string `json:"reason"`
}

func (h *Handler) cancelRun(w http.ResponseWriter, r *http.Request, sc scope) error {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	var req cancelRequest
	if err := h.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if err := check(dag.ReasonRule, "reason", req.Reason); err != nil {
		return err
	}
	if err := sc.ops.Cancel(r.Context(), id, req.Reason); err != nil {
		return err
	}
	return h.writeRun(w, r, sc, id, http.StatusOK, false)
}

// replayRequest is the body of POST /api/v1/runs/{id}/replay (optional).
type replayRequest struct {
	FromStep string `json:"from_step"`
}

func (h *Handler) replayRun(w http.ResponseWriter, r *http.Request, sc scope) error {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	var req replayRequest
	if err := h.decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if req.FromStep != "" {
		if err := check(dag.NameRule, "from_step", req.FromStep); err != nil {
			return err
		}
	}
	if err := sc.ops.Replay(r.Context(), id, durable.ReplayOptions{FromStep: req.FromStep}); err != nil {
		return err
	}
	return h.writeRun(w, r, sc, id, http.StatusOK, false)
}

// signalRequest is the body of POST /api/v1/runs/{id}/signals.
type signalRequest struct {
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload"`
}

func (h *Handler) signalRun(w http.ResponseWriter, r *http.Request, sc scope) error {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		return err
	}
	var req signalRequest
	if err := h.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if err := check(dag.SignalRule, "name", req.Name); err != nil {
		return err
	}
	if err := sc.ops.Signal(r.Context(), id, req.Name, payload(req.Payload)); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": id.String()})
	return nil
}

// payload is a JSON payload as the codec encodes it: as it is, null when
// absent.
func payload(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
