package httpapi

import (
	"errors"
	"net/http"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// Every name and text a request sends, in its path, its query or its
// body, is checked at the edge by the rule of its kind (internal/core/dag's
// Rule, which the library and the CLI ask too): one that breaks it is a
// 400 whose problem names the parameter ("parameter") and says what is
// wrong, before anything reaches the engine. A valid value that matches
// nothing is not an error: a filter gives an empty list, a path a 404.

// kindCodes are the problem codes of the values that break the rule of
// their kind, by kind: one code for a kind wherever it is sent.
var kindCodes = map[string]string{
	dag.NameRule.Kind():           "invalid_name",
	dag.VersionRule.Kind():        "invalid_version",
	dag.TenantRule.Kind():         "invalid_tenant",
	dag.IdempotencyKeyRule.Kind(): "invalid_trigger",
	dag.EventKeyRule.Kind():       "invalid_event",
	dag.SignalRule.Kind():         "invalid_event",
	dag.ScheduleNameRule.Kind():   "invalid_schedule",
	dag.FlowKeyRule.Kind():        "invalid_key",
	dag.ReasonRule.Kind():         "invalid_text",
	dag.WorkerRule.Kind():         "invalid_worker",
}

// invalid is the problem of a value that breaks the rule of its kind.
func invalid(e *durabletype.InvalidValueError) *problem {
	code := kindCodes[e.Kind]
	if code == "" {
		code = "invalid_value"
	}
	return &problem{status: http.StatusBadRequest, code: code, param: e.Field,
		detail: e.Field + " " + e.Value + " " + e.Problem + ": use " + e.Rule, err: e}
}

// check checks the value of parameter param by rule: nil, or the problem
// (400) naming param.
func check(rule dag.Rule, param, value string) error {
	if err := rule.Check(param, value); err != nil {
		var ive *durabletype.InvalidValueError
		if errors.As(err, &ive) {
			return invalid(ive)
		}
		return err
	}
	return nil
}

// sqlStater is the error of a database that says its SQLSTATE (pgx's
// *pgconn.PgError), matched without importing the driver.
type sqlStater interface{ SQLState() string }

// badText reports whether err is a database's refusal of a text it cannot
// store: a NUL (22021, character_not_in_repertoire) or bytes that are not
// valid in its encoding (22P05, untranslatable_character). The rules
// refuse such values before they reach a store; this answers 400 rather
// than 500 for any value a rule would miss.
func badText(err error) bool {
	var s sqlStater
	if !errors.As(err, &s) {
		return false
	}
	switch s.SQLState() {
	case "22021", "22P05":
		return true
	}
	return false
}
