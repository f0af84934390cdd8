package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"unicode/utf8"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// problem is an RFC 9457 problem: an HTTP status, a stable code for
// programs (the "code" member) and a detail for people.
type problem struct {
	status int
	code   string
	detail string
	err    error // the cause, logged for a 500, never shown
	// versions lists the versions of a workflow known, for an unknown one.
	versions []string
	// param names the path segment, query parameter or body field at
	// fault, for a value that breaks the rule of its kind.
	param string
	// refused lists the waiting steps that refused a payload.
	refused *durabletype.RefusedError
}

func (p *problem) Error() string { return p.detail }
func (p *problem) Unwrap() error { return p.err }

// problemBody is the JSON of a problem.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	// Versions lists the versions known of the workflow, when the problem
	// is a version it does not have (unknown_version).
	Versions []string `json:"versions,omitempty"`
	// Parameter names the path segment, query parameter or body field
	// whose value breaks the rule of its kind (docs/http-api.md, "What a
	// name may be").
	Parameter string `json:"parameter,omitempty"`
	// Refused lists the waiting steps that refused an event's or a
	// signal's payload, each with why and the shape it expects
	// (payload_refused); Delivered counts the steps that received it.
	Refused   []durabletype.Refusal `json:"refused,omitempty"`
	Delivered *int                  `json:"delivered,omitempty"`
}

func badRequest(code, detail string) *problem {
	return &problem{status: http.StatusBadRequest, code: code, detail: detail}
}

// fail answers err as a problem: a *problem as it is, an engine error by
// what it matches, anything else as 500 (logged, not shown).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var p *problem
	if !errors.As(err, &p) {
		p = classify(err)
	}
	if p.status >= 500 && p.status != http.StatusServiceUnavailable {
		h.opts.Logger.Error("httpapi: "+r.Method+" "+r.URL.Path, slog.Any("error", err))
	}
	writeProblem(w, r, p)
}

// classify maps the engine's typed errors to problems. The engine decides
// (may this run be cancelled, replayed...); the API only reports.
func classify(err error) *problem {
	msg := err.Error()
	is := func(target error) bool { return errors.Is(err, target) }
	var ive *durabletype.InvalidValueError
	if errors.As(err, &ive) {
		return invalid(ive)
	}
	if badText(err) {
		return &problem{status: http.StatusBadRequest, code: "invalid_text",
			detail: "a value is not text the database can store (a NUL byte or invalid UTF-8)", err: err}
	}
	var refused *durabletype.RefusedError
	switch {
	case errors.As(err, &refused):
		return &problem{status: http.StatusUnprocessableEntity, code: "payload_refused", detail: msg, err: err, refused: refused}
	case is(durabletype.ErrPayloadTooLarge):
		return &problem{status: http.StatusRequestEntityTooLarge, code: "payload_too_large", detail: msg, err: err}
	case is(durabletype.ErrRunNotFound):
		return &problem{status: http.StatusNotFound, code: "run_not_found", detail: "no such run", err: err}
	case is(durable.ErrWorkflowNotRegistered):
		return &problem{status: http.StatusNotFound, code: "workflow_not_found", detail: msg, err: err}
	case is(durabletype.ErrRunSettled):
		return &problem{status: http.StatusConflict, code: "run_settled", detail: "the run has settled", err: err}
	case is(durabletype.ErrRunNotSettled):
		return &problem{status: http.StatusConflict, code: "run_not_settled", detail: "the run has not settled", err: err}
	case is(durabletype.ErrNothingToReplay):
		return &problem{status: http.StatusConflict, code: "nothing_to_replay",
			detail: "a completed run is replayed only from a step (from_step)", err: err}
	case is(durabletype.ErrRunExists):
		return &problem{status: http.StatusConflict, code: "run_exists",
			detail: "the run ID is taken by a run of another workflow or tenant", err: err}
	case is(durable.ErrInvalidInput):
		return &problem{status: http.StatusUnprocessableEntity, code: "invalid_input", detail: msg, err: err}
	case is(durabletype.ErrInvalidKey):
		return &problem{status: http.StatusUnprocessableEntity, code: "invalid_key", detail: msg, err: err}
	case is(durabletype.ErrStepNotFound):
		return &problem{status: http.StatusBadRequest, code: "step_not_found", detail: msg, err: err}
	case is(durable.ErrInvalidCursor):
		return &problem{status: http.StatusBadRequest, code: "invalid_cursor", detail: msg, err: err}
	case is(durable.ErrInvalidFilter):
		return &problem{status: http.StatusBadRequest, code: "invalid_filter", detail: msg, err: err}
	case is(durabletype.ErrInvalidTenant):
		return &problem{status: http.StatusBadRequest, code: "invalid_tenant", detail: msg, err: err}
	case is(durable.ErrInvalidTrigger):
		return &problem{status: http.StatusBadRequest, code: "invalid_trigger", detail: msg, err: err}
	case is(durabletype.ErrInvalidEvent):
		return &problem{status: http.StatusBadRequest, code: "invalid_event", detail: msg, err: err}
	case is(durable.ErrInvalidVersion):
		return &problem{status: http.StatusBadRequest, code: "invalid_version", detail: msg, err: err}
	case is(durable.ErrUnknownVersion):
		return &problem{status: http.StatusUnprocessableEntity, code: "unknown_version", detail: msg, err: err}
	case is(durabletype.ErrUnknownShape):
		return &problem{status: http.StatusConflict, code: "unknown_shape",
			detail: "the run was started by a newer release of the engine, which this one cannot read: " + msg, err: err}
	case is(durable.ErrWorkersUnsupported):
		return &problem{status: http.StatusNotImplemented, code: "workers_unsupported",
			detail: "the store keeps no registry of workers", err: err}
	case is(durable.ErrStorageUnsupported):
		return &problem{status: http.StatusNotImplemented, code: "storage_unsupported",
			detail: "the store has no tables to report the storage of", err: err}
	case is(durable.ErrEngineStopped):
		return &problem{status: http.StatusServiceUnavailable, code: "stopped", detail: "the engine is stopped", err: err}
	}
	return &problem{status: http.StatusInternalServerError, code: "internal", detail: "internal error", err: err}
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, p *problem) {
	body := problemBody{Type: "about:blank", Title: http.StatusText(p.status), Status: p.status,
		Detail: p.detail, Code: p.code, Versions: p.versions, Parameter: p.param}
	if p.refused != nil {
		body.Refused = p.refused.Refusals
		n := 0
		for _, d := range p.refused.Delivered {
			n += d
		}
		body.Delivered = &n
	}
	writeBody(w, p.status, "application/problem+json", body)
}

// writeJSON writes v as application/json.
func writeJSON(w http.ResponseWriter, status int, v any) {
	writeBody(w, status, "application/json", v)
}

func writeBody(w http.ResponseWriter, status int, contentType string, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // escapes <, > and &, and replaces invalid UTF-8
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"type":"about:blank","title":"Internal Server Error","status":500,"code":"internal"}` + "\n")
		contentType = "application/problem+json"
	}
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// decodeBody decodes the JSON object of r's body into v, refusing unknown
// fields, trailing data, invalid UTF-8 and bodies over the limit. An empty
// body leaves v as it is when empty is allowed.
func (h *Handler) decodeBody(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &problem{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
				detail: "the request body is larger than the limit", err: err}
		}
		return badRequest("bad_body", "cannot read the request body")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if emptyOK {
			return nil
		}
		return badRequest("bad_body", "the request body is empty: send a JSON object")
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "application/problem+json") {
			return &problem{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type",
				detail: "send the body as application/json"}
		}
	}
	if !utf8.Valid(b) {
		return badRequest("bad_body", "the request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("bad_body", "malformed JSON body: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("bad_body", "malformed JSON body: data after the object")
	}
	return nil
}
