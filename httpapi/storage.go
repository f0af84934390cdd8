package httpapi

import (
	"net/http"
	"strconv"

	"github.com/effectivelabs/durable/durablejson"
)

// storage answers GET /api/v1/storage: the storage of the store's tables
// (rows, dead rows, sizes, vacuum) and the verdicts on them. The tables
// hold every tenant's runs, so only a caller that sees every tenant gets
// it.
func (h *Handler) storage(w http.ResponseWriter, r *http.Request, sc scope) error {
	if q := r.URL.Query(); len(q) > 0 {
		for name := range q { // any one: the endpoint takes none
			return badRequest("invalid_filter", "unknown query parameter "+strconv.Quote(name))
		}
	}
	if !sc.all {
		return &problem{status: http.StatusForbidden, code: "forbidden",
			detail: "the storage of the tables is shown to callers that see every tenant"}
	}
	st, err := h.e.Storage(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, durablejson.NewStorage(st))
	return nil
}
