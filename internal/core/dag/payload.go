package dag

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/effectivelabs/durable/durabletype"
)

// Payload checks: a step waiting for an event or a signal receives a
// payload only if it can be read as the type the step awaits, as its
// shape describes it (durabletype.WaitSpec.Payload). The check is the
// core's, applied in the transition that delivers, so every store refuses
// the same payloads; it is lenient (see durabletype.JSONType).

// CheckPayload reports why payload, JSON text, cannot be read as type t;
// nil when it can (or t is nil: nothing to check).
func CheckPayload(t *durabletype.JSONType, payload []byte) error {
	if t == nil || t.Type == durabletype.TypeAny || t.Type == "" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return errors.New("the payload is not JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("the payload is not one JSON value")
	}
	return fitsType(t, v, "")
}

// fitsType reports why v, a JSON value decoded with UseNumber, does not fit t.
func fitsType(t *durabletype.JSONType, v any, path string) error {
	if t == nil || v == nil {
		return nil // null fits every type: encoding/json ignores it
	}
	bad := func() error {
		at := path
		if at == "" {
			at = "the top"
		}
		return fmt.Errorf("at %s: %s, expected %s", at, jsonKind(v), expected(t))
	}
	switch t.Type {
	case durabletype.TypeBool:
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case durabletype.TypeString:
		if _, ok := v.(string); !ok {
			return bad()
		}
	case durabletype.TypeNumber, durabletype.TypeInt, durabletype.TypeUint:
		n, ok := v.(json.Number)
		if !ok {
			return bad()
		}
		bits := t.Bits
		if bits <= 0 || bits > 64 {
			bits = 64
		}
		var err error
		switch t.Type {
		case durabletype.TypeNumber:
			if bits != 32 {
				bits = 64
			}
			_, err = strconv.ParseFloat(n.String(), bits)
		case durabletype.TypeInt:
			_, err = strconv.ParseInt(n.String(), 10, bits)
		default:
			_, err = strconv.ParseUint(n.String(), 10, bits)
		}
		if err != nil {
			return bad()
		}
	case durabletype.TypeArray:
		a, ok := v.([]any)
		if !ok {
			return bad()
		}
		for k, x := range a {
			if err := fitsType(t.Items, x, path+"["+strconv.Itoa(k)+"]"); err != nil {
				return err
			}
		}
	case durabletype.TypeMap:
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		for k, x := range m {
			if err := fitsType(t.Items, x, path+"."+keyPath(k)); err != nil {
				return err
			}
		}
	case durabletype.TypeObject:
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		for k, x := range m {
			f := field(t.Fields, k)
			if f == nil {
				continue
			}
			if err := fitsType(f, x, path+"."+keyPath(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// field returns the type of the field key matches as encoding/json matches
// it: by its exact name, or else ignoring case; nil (not checked) when no
// field or several match.
func field(fields map[string]*durabletype.JSONType, key string) *durabletype.JSONType {
	if f, ok := fields[key]; ok {
		return f
	}
	var found *durabletype.JSONType
	n := 0
	for name, f := range fields {
		if strings.EqualFold(name, key) {
			found = f
			n++
		}
	}
	if n != 1 {
		return nil
	}
	return found
}

func keyPath(k string) string {
	if k != "" && !strings.ContainsAny(k, ".[]\"' ") && len(k) <= 64 {
		return k
	}
	if len(k) > 64 {
		k = k[:64] + "…"
	}
	return strconv.Quote(k)
}

// jsonKind names the kind of a JSON value.
func jsonKind(v any) string {
	switch x := v.(type) {
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		s := x.String()
		if len(s) > 24 {
			s = s[:24] + "…"
		}
		return "the number " + s
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a value"
}

// expected names what t expects, briefly.
func expected(t *durabletype.JSONType) string {
	var what string
	switch t.Type {
	case durabletype.TypeBool:
		what = "a boolean"
	case durabletype.TypeString:
		what = "a string"
	case durabletype.TypeNumber:
		what = "a number"
	case durabletype.TypeInt:
		what = fmt.Sprintf("an integer (%d bits)", cmp.Or(t.Bits, 64))
	case durabletype.TypeUint:
		what = fmt.Sprintf("an unsigned integer (%d bits)", cmp.Or(t.Bits, 64))
	case durabletype.TypeArray:
		what = "an array"
	case durabletype.TypeObject, durabletype.TypeMap:
		what = "an object"
	default:
		what = t.Type
	}
	if t.Go != "" {
		what += " (" + t.Go + ")"
	}
	return what
}
