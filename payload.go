package durable

import (
	"encoding/json"
	"reflect"
	"strings"
	"unicode"

	"github.com/effectivelabs/durable/durabletype"
)

// Payload checks (see docs/semantics.md, "Events"): the shape of a step
// waiting for an event or a signal records a description of the type it
// awaits (durabletype.WaitSpec.Payload), derived here from the Go type by
// the rules of encoding/json, so that a store can refuse a payload that
// would not decode, whichever process sends it. The description is lenient:
// where it cannot tell, it accepts.

// maxTypeNodes bounds the size of a type's description: past it, what is
// left accepts anything.
const maxTypeNodes = 512

// describeJSON describes the JSON values t decodes from with encoding/json.
func describeJSON(t reflect.Type) *durabletype.JSONType {
	budget := maxTypeNodes
	return describe(t, map[reflect.Type]bool{}, &budget)
}

var (
	anyType    = &durabletype.JSONType{Type: durabletype.TypeAny}
	jsonNumber = reflect.TypeFor[json.Number]()
)

func describe(t reflect.Type, stack map[reflect.Type]bool, budget *int) *durabletype.JSONType {
	if t == nil || *budget <= 0 || stack[t] {
		return anyType
	}
	*budget--
	name := ""
	if t.Name() != "" && t.PkgPath() != "" {
		name = t.String()
	}
	if t == jsonNumber {
		return &durabletype.JSONType{Type: durabletype.TypeAny, Go: name} // a number, or a string holding one
	}
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface {
		pt := reflect.PointerTo(t)
		switch {
		case t.Implements(jsonUnmarshaler) || pt.Implements(jsonUnmarshaler):
			return &durabletype.JSONType{Type: durabletype.TypeAny, Go: name}
		case t.Implements(textUnmarshaler) || pt.Implements(textUnmarshaler):
			return &durabletype.JSONType{Type: durabletype.TypeString, Go: name}
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return describe(t.Elem(), stack, budget)
	case reflect.Bool:
		return &durabletype.JSONType{Type: durabletype.TypeBool, Go: name}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &durabletype.JSONType{Type: durabletype.TypeInt, Go: name, Bits: t.Bits()}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &durabletype.JSONType{Type: durabletype.TypeUint, Go: name, Bits: t.Bits()}
	case reflect.Float32, reflect.Float64:
		return &durabletype.JSONType{Type: durabletype.TypeNumber, Go: name, Bits: t.Bits()}
	case reflect.String:
		return &durabletype.JSONType{Type: durabletype.TypeString, Go: name}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return anyType // []byte: base64 text, or an array of numbers
		}
		fallthrough
	case reflect.Array:
		stack[t] = true
		defer delete(stack, t)
		return &durabletype.JSONType{Type: durabletype.TypeArray, Go: name, Items: describe(t.Elem(), stack, budget)}
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		default:
			if !reflect.PointerTo(t.Key()).Implements(textUnmarshaler) {
				return anyType // encoding/json refuses it, whatever the payload
			}
		}
		stack[t] = true
		defer delete(stack, t)
		return &durabletype.JSONType{Type: durabletype.TypeMap, Go: name, Items: describe(t.Elem(), stack, budget)}
	case reflect.Struct:
		stack[t] = true
		defer delete(stack, t)
		out := &durabletype.JSONType{Type: durabletype.TypeObject, Go: name, Fields: map[string]*durabletype.JSONType{}}
		for _, f := range jsonFields(t) {
			if f.quoted {
				out.Fields[f.name] = anyType
			} else {
				out.Fields[f.name] = describe(f.typ, stack, budget)
			}
		}
		return out
	}
	// Interfaces accept anything; what encoding/json cannot decode into
	// (channels, functions, complex numbers) is its error, not the
	// payload's.
	return anyType
}

// jsonField is a field of a struct as encoding/json decodes it.
type jsonField struct {
	name   string
	typ    reflect.Type
	quoted bool // the ",string" option
	depth  int
	tagged bool
}

// jsonFields returns the fields encoding/json decodes into for a struct
// type: exported fields by their JSON names, the fields of embedded
// structs promoted; of several fields with one name, the shallowest
// (the tagged one among those) wins, and an undecided name is left out
// (encoding/json ignores it, so any value goes).
func jsonFields(t reflect.Type) []jsonField {
	var all []jsonField
	var walk func(t reflect.Type, depth int, seen map[reflect.Type]bool)
	walk = func(t reflect.Type, depth int, seen map[reflect.Type]bool) {
		if seen[t] || depth > 16 {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for i := range t.NumField() {
			f := t.Field(i)
			ft := f.Type
			if f.Anonymous {
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if !f.IsExported() && ft.Kind() != reflect.Struct {
					continue
				}
			} else if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if !validTagName(name) {
				name = ""
			}
			if name == "" && f.Anonymous && ft.Kind() == reflect.Struct {
				walk(ft, depth+1, seen)
				continue
			}
			quoted := false
			for _, o := range strings.Split(opts, ",") {
				if o == "string" {
					quoted = true
				}
			}
			jf := jsonField{name: name, typ: f.Type, quoted: quoted, depth: depth, tagged: name != ""}
			if jf.name == "" {
				jf.name = f.Name
			}
			all = append(all, jf)
		}
	}
	walk(t, 0, map[reflect.Type]bool{})
	byName := map[string][]jsonField{}
	var order []string
	for _, f := range all {
		if _, ok := byName[f.name]; !ok {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	var out []jsonField
	for _, n := range order {
		fs := byName[n]
		minDepth := fs[0].depth
		for _, f := range fs {
			minDepth = min(minDepth, f.depth)
		}
		var top, tagged []jsonField
		for _, f := range fs {
			if f.depth == minDepth {
				top = append(top, f)
				if f.tagged {
					tagged = append(tagged, f)
				}
			}
		}
		switch {
		case len(top) == 1:
			out = append(out, top[0])
		case len(tagged) == 1:
			out = append(out, tagged[0])
		}
	}
	return out
}

// validTagName reports whether encoding/json takes name from a tag.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !isLetterOrDigit(c):
			return false
		}
	}
	return true
}

func isLetterOrDigit(c rune) bool { return unicode.IsLetter(c) || unicode.IsDigit(c) }
