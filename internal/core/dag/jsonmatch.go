package dag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxJSONFilter is the most bytes a JSON value that filters runs (such as
// store.RunFilter.InputContains) may have.
const MaxJSONFilter = 16 << 10

// CheckJSONFilter checks a JSON value that filters runs: at most
// MaxJSONFilter bytes of valid UTF-8, one JSON value, with no NUL
// character in a string (PostgreSQL's jsonb refuses \u0000). Its error
// says what is wrong, for the caller to wrap.
func CheckJSONFilter(b []byte) error {
	if len(b) > MaxJSONFilter {
		return fmt.Errorf("%d bytes, at most %d", len(b), MaxJSONFilter)
	}
	if _, ok := decodeJSON(b); !ok {
		return errors.New("not one JSON value in UTF-8 without \\u0000 (for example {\"customer\":\"c-42\"})")
	}
	return nil
}

// ContainsJSON reports whether the JSON document doc contains the JSON
// value sub, by the rule of PostgreSQL's jsonb @> operator, which pgstore
// applies in SQL: an object contains another when it has each of its keys
// with a value that contains the other's (a scalar value must be equal);
// an array contains another when each element of the other is contained
// in one of its elements, in any order (a scalar element must be equal to
// one of its scalar elements); scalars contain equal scalars (numbers by
// value: 1 equals 1.0); and, at the top level only, an array contains a
// scalar that it holds. A doc that is not valid JSON (or holds \u0000)
// contains nothing.
func ContainsJSON(doc, sub []byte) bool {
	s, ok := decodeJSON(sub)
	if !ok {
		return false
	}
	v, ok := decodeJSON(doc)
	if !ok {
		return false
	}
	if !isContainer(s) {
		if arr, ok := v.([]any); ok {
			return containsScalar(arr, s)
		}
		return !isContainer(v) && scalarEqual(v, s)
	}
	return contains(v, s)
}

// contains reports whether v contains the container s.
func contains(v, s any) bool {
	switch s := s.(type) {
	case map[string]any:
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for k, sv := range s {
			vv, ok := obj[k]
			switch {
			case !ok:
				return false
			case !isContainer(sv):
				if isContainer(vv) || !scalarEqual(vv, sv) {
					return false
				}
			case !contains(vv, sv):
				return false
			}
		}
		return true
	case []any:
		arr, ok := v.([]any)
		if !ok {
			return false
		}
		for _, se := range s {
			if !isContainer(se) {
				if !containsScalar(arr, se) {
					return false
				}
				continue
			}
			found := false
			for _, ve := range arr {
				if isContainer(ve) && contains(ve, se) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	return false
}

// containsScalar reports whether arr has a scalar element equal to s.
func containsScalar(arr []any, s any) bool {
	for _, e := range arr {
		if !isContainer(e) && scalarEqual(e, s) {
			return true
		}
	}
	return false
}

func isContainer(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// scalarEqual compares two JSON scalars: of one kind and equal, numbers
// by value.
func scalarEqual(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool:
		bb, ok := b.(bool)
		return ok && a == bb
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case json.Number:
		bn, ok := b.(json.Number)
		return ok && numberEqual(a, bn)
	}
	return false
}

// maxExponent bounds the exponents compared by value (PostgreSQL's numeric
// refuses larger ones), so that no comparison builds a huge number.
const maxExponent = 20000

func numberEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	if exponent(string(a)) > maxExponent || exponent(string(b)) > maxExponent {
		return false
	}
	ra, ok1 := new(big.Rat).SetString(string(a))
	rb, ok2 := new(big.Rat).SetString(string(b))
	return ok1 && ok2 && ra.Cmp(rb) == 0
}

// exponent is the magnitude of the exponent of a JSON number (0 if none,
// or too large to read: then more than maxExponent).
func exponent(s string) int {
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	if err != nil {
		return maxExponent + 1
	}
	return max(n, -n)
}

// decodeJSON decodes one JSON value, numbers kept as written; it reports
// false for anything else, for invalid UTF-8 and for a string or key
// holding NUL, which PostgreSQL's jsonb refuses.
func decodeJSON(b []byte) (any, bool) {
	if !utf8.Valid(b) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, !holdsNUL(v)
}

func holdsNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.IndexByte(v, 0) >= 0
	case map[string]any:
		for k, e := range v {
			if strings.IndexByte(k, 0) >= 0 || holdsNUL(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if holdsNUL(e) {
				return true
			}
		}
	}
	return false
}
