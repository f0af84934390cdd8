package durablejson

import (
	"errors"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// EventSent is the answer of POST /api/v1/events and what "durable events
// send --json" prints: how many waiting steps received the event, and
// those that refused its payload.
type EventSent struct {
	Delivered int `json:"delivered"`
	// Refused are the waiting steps that refused the payload (they keep
	// waiting); absent when none did. (The API answers a refusal with a
	// problem, 422 payload_refused, that carries the same two fields.)
	Refused []durabletype.Refusal `json:"refused,omitempty"`
}

// NewEventSent builds the answer of an event delivered to n waiting steps;
// refused, when not nil, lists those that refused it.
func NewEventSent(n int, refused *durabletype.RefusedError) EventSent {
	out := EventSent{Delivered: n}
	if refused != nil {
		out.Refused = refused.Refusals
	}
	return out
}

// Upgrade is the answer of POST /api/v1/workflows/{name}/upgrade and what
// "durable runs upgrade --json" prints: what an upgrade moved (or would
// move, dry) and what it refused.
type Upgrade struct {
	Workflow string `json:"workflow"`
	From     string `json:"from"`
	To       string `json:"to"`
	// Tenant is the tenant whose runs were asked to move, "" for every
	// tenant.
	Tenant string `json:"tenant"`
	DryRun bool   `json:"dry_run"`
	// Moved and Refused are never null.
	Moved   []uuid.UUID      `json:"moved"`
	Refused []UpgradeRefusal `json:"refused"`
}

// UpgradeRefusal is a run an upgrade did not move, and why.
type UpgradeRefusal struct {
	RunID uuid.UUID `json:"run_id"`
	// Code is "incompatible" (a step the run has not finished is missing
	// or different in the version moved to, or the run failed),
	// "version_mismatch" (the run is at another version), "run_settled",
	// "run_not_found" (another tenant's run too) or "refused". Reason is
	// the same by the CLI's older names: "incompatible",
	// "version_mismatch", "settled", "not_found" or "error".
	Code   string `json:"code"`
	Reason string `json:"reason"`
	// Step is the step at fault of an incompatible run, if one is.
	Step string `json:"step,omitempty"`
	// Error says why in words.
	Error string `json:"error"`
}

// NewUpgrade builds the answer of an upgrade of workflow from version from
// to version to, of tenant's runs ("" for every tenant), whose result is
// res (nil: nothing moved).
func NewUpgrade(workflow, from, to, tenant string, dryRun bool, res *durable.UpgradeResult) *Upgrade {
	out := &Upgrade{Workflow: workflow, From: from, To: to, Tenant: tenant, DryRun: dryRun,
		Moved: []uuid.UUID{}, Refused: []UpgradeRefusal{}}
	if res != nil {
		out.Moved = append(out.Moved, res.Moved...)
		for _, r := range res.Refused {
			out.Refused = append(out.Refused, newUpgradeRefusal(r, from, tenant))
		}
	}
	return out
}

// newUpgradeRefusal says why a run did not move; another tenant's run is
// not found, as if it did not exist.
func newUpgradeRefusal(r durable.UpgradeRefusal, from, tenant string) UpgradeRefusal {
	out := UpgradeRefusal{RunID: r.RunID, Code: "refused", Reason: "error", Error: r.Err.Error()}
	var ue *dag.UpgradeError
	switch {
	case errors.Is(r.Err, durabletype.ErrRunNotFound):
		out.Code, out.Reason, out.Error = "run_not_found", "not_found", "not found"
		if tenant != "" {
			out.Error += " in tenant " + dag.Quote(tenant)
		}
	case errors.As(r.Err, &ue):
		out.Code, out.Reason, out.Step = "incompatible", "incompatible", ue.Step
		out.Error = "incompatible: " + ue.Reason
		if ue.Step != "" {
			out.Error = "incompatible: step " + dag.Quote(ue.Step) + ": " + ue.Reason
		}
	case errors.Is(r.Err, durabletype.ErrIncompatible):
		out.Code, out.Reason = "incompatible", "incompatible"
	case errors.Is(r.Err, durabletype.ErrVersionMismatch):
		out.Code, out.Reason, out.Error = "version_mismatch", "version_mismatch", "it is not at version "+dag.Quote(from)
	case errors.Is(r.Err, durabletype.ErrRunSettled):
		out.Code, out.Reason, out.Error = "run_settled", "settled", "it has settled: only runs in flight move"
	}
	return out
}
