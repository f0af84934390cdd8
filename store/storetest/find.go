package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// testFindRuns: runs found by the caller's own keys, the idempotency key
// (exact) and a JSON value their input contains (the rule of jsonb @>),
// alone, with the other filters, through the runs in flight and across
// pages.
func testFindRuns(t *testing.T, s store.Store) {
	type spec struct {
		name, wf, tenant, key string
		input                 []byte
	}
	specs := []spec{
		{name: "a", input: []byte(`{"customer":"c-42","total":10,"lines":[{"sku":"x","qty":1},{"sku":"y","qty":2}],"tags":["vip","eu"]}`)},
		{name: "b", input: []byte(`{"total":10.0, "customer":"c-42", "paid":true}`)},
		{name: "c", input: []byte(`{"customer":"c-7","total":3,"note":null}`)},
		{name: "d", input: []byte(`["vip","eu"]`)},
		{name: "e", input: []byte(`"vip"`)},
		{name: "f", input: []byte(`42`)},
		{name: "g", input: []byte{0xff, 0xfe, '{', '}'}},        // not JSON (another codec)
		{name: "h", input: []byte(`{"customer":"c-42\u0000"}`)}, // jsonb refuses \u0000
		{name: "k1", key: "inv-1", input: []byte(`{"customer":"c-1"}`)},
		{name: "k2", key: "inv-1", wf: "other", input: []byte(`{"customer":"c-1"}`)},
		{name: "k3", key: "inv-1", tenant: "t1", input: []byte(`{"customer":"c-2"}`)},
		{name: "k4", key: "inv-10", input: []byte(`{"customer":"c-1"}`)},
		{name: "k5", key: "INV-1", input: []byte(`{"customer":"c-1"}`)},
	}
	byName := map[string]uuid.UUID{}
	for i, sp := range specs {
		wf, tenant := sp.wf, sp.tenant
		if wf == "" {
			wf = "wf"
		}
		if tenant == "" {
			tenant = "t0"
		}
		r := newRun(wf, tenant, shape(step("a")))
		r.Input, r.IdempotencyKey = sp.input, sp.key
		create(t, s, at(time.Duration(i)*time.Second), r)
		byName[sp.name] = r.ID
	}
	// Settle one, so that the filters meet a status too.
	c := claim(t, s, T0, 100, "wf", "other")
	for _, x := range c {
		if x.RunID == byName["k1"] {
			mustApply(t, s, at(time.Minute), complete(x, `1`))
		} else {
			mustApply(t, s, T0, store.Outcome{Task: x.Ref(), Kind: store.OutcomeRelease})
		}
	}
	want := func(names ...string) []uuid.UUID {
		// Newest first: the specs were created in order.
		out := []uuid.UUID{}
		for i := len(specs) - 1; i >= 0; i-- {
			if slices.Contains(names, specs[i].name) {
				out = append(out, byName[specs[i].name])
			}
		}
		return out
	}
	running := []durabletype.RunStatus{durabletype.RunRunning}
	cases := []struct {
		f    store.RunFilter
		want []uuid.UUID
	}{
		{store.RunFilter{IdempotencyKey: "inv-1"}, want("k1", "k2", "k3")},
		{store.RunFilter{IdempotencyKey: "inv-1", Workflow: "wf", Tenant: "t0"}, want("k1")},
		{store.RunFilter{IdempotencyKey: "inv-1", Tenant: "t1"}, want("k3")},
		{store.RunFilter{IdempotencyKey: "inv-1", Statuses: running}, want("k2", "k3")},
		{store.RunFilter{IdempotencyKey: "inv-1", Statuses: []durabletype.RunStatus{durabletype.RunCompleted}}, want("k1")},
		{store.RunFilter{IdempotencyKey: "inv"}, want()},
		{store.RunFilter{IdempotencyKey: "INV-10"}, want()},
		{store.RunFilter{InputContains: []byte(`{"customer":"c-42"}`)}, want("a", "b")},
		{store.RunFilter{InputContains: []byte(`{"total":10}`)}, want("a", "b")},
		{store.RunFilter{InputContains: []byte(`{"total":1e1}`)}, want("a", "b")},
		{store.RunFilter{InputContains: []byte(`{"total":"10"}`)}, want()},
		{store.RunFilter{InputContains: []byte(`{"lines":[{"sku":"y"}]}`)}, want("a")},
		{store.RunFilter{InputContains: []byte(`{"lines":[{"sku":"y","qty":1}]}`)}, want()},
		{store.RunFilter{InputContains: []byte(`{"lines":{"sku":"x"}}`)}, want()},
		{store.RunFilter{InputContains: []byte(`{"tags":["eu"]}`)}, want("a")},
		{store.RunFilter{InputContains: []byte(`{"tags":["eu","vip","eu"]}`)}, want("a")},
		{store.RunFilter{InputContains: []byte(`{"tags":"vip"}`)}, want()}, // a nested array holds no scalar
		{store.RunFilter{InputContains: []byte(`"vip"`)}, want("d", "e")},  // at the top level it does
		{store.RunFilter{InputContains: []byte(`["vip"]`)}, want("d")},
		{store.RunFilter{InputContains: []byte(`[]`)}, want("d")},
		{store.RunFilter{InputContains: []byte(`{}`)}, want("a", "b", "c", "k1", "k2", "k3", "k4", "k5")},
		{store.RunFilter{InputContains: []byte(`{"note":null}`)}, want("c")},
		{store.RunFilter{InputContains: []byte(`{"paid":"true"}`)}, want()},
		{store.RunFilter{InputContains: []byte(`{"customer":"c-42","paid":true}`)}, want("b")},
		{store.RunFilter{InputContains: []byte(` 42 `)}, want("f")},
		{store.RunFilter{InputContains: []byte(`{"customer":"c-1"}`), Workflow: "wf"}, want("k1", "k4", "k5")},
		{store.RunFilter{InputContains: []byte(`{"customer":"c-1"}`), Statuses: running}, want("k2", "k4", "k5")},
		{store.RunFilter{InputContains: []byte(`{"customer":"c-1"}`), IdempotencyKey: "inv-1"}, want("k1", "k2")},
		{store.RunFilter{InputContains: []byte(`{"customer":"c-1"}`), CreatedAfter: at(9 * time.Second)}, want("k2", "k4", "k5")},
	}
	for i, tc := range cases {
		for _, page := range []int{1, 2, 100} {
			require.Equal(t, tc.want, ids(listAll(t, s, tc.f, page)), "filter %d (%s, key %q), page %d",
				i, tc.f.InputContains, tc.f.IdempotencyKey, page)
		}
	}
}
