package durablecli

import (
	"errors"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// A name or text given on the command line (a flag's value or an
// argument) is checked by the rule of its kind, the one the library and
// the HTTP API ask (docs/http-api.md, "What a name may be"), before
// anything connects: one that breaks it is a usage error, exit status 2.

// value is a flag or argument to check, with the rule of its kind.
type value struct {
	rule dag.Rule
	name string // "--workflow", "NAME"
	v    string
	// optional: the empty value is not checked (not given).
	optional bool
}

// opt is an optional value: empty means not given.
func opt(rule dag.Rule, name, v string) value {
	return value{rule: rule, name: name, v: v, optional: true}
}

// req is a required value.
func req(rule dag.Rule, name, v string) value { return value{rule: rule, name: name, v: v} }

// checkValues returns the usage error of the first value that breaks the
// rule of its kind, or nil.
func checkValues(vs ...value) error {
	for _, x := range vs {
		if x.optional && x.v == "" {
			continue
		}
		if err := x.rule.Check(x.name, x.v); err != nil {
			var ive *durabletype.InvalidValueError
			if errors.As(err, &ive) {
				return errors.New(ive.Field + " " + ive.Value + " " + ive.Problem + ": use " + ive.Rule)
			}
			return err
		}
	}
	return nil
}

// check reports the first value that breaks the rule of its kind: -1 to
// go on, else the exit status (2).
func (a *runsAction) check(vs ...value) int {
	if err := checkValues(vs...); err != nil {
		return a.usageErr("%v", err)
	}
	return -1
}

// invalidValue reports whether the engine refused a value the command
// line gave (a usage error, exit status 2).
func invalidValue(err error) bool { return errors.Is(err, durable.ErrInvalidValue) }
