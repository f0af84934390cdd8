package durable

import (
	"fmt"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// Names and texts a caller gives (workflow and step names, versions,
// tenants, keys, signal and schedule names, reasons) follow one rule per
// kind, the same at every edge: a call here, the HTTP API, the CLI. A
// value that breaks it (empty, too long, not valid UTF-8, holding a NUL
// or a character its kind does not allow) is refused before anything
// reaches the store, with an *InvalidValueError naming the parameter, what
// is wrong and the rule (docs/http-api.md, "What a name may be").

// ErrInvalidValue is matched by every *InvalidValueError.
var ErrInvalidValue = durabletype.ErrInvalidValue

// InvalidValueError says which value a caller gave breaks which rule; it
// matches ErrInvalidValue and the sentinel of its kind (ErrInvalidTenant,
// ErrInvalidEvent, ErrInvalidName, ErrInvalidVersion...), and the
// sentinel of the call where it has one (ErrInvalidFilter for a filter).
type InvalidValueError = durabletype.InvalidValueError

// checkFilterNames checks the workflow, version, tenant and idempotency key
// a filter names: one that breaks its rule is an error matching
// ErrInvalidFilter, never an empty page (an empty page says that a valid
// value matches no run).
func checkFilterNames(f RunFilter) error {
	for _, c := range []struct {
		rule         dag.Rule
		field, value string
	}{{dag.NameRule, "workflow", f.Workflow}, {dag.VersionRule, "version", f.Version}, {dag.TenantRule, "tenant", f.Tenant},
		{dag.IdempotencyKeyRule, "idempotency key", f.IdempotencyKey}} {
		if c.value == "" {
			continue
		}
		if err := c.rule.Check(c.field, c.value); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidFilter, err)
		}
	}
	return nil
}

// checkReplay checks the step a replay names, if any.
func checkReplay(opts ReplayOptions) error {
	if opts.FromStep == "" {
		return nil
	}
	return dag.NameRule.Check("from step", opts.FromStep)
}

// checkScheduleKey checks the tenant and name of a schedule.
func checkScheduleKey(tenant, name string) error {
	if err := dag.TenantRule.Check("tenant", tenant); err != nil {
		return err
	}
	return dag.ScheduleNameRule.Check("name", name)
}
