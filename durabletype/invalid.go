package durabletype

import "errors"

// ErrInvalidValue is matched by every *InvalidValueError: a name, key,
// ID or text that a caller gave breaks the rule of its kind (it is empty,
// too long, not valid UTF-8, holds a NUL or another character its kind
// does not allow). The same value gets the same answer at every edge: a
// library call's error, an HTTP 400 naming the parameter, a CLI's exit
// status 2.
var ErrInvalidValue = errors.New("durable: invalid value")

// InvalidValueError says which value a caller gave breaks which rule. It
// matches ErrInvalidValue and Err (the sentinel of its kind, such as
// ErrInvalidTenant or ErrInvalidEvent) with errors.Is.
type InvalidValueError struct {
	// Field names the value as the caller gave it: a parameter of a
	// function ("workflow", "tenant"), of an HTTP request or a flag of a
	// command line ("--reason").
	Field string
	// Kind is the kind of value whose rule it breaks: "name", "version",
	// "tenant", "idempotency key", "event key", "schedule name", "text"...
	Kind string
	// Value is the value quoted (as %q does) and cut to its first 64
	// bytes, as messages show it: a hostile value is never echoed whole.
	Value string
	// Problem says what breaks the rule: "is empty", "is not valid
	// UTF-8", "holds a NUL byte", "is longer than 128 bytes"...
	Problem string
	// Rule is the rule of the kind, such as "1-200 bytes of UTF-8 without
	// control characters".
	Rule string
	// Err is the sentinel of the kind; nil when it has none.
	Err error
}

// Error names the field, its value, what is wrong and the rule.
func (e *InvalidValueError) Error() string {
	head := ErrInvalidValue.Error()
	if e.Err != nil {
		head = e.Err.Error()
	}
	return head + ": " + e.Field + " " + e.Value + " " + e.Problem + ": use " + e.Rule
}

// Unwrap returns ErrInvalidValue and Err, for errors.Is.
func (e *InvalidValueError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidValue}
	}
	return []error{ErrInvalidValue, e.Err}
}
