package dag

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/effectivelabs/durable/durabletype"
)

// One rule per kind of value that users send (see docs/http-api.md,
// "What a name may be"): every edge (the library's calls, the HTTP API's
// paths, queries and bodies, the CLI's flags) asks the same Rule, so the
// same value gets the same answer everywhere, and no value that PostgreSQL
// would refuse (a NUL, invalid UTF-8) reaches a store.

// Rule is the syntax of one kind of value.
type Rule struct {
	kind  string
	max   int
	empty bool // the empty value is valid (free text)
	valid func(string) bool
	rule  string
	err   error // the sentinel of the kind, or nil
}

// MaxReasonLen is the longest free text a caller gives with an action: a
// cancel reason, in bytes.
const MaxReasonLen = 1000

// The rules. Each wraps the predicate the engine already applies
// (ValidName, ValidTenant...), so that a Rule and its predicate cannot
// disagree.
var (
	// NameRule: workflow and step names.
	NameRule = Rule{kind: "name", max: MaxNameLen, valid: ValidName, err: ErrInvalidName,
		rule: "1-128 bytes of letters, digits and _-.:/, starting with a letter or digit"}
	// VersionRule: versions of a workflow.
	VersionRule = Rule{kind: "version", max: MaxVersionLen, valid: ValidVersion, err: ErrInvalidVersion,
		rule: "1-64 bytes of letters, digits and _-.+, starting with a letter or digit"}
	// TenantRule: tenant IDs.
	TenantRule = Rule{kind: "tenant", max: MaxTenantLen, valid: ValidTenant, err: durabletype.ErrInvalidTenant,
		rule: "1-200 bytes of UTF-8 without control characters"}
	// WorkerRule: worker IDs.
	WorkerRule = Rule{kind: "worker id", max: MaxWorkerLen, valid: ValidWorker, err: durabletype.ErrInvalidWorker,
		rule: "1-200 bytes of UTF-8 without control characters"}
	// IdempotencyKeyRule: idempotency keys of triggers.
	IdempotencyKeyRule = Rule{kind: "idempotency key", max: MaxKeyLen, valid: ValidKey,
		rule: "1-255 bytes of UTF-8 without control characters"}
	// EventKeyRule: event keys.
	EventKeyRule = Rule{kind: "event key", max: MaxEventKeyLen, valid: ValidEventKey, err: durabletype.ErrInvalidEvent,
		rule: "1-255 bytes of UTF-8 without control characters"}
	// SignalRule: signal names.
	SignalRule = Rule{kind: "signal name", max: MaxEventKeyLen, valid: ValidEventKey, err: durabletype.ErrInvalidEvent,
		rule: "1-255 bytes of UTF-8 without control characters"}
	// ScheduleNameRule: schedule names.
	ScheduleNameRule = Rule{kind: "schedule name", max: MaxTenantLen, valid: ValidTenant, err: durabletype.ErrInvalidSchedule,
		rule: "1-200 bytes of UTF-8 without control characters"}
	// FlowKeyRule: concurrency and rate-limit keys.
	FlowKeyRule = Rule{kind: "concurrency or rate-limit key", max: MaxFlowKeyLen, valid: ValidFlowKey, err: durabletype.ErrInvalidKey,
		rule: "1-200 bytes of UTF-8 without control characters"}
	// ReasonRule: free text given with an action (a cancel reason); it may
	// be empty.
	ReasonRule = Rule{kind: "text", max: MaxReasonLen, empty: true, valid: ValidReason,
		rule: "at most 1000 bytes of UTF-8 without control characters but tab and newline"}
)

// ValidReason reports whether s is valid free text (ReasonRule): at most
// MaxReasonLen bytes of valid UTF-8 without control characters but tab,
// newline and carriage return.
func ValidReason(s string) bool {
	if len(s) > MaxReasonLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
			return false
		}
	}
	return true
}

// Kind names the kind of value of the rule, as errors show it.
func (r Rule) Kind() string { return r.kind }

// Valid reports whether s follows the rule.
func (r Rule) Valid(s string) bool { return (r.empty && s == "") || r.valid(s) }

// Check returns nil when s follows the rule, else a
// *durabletype.InvalidValueError naming field (the value as the caller
// gave it: a parameter, a flag), what is wrong and the rule; it matches
// durabletype.ErrInvalidValue and the sentinel of the kind.
func (r Rule) Check(field, s string) error {
	if r.Valid(s) {
		return nil
	}
	return &durabletype.InvalidValueError{Field: field, Kind: r.kind, Value: Quote(s), Problem: r.problem(s),
		Rule: r.rule, Err: r.err}
}

// problem says why s, which breaks the rule, does.
func (r Rule) problem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > r.max:
		return "is " + strconv.Itoa(len(s)) + " bytes long"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	for i, c := range s {
		switch {
		case c == 0:
			return "holds a NUL byte"
		case c < 0x20 || c == 0x7f:
			if r.valid(string(c)) {
				continue // tab and newline in free text
			}
			return fmt.Sprintf("holds the control character %U", c)
		case r.valid(string(c)):
		case i == 0 && r.valid("a"+string(c)):
			return "starts with " + strconv.QuoteRune(c)
		case !r.valid("a" + string(c)):
			return "holds " + strconv.QuoteRune(c)
		}
	}
	return "breaks the rule"
}
