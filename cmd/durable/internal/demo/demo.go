// Package demo defines the order-processing workflow of the design seeds,
// used by `durable demo` and served by `durable worker`:
//
//	validate ─┬─ charge ─┬─ fraud-window (durable sleep) ─┬─ ship ─┬─ finalize
//	          │          └─ prepare-shipment ──────────────┘        │
//	          └─ reject ────────────────────────────────────────────┘
//
// charge runs only for a valid order and reject only for an invalid one
// (complementary skip conditions); finalize merges whichever branch ran. The
// payment gateway times out on charge's first attempt, so the demo shows a
// durable retry too.
package demo

import (
	"errors"
	"fmt"
	"time"

	"github.com/effectivelabs/durable"
)

// WorkflowName is the name the workflow is registered under.
const WorkflowName = "order-processing"

// Order is the workflow's input.
type Order struct {
	ID       string   `json:"id"`
	Customer string   `json:"customer"`
	Cents    int      `json:"cents"`
	Items    []string `json:"items"`
}

// Validation is the output of validate.
type Validation struct {
	Valid  bool   `json:"valid"`
	Reason string `json:"reason,omitempty"`
}

// Receipt is the output of charge.
type Receipt struct {
	ChargeID string `json:"charge_id"`
	Cents    int    `json:"cents"`
}

// Parcel is the output of prepare-shipment.
type Parcel struct {
	Carrier  string `json:"carrier"`
	Tracking string `json:"tracking"`
}

// Flow is the workflow with typed references to the steps whose outputs
// callers read.
type Flow struct {
	Workflow *durable.Workflow[Order]
	Validate *durable.StepRef[Validation]
	Charge   *durable.StepRef[Receipt]
	Reject   *durable.StepRef[string]
	Ship     *durable.StepRef[string]
	Finalize *durable.StepRef[string]
}

// ErrGatewayTimeout is the error of charge's first attempt.
var ErrGatewayTimeout = errors.New("payment gateway timeout")

// New defines the workflow with the given fraud window (the durable sleep
// between charging and shipping). onFailure, if not nil, is called by the
// workflow's on-failure handler.
func New(fraudWindow time.Duration, onFailure func(Order, durable.Failure)) *Flow {
	wf := durable.NewWorkflow[Order](WorkflowName)
	f := &Flow{Workflow: wf}
	f.Validate = durable.Step(wf, "validate", func(ctx durable.Context, o Order) (Validation, error) {
		switch {
		case o.Cents <= 0:
			return Validation{Reason: "amount must be positive"}, nil
		case len(o.Items) == 0:
			return Validation{Reason: "no items"}, nil
		}
		return Validation{Valid: true}, nil
	})
	f.Charge = durable.Step(wf, "charge", func(ctx durable.Context, o Order) (Receipt, error) {
		if ctx.Attempt() == 1 {
			return Receipt{}, ErrGatewayTimeout
		}
		return Receipt{ChargeID: "ch_" + o.ID, Cents: o.Cents}, nil
	},
		durable.After(f.Validate),
		durable.SkipIf(f.Validate, func(v Validation) bool { return !v.Valid }),
		durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 200 * time.Millisecond}),
	)
	f.Reject = durable.Step(wf, "reject", func(ctx durable.Context, o Order) (string, error) {
		v, _ := f.Validate.Output(ctx)
		return fmt.Sprintf("order %s rejected: %s", o.ID, v.Reason), nil
	}, durable.After(f.Validate), durable.SkipIf(f.Validate, func(v Validation) bool { return v.Valid }))
	window := durable.Sleep(wf, "fraud-window", fraudWindow, durable.After(f.Charge))
	parcel := durable.Step(wf, "prepare-shipment", func(ctx durable.Context, o Order) (Parcel, error) {
		return Parcel{Carrier: "ACME", Tracking: "TRK-" + o.ID}, nil
	}, durable.After(f.Charge))
	f.Ship = durable.Step(wf, "ship", func(ctx durable.Context, o Order) (string, error) {
		p, _ := parcel.Output(ctx)
		return fmt.Sprintf("shipped by %s, tracking %s", p.Carrier, p.Tracking), nil
	}, durable.After(window, parcel))
	f.Finalize = durable.Step(wf, "finalize", func(ctx durable.Context, o Order) (string, error) {
		if s, ok := f.Ship.Output(ctx); ok {
			return "done: " + s, nil
		}
		if r, ok := f.Reject.Output(ctx); ok {
			return "done: " + r, nil
		}
		return "", durable.Terminal(errors.New("neither branch ran"))
	}, durable.After(f.Ship, f.Reject))
	wf.OnFailure(func(ctx durable.Context, o Order, fail durable.Failure) error {
		if onFailure != nil {
			onFailure(o, fail)
		}
		return nil
	})
	return f
}
