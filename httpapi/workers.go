package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
)

// listWorkers answers GET /api/v1/workers: the live workers (every one
// with all=true) and the workflows with ready steps that none of the live
// ones serves. The fleet is shown to every authenticated caller (workflow
// names are not tenant data: GET /api/v1/workflows shows them too); the
// ready counts behind "unserved" are the caller's tenant's only.
func (h *Handler) listWorkers(w http.ResponseWriter, r *http.Request, sc scope) error {
	q := r.URL.Query()
	all := false
	for name := range q {
		if name != "all" {
			return badRequest("invalid_filter", "unknown query parameter "+strconv.Quote(name))
		}
	}
	if v := q.Get("all"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("invalid_filter", "all: want true or false")
		}
		all = b
	}
	ws, err := h.e.Workers(r.Context())
	if err != nil {
		return err
	}
	st, err := sc.ops.Stats(r.Context(), durable.StatsOptions{})
	if err != nil {
		return err
	}
	out := durablejson.NewWorkers(ws, st, time.Now(), all)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// unservedCheck returns a function reporting whether a run of a version of
// a workflow that has not settled is unserved (no live worker serves or
// accepts that version), or nil when the store keeps no registry of
// workers. It lists the workers once.
func (h *Handler) unservedCheck(ctx context.Context) (func(workflow, version string) bool, error) {
	ws, err := h.e.Workers(ctx)
	if errors.Is(err, durable.ErrWorkersUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return durablejson.Unserved(ws), nil
}
