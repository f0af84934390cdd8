package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/memstore"
)

// nameSeeds are the values every fuzz target of the API starts from:
// bytes PostgreSQL refuses (NUL, invalid UTF-8), a huge value, the empty
// one, path tricks, escapes, and names that exist here.
var nameSeeds = []string{"", "a\x00b", "\x00", "\xff", "%ff", "%00", "..", ".", "%", "a/b", "a@b", "-x",
	"greet", "a", "b", "*", "1", "v1", "approve", strings.Repeat("n", 129), strings.Repeat("x", 1<<20),
	"é", "<script>", "a\tb", "\u2028", " "}

// probe is one request that sends a value of one kind: the problem of a
// value that breaks the rule of its kind is a 400 naming param.
type probe struct {
	rule          dag.Rule
	param         string
	method, path  string
	body          any
	tenant        string
	segment, huge bool // in a path segment; in a body (which may exceed the body limit)
	emptyOK       bool // the empty value means none (no filter, step, key; the caller's tenant)
}

// probes are the requests sending s to the API of en: in paths, queries
// and bodies, as an operator ("*") and as tenant "a" acting on tenant
// "b"'s run (other). Triggers name a workflow not registered ("nope"),
// checked after the values: the fuzzing starts no runs.
func probes(s string, other uuid.UUID) []probe {
	seg, q := url.PathEscape(s), url.QueryEscape(s)
	run := "/api/v1/runs/" + other.String()
	var out []probe
	for _, tenant := range []string{"*", "a"} {
		out = append(out,
			probe{rule: dag.NameRule, param: "name", method: "GET", path: "/api/v1/workflows/" + seg, tenant: tenant, segment: true},
			probe{rule: dag.NameRule, param: "name", method: "POST", path: "/api/v1/workflows/" + seg + "/runs", segment: true,
				body: map[string]any{"tenant": "a", "input": map[string]any{"name": "x"}, "idempotency_key": "fuzz"}, tenant: tenant},
			probe{rule: dag.NameRule, param: "name", method: "POST", path: "/api/v1/workflows/" + seg + "/upgrade", segment: true,
				body: map[string]any{"from": "1", "to": "2"}, tenant: tenant},
			probe{rule: dag.NameRule, param: "workflow", emptyOK: true, method: "GET", path: "/api/v1/runs?workflow=" + q, tenant: tenant},
			probe{rule: dag.VersionRule, param: "version", emptyOK: true, method: "GET", path: "/api/v1/runs?version=" + q, tenant: tenant},
			probe{rule: dag.TenantRule, param: "tenant", emptyOK: true, method: "GET", path: "/api/v1/runs?tenant=" + q, tenant: tenant},
			probe{rule: dag.ReasonRule, param: "reason", method: "POST", path: run + "/cancel", body: map[string]any{"reason": s},
				tenant: "a", huge: true},
			probe{rule: dag.NameRule, param: "from_step", emptyOK: true, method: "POST", path: run + "/replay", body: map[string]any{"from_step": s},
				tenant: "a", huge: true},
			probe{rule: dag.SignalRule, param: "name", method: "POST", path: run + "/signals", body: map[string]any{"name": s},
				tenant: "a", huge: true},
			probe{rule: dag.EventKeyRule, param: "key", method: "POST", path: "/api/v1/events",
				body: map[string]any{"tenant": "a", "key": s}, tenant: tenant, huge: true},
			probe{rule: dag.TenantRule, param: "tenant", emptyOK: true, method: "POST", path: "/api/v1/events",
				body: map[string]any{"tenant": s, "key": "k"}, tenant: tenant, huge: true},
			probe{rule: dag.TenantRule, param: "tenant", emptyOK: true, method: "POST", path: "/api/v1/workflows/nope/runs",
				body: map[string]any{"tenant": s, "input": map[string]any{"name": "x"}, "idempotency_key": "fuzz"}, tenant: tenant, huge: true},
			probe{rule: dag.IdempotencyKeyRule, param: "idempotency_key", emptyOK: true, method: "POST", path: "/api/v1/workflows/nope/runs",
				body: map[string]any{"tenant": "a", "input": map[string]any{"name": "x"}, "idempotency_key": s}, tenant: "a", huge: true},
			// No rule of names: run IDs, cursors and parents have their own
			// syntax; the answer is never a 5xx.
			probe{method: "GET", path: "/api/v1/runs/" + seg, tenant: tenant, segment: true},
			probe{method: "GET", path: "/api/v1/runs/" + seg + "/events", tenant: tenant, segment: true},
			probe{method: "GET", path: "/api/v1/runs?cursor=" + q, tenant: tenant},
			probe{method: "GET", path: "/api/v1/runs?parent=" + q, tenant: tenant},
			probe{method: "GET", path: "/api/v1/stats?window=" + q, tenant: tenant},
			probe{method: "GET", path: "/api/v1/workers?all=" + q, tenant: tenant},
			probe{method: "GET", path: "/api/v1/runs?" + q + "=1", tenant: tenant},
		)
	}
	return out
}

// checkValue sends s to every endpoint of en that takes a value and
// checks the answers: never a 5xx; a value that breaks the rule of its
// kind is a 400 naming the parameter at every endpoint that takes that
// kind, a valid one never is.
func checkValue(t *testing.T, en *env, other uuid.UUID, s string) {
	// A segment that makes the path unclean (empty, ".", "..", a "/" at
	// an end or twice) never reaches a handler: the router answers (404
	// or a redirect to the clean path).
	routed := s != "" && path.Clean("/p/"+s+"/q") == "/p/"+s+"/q"
	for _, p := range probes(s, other) {
		body := p.body
		if m, ok := body.(map[string]any); ok {
			// Marshalled as is: the JSON encoder would replace invalid
			// UTF-8 with U+FFFD, which is another value.
			body = rawJSON(m)
		}
		r := en.do(t, p.tenant, p.method, p.path, body)
		if r.status >= 500 {
			t.Fatalf("%s %.200s as %s: %d %s", p.method, p.path, p.tenant, r.status, r.body)
		}
		if p.rule.Kind() == "" || (p.segment && !routed) || (p.emptyOK && s == "") {
			continue
		}
		if p.huge && r.status == http.StatusRequestEntityTooLarge {
			continue // the body limit answers first
		}
		var pb struct {
			Code      string `json:"code"`
			Parameter string `json:"parameter"`
		}
		_ = json.Unmarshal(r.body, &pb)
		if p.huge && !utf8.ValidString(s) {
			// A body that is not UTF-8 is refused whole, before its fields
			// are read (JSON would read the bytes as U+FFFD).
			if r.status != http.StatusBadRequest || pb.Code != "bad_body" {
				t.Fatalf("%s %.200s as %s: %.40q: not UTF-8 but got %d %s", p.method, p.path, p.tenant, s, r.status, r.body)
			}
			continue
		}
		switch valid := p.rule.Valid(s); {
		case !valid && (r.status != http.StatusBadRequest || pb.Parameter != p.param):
			t.Fatalf("%s %.200s as %s: %.40q breaks the rule of %s but got %d %s", p.method, p.path, p.tenant, s,
				p.rule.Kind(), r.status, r.body)
		case valid && r.status == http.StatusBadRequest && pb.Parameter == p.param:
			t.Fatalf("%s %.200s as %s: %.40q is a valid %s but got %d %s", p.method, p.path, p.tenant, s,
				p.rule.Kind(), r.status, r.body)
		}
	}
}

// rawJSON encodes a body whose string values are written byte for byte
// (invalid UTF-8 included, as a hostile client sends it), other values
// as JSON.
func rawJSON(m map[string]any) []byte {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for k, v := range m {
		if !first {
			b.WriteByte(',')
		}
		first = false
		kj, _ := json.Marshal(k)
		b.Write(kj)
		b.WriteByte(':')
		if s, ok := v.(string); ok {
			b.WriteByte('"')
			for i := 0; i < len(s); i++ {
				switch c := s[i]; {
				case c == '"' || c == '\\':
					b.WriteByte('\\')
					b.WriteByte(c)
				case c < 0x20:
					b.WriteString(`\u00`)
					b.WriteByte("0123456789abcdef"[c>>4])
					b.WriteByte("0123456789abcdef"[c&0xf])
				default:
					b.WriteByte(c)
				}
			}
			b.WriteByte('"')
			continue
		}
		vj, _ := json.Marshal(v)
		b.Write(vj)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// FuzzAPIValues: whatever name or text a request sends, in its path, its
// query or its body, on a server with full access and as a tenant acting
// on another tenant's run, the API never answers 5xx nor panics, and a
// value answers the same at every endpoint that takes its kind.
func FuzzAPIValues(f *testing.F) {
	en := newEnv(f, memstore.New())
	other := en.trigger(f, "b", "greet", map[string]any{"input": map[string]any{"name": "b"}})
	en.settle(f, other)
	for _, s := range nameSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkValue(t, en, other, s) })
}

// TestAPIValuesPostgres: the seeds on PostgreSQL, which refuses a NUL
// and invalid UTF-8 with an error of its own: none reaches it as a 500.
func TestAPIValuesPostgres(t *testing.T) {
	t.Parallel()
	en := newEnv(t, pgtestStore(t))
	other := en.trigger(t, "b", "greet", map[string]any{"input": map[string]any{"name": "b"}})
	en.settle(t, other)
	for _, s := range nameSeeds {
		checkValue(t, en, other, s)
	}
}
