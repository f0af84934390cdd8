package durable

import (
	"cmp"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The JSON shape of a type, as a fingerprint covers it: what
// encoding/json writes for values of the type and reads back into it,
// and nothing of how Go names it.
//
//   - Go type names and package paths are not covered: a type renamed or
//     moved to another package has the same shape.
//   - A struct is the set of its JSON fields as encoding/json finds them
//     (exported fields, a field's JSON name from its tag or else its Go
//     name, "-" left out, the fields of embedded structs promoted by the
//     same rules of depth and tags), sorted by name: the order of the
//     fields is not covered, nor the options omitempty and omitzero
//     (they change what is written, not what can be read back); the
//     option string is.
//   - Numbers are int, uint or float, whatever their size; a pointer has
//     the shape of what it points to; []byte is bytes (base64); an
//     interface is any.
//   - A type that encodes itself (json.Marshaler or Unmarshaler) is
//     custom, with the kind of its Go type; one that encodes itself as
//     text only (encoding.TextMarshaler or TextUnmarshaler) is text, a
//     JSON string. Its format is its own to keep compatible.
//   - A recursive type refers back to itself by depth.

// jsonShape describes the JSON shape of t.
func jsonShape(t reflect.Type) string {
	var b strings.Builder
	writeJSONShape(&b, t, nil)
	return b.String()
}

// writeJSONShape writes the JSON shape of t; stack holds the named types
// being described, outermost first, for recursive ones.
func writeJSONShape(b *strings.Builder, t reflect.Type, stack []reflect.Type) {
	if t == nil {
		b.WriteString("none")
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() != "" {
		if i := slices.Index(stack, t); i >= 0 {
			b.WriteString("^" + strconv.Itoa(len(stack)-i))
			return
		}
		stack = append(stack, t)
	}
	if encodesItself(t) {
		if marshalsJSON(t) {
			b.WriteString("custom(" + kindClass(t.Kind()) + ")")
		} else {
			b.WriteString("text")
		}
		return
	}
	switch k := t.Kind(); k {
	case reflect.Slice:
		if bytesOf(t) {
			b.WriteString("bytes")
			return
		}
		b.WriteString("[]")
		writeJSONShape(b, t.Elem(), stack)
	case reflect.Array:
		b.WriteString("[" + strconv.Itoa(t.Len()) + "]")
		writeJSONShape(b, t.Elem(), stack)
	case reflect.Map:
		key := kindClass(t.Key().Kind())
		if t.Key().Kind() != reflect.String && encodesItself(t.Key()) {
			key = "text"
		}
		b.WriteString("map[" + key + "]")
		writeJSONShape(b, t.Elem(), stack)
	case reflect.Struct:
		b.WriteString("{")
		fields := jsonFields(t)
		slices.SortFunc(fields, func(a, b jsonField) int { return cmp.Compare(a.name, b.name) })
		for i, f := range fields {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(strconv.Quote(f.name) + ":")
			if f.quoted && quotable(f.typ) {
				b.WriteString("string(")
				writeJSONShape(b, f.typ, stack)
				b.WriteString(")")
			} else {
				writeJSONShape(b, f.typ, stack)
			}
		}
		b.WriteString("}")
	default:
		b.WriteString(kindClass(k))
	}
}

// kindClass is how a JSON shape names a kind: numbers by class, not size.
func kindClass(k reflect.Kind) string {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "int"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "uint"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.Interface:
		return "any"
	}
	return k.String()
}

// marshalsJSON reports whether values of t (or *t) encode or decode
// themselves in JSON.
func marshalsJSON(t reflect.Type) bool {
	for _, x := range []reflect.Type{t, reflect.PointerTo(t)} {
		if x.Implements(jsonMarshaler) || x.Implements(jsonUnmarshaler) {
			return true
		}
	}
	return false
}

// bytesOf reports whether encoding/json writes the slice type t as a
// base64 string: a slice of bytes that do not encode themselves.
func bytesOf(t reflect.Type) bool {
	e := t.Elem()
	return e.Kind() == reflect.Uint8 && !encodesItself(e)
}

// quotable reports whether the option string applies to a field of type
// t: a boolean, a number or a string (or a pointer to one).
func quotable(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}
