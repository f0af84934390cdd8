package dag

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
)

func TestCheckPayload(t *testing.T) {
	obj := &durabletype.JSONType{Type: durabletype.TypeObject, Fields: map[string]*durabletype.JSONType{
		"id":   {Type: durabletype.TypeString},
		"n":    {Type: durabletype.TypeInt, Bits: 8},
		"u":    {Type: durabletype.TypeUint, Bits: 16},
		"f":    {Type: durabletype.TypeNumber, Bits: 32},
		"ok":   {Type: durabletype.TypeBool},
		"list": {Type: durabletype.TypeArray, Items: &durabletype.JSONType{Type: durabletype.TypeInt, Bits: 64}},
		"m":    {Type: durabletype.TypeMap, Items: &durabletype.JSONType{Type: durabletype.TypeString}},
		"Ab":   {Type: durabletype.TypeString},
		"aB":   {Type: durabletype.TypeInt},
		"any":  {Type: durabletype.TypeAny},
		"odd":  {Type: "future-kind"},
	}}
	for _, c := range []struct {
		payload, err string
	}{
		{`{}`, ""},
		{`null`, ""},
		{`{"id":null,"n":null,"list":null,"m":null}`, ""},
		{`{"id":"a","n":-128,"u":65535,"f":1.5e38,"ok":true,"list":[1,2],"m":{"k":"v"},"any":[{}],"odd":1,"other":[]}`, ""},
		{`{"ID":"case-insensitive"}`, ""},
		{`{"ID":1}`, `at .ID: the number 1, expected a string`},
		{`{"ab":1}`, ""}, // two fields fold to it: not checked
		{`{"Ab":1}`, `at .Ab: the number 1, expected a string`},
		{`{"n":128}`, `at .n: the number 128, expected an integer (8 bits)`},
		{`{"n":1.0}`, `at .n: the number 1.0, expected an integer (8 bits)`},
		{`{"u":-1}`, `at .u: the number -1, expected an unsigned integer (16 bits)`},
		{`{"f":1e39}`, `at .f: the number 1e39, expected a number`},
		{`{"ok":"true"}`, `at .ok: a string, expected a boolean`},
		{`{"list":[1,"2"]}`, `at .list[1]: a string, expected an integer (64 bits)`},
		{`{"list":{}}`, `at .list: an object, expected an array`},
		{`{"m":{"a b":1}}`, `at .m."a b": the number 1, expected a string`},
		{`[]`, `at the top: an array, expected an object`},
		{`{"id":`, `the payload is not JSON`},
		{`{} {}`, `the payload is not one JSON value`},
	} {
		err := CheckPayload(obj, []byte(c.payload))
		if c.err == "" {
			require.NoError(t, err, c.payload)
		} else {
			require.EqualError(t, err, c.err, c.payload)
		}
	}
	require.NoError(t, CheckPayload(nil, []byte(`{"x":`)), "no description: nothing checked")
	require.NoError(t, CheckPayload(&durabletype.JSONType{Type: durabletype.TypeAny}, []byte(`{"x":`)))
}
