package durabletype

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// Payload errors.
var (
	// ErrPayloadRefused: a step waiting for an event or a signal refused
	// its payload, which cannot be read as the type the step awaits; the
	// step keeps waiting. It is matched by *RefusedError.
	ErrPayloadRefused = errors.New("durable: payload refused")
	// ErrPayloadTooLarge: an input, an output, an event's or a signal's
	// payload is larger than its limit (see docs/semantics.md, "Limits").
	ErrPayloadTooLarge = errors.New("durable: payload too large")
)

// JSONType describes the JSON values that the type a step awaits (the
// payload type of WaitForEvent and WaitForSignal) decodes from, derived
// from the Go type by the rules of encoding/json. A store checks the
// payload of an event or a signal against it before a waiting step
// receives it (WaitSpec.Payload). It is lenient: where unsure it accepts
// (TypeAny), so that it never refuses what the decoder would accept; a
// JSON null fits every type, as encoding/json ignores it.
type JSONType struct {
	// Type is one of the JSONType kinds: TypeAny, TypeBool, TypeString,
	// TypeNumber, TypeInt, TypeUint, TypeArray, TypeObject or TypeMap. An
	// unknown kind accepts anything.
	Type string `json:"type"`
	// Go names the Go type, when it has a name; for messages.
	Go string `json:"go,omitempty"`
	// Bits is the size of a number: 32 or 64 for TypeNumber, 8 to 64 for
	// TypeInt and TypeUint.
	Bits int `json:"bits,omitempty"`
	// Items describes the elements of a TypeArray and the values of a
	// TypeMap; nil accepts anything.
	Items *JSONType `json:"items,omitempty"`
	// Fields describes the fields of a TypeObject by their JSON names,
	// which a payload's keys match as encoding/json matches them (exactly,
	// or else ignoring case). Keys of no field are ignored; a missing field
	// is fine.
	Fields map[string]*JSONType `json:"fields,omitempty"`
}

// Kinds of JSONType.
const (
	TypeAny    = "any"
	TypeBool   = "boolean"
	TypeString = "string"
	TypeNumber = "number"
	TypeInt    = "integer"
	TypeUint   = "unsigned"
	TypeArray  = "array"
	TypeObject = "object"
	TypeMap    = "map"
)

// String describes the type in a line, as messages show it: for example
// {"amount": integer, "reference": string}. Deep or long types are cut
// with "…".
func (t *JSONType) String() string {
	var b strings.Builder
	t.write(&b, 4)
	return b.String()
}

func (t *JSONType) write(b *strings.Builder, depth int) {
	if t == nil {
		b.WriteString(TypeAny)
		return
	}
	switch t.Type {
	case TypeArray:
		if depth == 0 {
			b.WriteString("[…]")
			return
		}
		b.WriteString("[")
		t.Items.write(b, depth-1)
		b.WriteString("]")
	case TypeMap:
		if depth == 0 {
			b.WriteString("{…}")
			return
		}
		b.WriteString("{string: ")
		t.Items.write(b, depth-1)
		b.WriteString("}")
	case TypeObject:
		if depth == 0 || b.Len() > 400 {
			b.WriteString("{…}")
			return
		}
		names := make([]string, 0, len(t.Fields))
		for n := range t.Fields {
			names = append(names, n)
		}
		slices.Sort(names)
		b.WriteString("{")
		for k, n := range names {
			if k > 0 {
				b.WriteString(", ")
			}
			if b.Len() > 400 {
				b.WriteString("…")
				break
			}
			fmt.Fprintf(b, "%q: ", n)
			t.Fields[n].write(b, depth-1)
		}
		b.WriteString("}")
	case TypeInt, TypeUint, TypeNumber:
		b.WriteString(t.Type)
		if t.Bits != 0 && t.Bits != 64 {
			fmt.Fprintf(b, "(%d bits)", t.Bits)
		}
	case "":
		b.WriteString(TypeAny)
	default:
		b.WriteString(t.Type)
	}
}

// Refusal is a step waiting for an event or a signal that refused its
// payload: it cannot be read as the type the step awaits. The step keeps
// waiting (for a payload that fits, or its timeout).
type Refusal struct {
	// Event is the position of the event in the call that sent it
	// (SendEvents); 0 for a signal.
	Event int `json:"event"`
	// RunID and Step name the waiting step.
	RunID uuid.UUID `json:"run_id"`
	Step  string    `json:"step"`
	// Reason says where the payload does not fit, e.g. `at .reference: a
	// number, expected a string`.
	Reason string `json:"reason"`
	// Expected describes the type the step awaits.
	Expected *JSONType `json:"expected,omitempty"`
}

// String describes the refusal in a line.
func (r *Refusal) String() string {
	return fmt.Sprintf("run %s step %q refused the payload: %s (expected %s)", r.RunID, r.Step, r.Reason, r.Expected)
}

// RefusedError is the error of sending an event or a signal that some
// waiting steps refused (ErrPayloadRefused): it lists them. The event or
// the signal was sent all the same, and the steps that could read it
// received it; the steps that refused it keep waiting.
type RefusedError struct {
	// Delivered counts, per event (one for a signal), the steps that
	// received it.
	Delivered []int
	Refusals  []Refusal
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString(ErrPayloadRefused.Error())
	b.WriteString(": ")
	for k := range e.Refusals {
		if k > 0 {
			b.WriteString("; ")
		}
		if k == 3 {
			fmt.Fprintf(&b, "and %d more", len(e.Refusals)-k)
			break
		}
		b.WriteString(e.Refusals[k].String())
	}
	return b.String()
}

// Unwrap makes the error match ErrPayloadRefused.
func (e *RefusedError) Unwrap() error { return ErrPayloadRefused }
