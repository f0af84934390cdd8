package durable

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/core/dag"
)

type payInner struct {
	Code  int8   `json:"code"`
	Label string `json:"label,omitempty"`
}

type payEmbedded struct {
	Region string
	Shadow int `json:"shadow"`
}

type payText struct{ v string }

func (p *payText) UnmarshalText(b []byte) error {
	if string(b) == "bad" {
		return fmt.Errorf("bad text")
	}
	p.v = string(b)
	return nil
}

type payJSON struct{ raw string }

func (p *payJSON) UnmarshalJSON(b []byte) error { p.raw = string(b); return nil }

type payNode struct {
	Name string     `json:"name"`
	Kids []*payNode `json:"kids"`
}

type payAll struct {
	payEmbedded
	Reference string            `json:"reference"`
	Amount    int64             `json:"amount"`
	Small     uint8             `json:"small"`
	Ratio     float32           `json:"ratio"`
	Ok        *bool             `json:"ok"`
	Tags      []string          `json:"tags"`
	Fixed     [2]int            `json:"fixed"`
	Counts    map[string]int    `json:"counts"`
	ByNum     map[int]string    `json:"by_num"`
	Inner     payInner          `json:"inner"`
	PInner    *payInner         `json:"p_inner"`
	Raw       json.RawMessage   `json:"raw"`
	Any       any               `json:"any"`
	Text      payText           `json:"text"`
	Custom    payJSON           `json:"custom"`
	When      time.Time         `json:"when"`
	Quoted    int               `json:"quoted,string"`
	Bytes     []byte            `json:"bytes"`
	Node      *payNode          `json:"node"`
	Skipped   int               `json:"-"`
	Dash      int               `json:"-,"`
	Untagged  string            //nolint:revive // matched by its Go name
	hidden    int               //nolint:unused // not decoded
	Shadow    string            `json:"shadow"`
	Nested    map[string][]bool `json:"nested"`
	Num       json.Number       `json:"num"`
	Dur       time.Duration     `json:"dur"`
	Iface     fmt.Stringer      `json:"iface"`
}

// TestPayloadCheckNeverRefusesWhatDecodes checks the description of a type
// against encoding/json itself: every payload json.Unmarshal accepts, the
// check accepts; and the payloads it refuses are refused by json.Unmarshal.
func TestPayloadCheckNeverRefusesWhatDecodes(t *testing.T) {
	types := []reflect.Type{
		reflect.TypeFor[payAll](), reflect.TypeFor[int](), reflect.TypeFor[string](), reflect.TypeFor[[]payInner](),
		reflect.TypeFor[map[string]payInner](), reflect.TypeFor[*payNode](), reflect.TypeFor[bool](),
		reflect.TypeFor[float64](), reflect.TypeFor[uint16](), reflect.TypeFor[payText](),
	}
	payloads := []string{
		`null`, `1`, `-1`, `1.5`, `1e3`, `300`, `70000`, `"x"`, `"bad"`, `true`, `[]`, `{}`, `[1,2]`, `["a"]`,
		`{"reference":"r1","amount":5}`, `{"reference":5}`, `{"REFERENCE":"r"}`, `{"Reference":5}`,
		`{"amount":"5"}`, `{"amount":1.5}`, `{"amount":9223372036854775808}`, `{"small":256}`, `{"small":-1}`,
		`{"ratio":1e39}`, `{"ratio":"x"}`, `{"ok":true}`, `{"ok":"yes"}`, `{"ok":null}`,
		`{"tags":["a",null]}`, `{"tags":[1]}`, `{"tags":"a"}`, `{"fixed":[1,2,3]}`, `{"fixed":["a"]}`,
		`{"counts":{"a":1}}`, `{"counts":{"a":"1"}}`, `{"counts":[1]}`, `{"by_num":{"1":"a"}}`,
		`{"inner":{"code":127}}`, `{"inner":{"code":128}}`, `{"inner":[]}`, `{"p_inner":{"label":3}}`,
		`{"raw":[1,{"x":2}]}`, `{"any":{"y":[true]}}`, `{"text":"t"}`, `{"text":3}`, `{"text":"bad"}`,
		`{"custom":[1,2]}`, `{"when":"2024-01-01T00:00:00Z"}`, `{"when":3}`, `{"quoted":"5"}`, `{"quoted":5}`,
		`{"bytes":"aGk="}`, `{"bytes":[1,2]}`, `{"bytes":3}`, `{"node":{"name":"a","kids":[{"name":3}]}}`,
		`{"node":{"kids":[{"kids":[{"name":"x"}]}]}}`, `{"Skipped":"x"}`, `{"-":"x"}`, `{"-":3}`,
		`{"Untagged":3}`, `{"untagged":"u"}`, `{"hidden":"x"}`, `{"Region":1}`, `{"region":"eu"}`,
		`{"shadow":"s"}`, `{"shadow":1}`, `{"nested":{"a":[true,false]}}`, `{"nested":{"a":[1]}}`,
		`[{"code":1},{"code":"x"}]`, `{"a":{"code":1}}`, `{"a":{"code":[]}}`, `{"name":"n","kids":null}`,
		`{"name":1}`, `"x" 1`, `{`, `{"reference":"a","reference":"b"}`,
		`{"num":1.5}`, `{"num":"2"}`, `{"num":"x"}`, `{"num":true}`, `{"dur":5}`, `{"dur":"5s"}`, `{"iface":null}`, `{"iface":1}`,
	}
	refusedSome := 0
	for _, typ := range types {
		desc := describeJSON(typ)
		for _, p := range payloads {
			v := reflect.New(typ)
			decErr := json.Unmarshal([]byte(p), v.Interface())
			chkErr := dag.CheckPayload(desc, []byte(p))
			if decErr == nil {
				require.NoError(t, chkErr, "type %s payload %s: decodes, but the check refuses it", typ, p)
			}
			if chkErr != nil {
				refusedSome++
				require.Error(t, decErr, "type %s payload %s: the check refuses what decodes", typ, p)
			}
		}
	}
	require.Greater(t, refusedSome, 40, "the check refuses what does not fit")
}

func TestPayloadDescription(t *testing.T) {
	d := describeJSON(reflect.TypeFor[payAll]())
	require.Equal(t, "object", d.Type)
	require.Equal(t, "string", d.Fields["reference"].Type)
	require.Equal(t, "string", d.Fields["shadow"].Type, "the shallower field wins")
	require.Equal(t, "string", d.Fields["Region"].Type, "promoted from the embedded struct")
	require.Equal(t, "any", d.Fields["quoted"].Type)
	require.Equal(t, "any", d.Fields["raw"].Type)
	require.Equal(t, "any", d.Fields["when"].Type, "time.Time decodes itself")
	require.Equal(t, "string", d.Fields["text"].Type, "a TextUnmarshaler reads strings")
	require.NotContains(t, d.Fields, "Skipped")
	require.NotContains(t, d.Fields, "hidden")
	require.Contains(t, d.Fields, "-")
	err := dag.CheckPayload(d, []byte(`{"reference":5}`))
	require.ErrorContains(t, err, "at .reference: the number 5, expected a string")
	require.True(t, strings.HasPrefix(describeJSON(reflect.TypeFor[payInner]()).String(), `{"code": integer(8 bits)`))
}

// FuzzPayloadCheck: whatever the payload, the check never refuses what
// encoding/json decodes into the type.
func FuzzPayloadCheck(f *testing.F) {
	for _, s := range []string{`{"reference":"r","amount":1}`, `{"tags":["a"],"inner":{"code":1}}`, `{"counts":{"a":1}}`,
		`{"node":{"kids":[{"name":"x"}]}}`, `{"REFERENCE":1}`, `[1]`, `null`, `{"num":"1"}`} {
		f.Add([]byte(s))
	}
	desc := describeJSON(reflect.TypeFor[payAll]())
	f.Fuzz(func(t *testing.T, b []byte) {
		var v payAll
		if json.Unmarshal(b, &v) == nil {
			if err := dag.CheckPayload(desc, b); err != nil {
				t.Fatalf("payload %q decodes, but the check refuses it: %v", b, err)
			}
		}
	})
}
