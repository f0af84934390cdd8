package durablecli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/tools/clitest"
)

// listIDs runs "runs list --json" with args and returns the IDs listed.
func listIDs(t *testing.T, p *testPG, args ...string) []uuid.UUID {
	t.Helper()
	code, out, errOut := runCLI(t, p.Flags(append([]string{"runs", "list", "--json"}, args...)...)...)
	require.Equal(t, 0, code, "%v: stderr:\n%s", args, errOut)
	var page struct {
		Runs []struct {
			ID uuid.UUID `json:"id"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &page), out)
	ids := []uuid.UUID{}
	for _, r := range page.Runs {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestRunsListFindsByKeyAndInput: runs list (and runs cancel) find runs by
// their idempotency key and by a JSON value of their input; a bad value is
// a usage error.
func TestRunsListFindsByKeyAndInput(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	ctx := context.Background()
	client := p.Client(t)
	orders := newFixtures(0).Demo.Workflow
	var ids []uuid.UUID
	for i, o := range []order{{ID: "A-1", Customer: "ada", Cents: 100}, {ID: "A-2", Customer: "ada", Cents: 250}, {ID: "B-1", Customer: "bob", Cents: 100}} {
		tenant := []string{"acme", "acme", "globex"}[i]
		id, err := orders.RunNoWait(ctx, client, tenant, o, durable.WithIdempotencyKey(o.ID))
		require.NoError(t, err)
		ids = append(ids, id)
	}
	require.Equal(t, ids[1:2], listIDs(t, p, "--idempotency-key", "A-2"))
	require.Equal(t, ids[2:3], listIDs(t, p, "--idempotency-key", "B-1", "--tenant", "globex"))
	require.Empty(t, listIDs(t, p, "--idempotency-key", "B-1", "--tenant", "acme"))
	require.Equal(t, []uuid.UUID{ids[1], ids[0]}, listIDs(t, p, "--input-contains", `{"customer":"ada"}`))
	require.Equal(t, []uuid.UUID{ids[2], ids[0]}, listIDs(t, p, "--input-contains", `{"cents":100}`))
	require.Equal(t, ids[0:1], listIDs(t, p, "--input-contains", `{"cents":100}`, "--tenant", "acme"))
	require.Empty(t, listIDs(t, p, "--input-contains", `{"customer":"cy"}`))

	// The table too, and the next page's command keeps the flags.
	code, out, errOut := runCLI(t, p.Flags("runs", "list", "--input-contains", `{"customer":"ada"}`, "--limit", "1")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, ids[1].String())
	require.Contains(t, out, `--input-contains '{"customer":"ada"}'`)

	// Cancel by input.
	code, out, errOut = runCLI(t, p.Flags("runs", "cancel", "--input-contains", `{"customer":"bob"}`)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "1 run")
	res, err := client.Get(ctx, ids[2])
	require.NoError(t, err)
	require.Equal(t, "CANCELLED", string(res.Status))

	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input-contains", `{"customer":`}, "--input-contains: not one JSON value"},
		{[]string{"--input-contains", `{} {}`}, "--input-contains: not one JSON value"},
		{[]string{"--input-contains", `"` + strings.Repeat("x", 17<<10) + `"`}, "--input-contains: 17410 bytes, at most 16384"},
		{[]string{"--idempotency-key", "a\x01b"}, `--idempotency-key "a\x01b" holds the control character U+0001`},
	} {
		for _, cmd := range []string{"list", "cancel"} {
			code, out, errOut := runCLI(t, append(append([]string{"runs", cmd}, db...), tc.args...)...)
			require.Equal(t, exitUsage, code, "%s %v: stderr:\n%s", cmd, tc.args, errOut)
			require.Empty(t, out)
			require.Contains(t, errOut, tc.want, "%s %v", cmd, tc.args)
		}
	}
}

// runStdin runs the command line with stdin as the standard input.
func runStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cfg := testConfig()
	cfg.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	code := Run(context.Background(), cfg, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestTriggerInputFile: --input-file reads the input from a file or the
// standard input, even one larger than a command line takes.
func TestTriggerInputFile(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	client := p.Client(t)
	big := order{ID: "big", Customer: strings.Repeat("c", 900<<10), Cents: 1}
	js, err := json.Marshal(big)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "order.json")
	require.NoError(t, os.WriteFile(path, append(js, '\n'), 0o600))
	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "order-processing", "--input-file", path)...)
	require.Equal(t, 0, code, errOut)
	id := clitest.ParseIDs(t, out, 1)[0]
	res, err := client.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, string(js), string(res.Input), "as in the file, without its newline")

	code, out, errOut = runStdin(t, `{"id":"s-1","customer":"stdin","cents":5,"items":[]}`,
		p.Flags("trigger", "--workflow", "order-processing", "--input-file", "-")...)
	require.Equal(t, 0, code, errOut)
	res, err = client.Get(context.Background(), clitest.ParseIDs(t, out, 1)[0])
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"s-1","customer":"stdin","cents":5,"items":[]}`, string(res.Input))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input-file", filepath.Join(t.TempDir(), "none.json")}, "--input-file: open "},
		{[]string{"--input-file", path, "--input", "{}"}, "give one of --input, --input-file and --jsonl"},
		{[]string{"--input-file", path, "--jsonl", path}, "give one of --input, --input-file and --jsonl"},
	} {
		code, out, errOut := runCLI(t, p.Flags(append([]string{"trigger", "--workflow", "order-processing"}, tc.args...)...)...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	// Over the input limit: a usage error, as for --input.
	huge := `{"id":"` + strings.Repeat("h", durable.DefaultMaxInputSize) + `"}`
	require.NoError(t, os.WriteFile(path, []byte(huge), 0o600))
	code, out, errOut = runCLI(t, p.Flags("trigger", "--workflow", "order-processing", "--input-file", path)...)
	require.Equal(t, exitUsage, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, "payload too large")
}

// TestTriggerJSONL: --jsonl starts one run per line in one transaction,
// with --key-field as each run's idempotency key, so that the same file
// twice starts nothing new; a file with a bad line starts nothing and
// names every bad line.
func TestTriggerJSONL(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	ctx := context.Background()
	client := p.Client(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		return path
	}
	count := func() int { return len(listIDs(t, p, "--limit", "1000")) }

	good := write("good.jsonl", `{"id":"inv-1","customer":"ada","cents":100,"items":["pen"]}
{"id":"inv-2","customer":"bob","cents":200,"items":[]}

{"id":"inv-3","customer":"cy","cents":300,"items":["ink","pad"]}
`)
	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "order-processing", "--tenant", "acme", "--jsonl", good, "--key-field", "id")...)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	ids := clitest.ParseIDs(t, out, 3)
	for i, want := range []string{"ada", "bob", "cy"} {
		res, err := client.Get(ctx, ids[i])
		require.NoError(t, err)
		require.Equal(t, "acme", res.Tenant)
		var in order
		require.NoError(t, json.Unmarshal(res.Input, &in))
		require.Equal(t, want, in.Customer, "line order")
	}
	require.Equal(t, ids[1:2], listIDs(t, p, "--idempotency-key", "inv-2"))

	// The same file again: duplicates, by line.
	code, out, errOut = runCLI(t, p.Flags("trigger", "--workflow", "order-processing", "--tenant", "acme", "--jsonl", good, "--key-field", "id")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, ids, clitest.ParseIDs(t, out, 3))
	require.Contains(t, errOut, "line 4: "+ids[2].String()+`: duplicate (idempotency key "inv-3")`)
	require.Equal(t, 3, count())

	// From the standard input, without keys, on a workflow started by name.
	code, out, errOut = runStdin(t, "1\n2\n", p.Flags("trigger", "--workflow", "bench-noop", "--jsonl", "-")...)
	require.Equal(t, 0, code, errOut)
	clitest.ParseIDs(t, out, 2)
	require.Equal(t, 5, count())

	// Bad lines: each named, nothing started.
	for _, tc := range []struct {
		text  string
		args  []string
		wants []string
	}{
		{`{"id":"x-1","customer":"a","cents":1,"items":[]}
{"id":"x-2","customer":
{"id":"x-3","customer":"c","cents":"3","items":[]}
{"id":"x-4","customer":"d","cents":4,"items":[],"typo":1}
{"customer":"e","cents":5,"items":[]}
{"id":["x"],"customer":"f","cents":6,"items":[]}
`, []string{"--key-field", "id"}, []string{"line 2: invalid JSON", "line 3: invalid JSON", `line 4: invalid JSON: json: unknown field "typo"`,
			`line 5: --key-field "id": the input has no such field`, `line 6: invalid JSON: json: cannot unmarshal array`, "nothing started"}},
		{`{"id":"z-1","customer":"a","cents":1,"items":[]}` + "\n" + `{"id":"z-2","customer":"b","cents":2,"items":["x"]}`,
			[]string{"--key-field", "items"}, []string{`line 1: --key-field "items": want a string or a number, got "[]"`,
				`line 2: --key-field "items": want a string or a number, got "[\"x\"]"`}},
		{`{"id":"y-1","customer":"a","cents":1,"items":[]}` + "\n" + `{"id":"` + strings.Repeat("y", durable.DefaultMaxInputSize) + `"}`,
			nil, []string{"line 2: durable: payload too large", "nothing started"}},
		{"\n\n", nil, []string{"no line holds an input"}},
	} {
		path := write("bad.jsonl", tc.text)
		code, out, errOut := runCLI(t, p.Flags(append([]string{"trigger", "--workflow", "order-processing", "--jsonl", path}, tc.args...)...)...)
		require.Equal(t, exitUsage, code, errOut)
		require.Empty(t, out)
		for _, want := range tc.wants {
			require.Contains(t, errOut, want)
		}
		if tc.args == nil || tc.args[1] != "items" {
			require.NotContains(t, errOut, "line 1:")
		}
		require.Equal(t, 5, count(), "nothing started:\n%s", errOut)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--jsonl", good, "--count", "2"}, "--count applies to --input"},
		{[]string{"--jsonl", good, "--idempotency-key", "k"}, "use --key-field"},
		{[]string{"--key-field", "id"}, "--key-field applies only with --jsonl"},
	} {
		code, out, errOut := runCLI(t, p.Flags(append([]string{"trigger", "--workflow", "order-processing"}, tc.args...)...)...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
}

// TestEventsSendPayloadFile: --payload-file reads the payload from a file
// or the standard input; a file that is not JSON, or both flags, is a
// usage error.
func TestEventsSendPayloadFile(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	path := filepath.Join(t.TempDir(), "payload.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"amount": 5}`+"\n"), 0o600))
	code, out, errOut := runCLI(t, p.Flags("events", "send", "--key", "paid", "--tenant", "acme", "--payload-file", path)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "delivered to 0 waiting steps")
	code, out, errOut = runStdin(t, `"ok"`, p.Flags("events", "send", "--key", "paid", "--tenant", "acme", "--payload-file", "-")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "delivered to 0 waiting steps")

	require.NoError(t, os.WriteFile(path, []byte(`{"amount":`), 0o600))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "send", "--key", "k", "--payload-file", path}, "does not hold one JSON value"},
		{[]string{"events", "send", "--key", "k", "--payload-file", path, "--payload", "1"}, "give --payload or --payload-file, not both"},
		{[]string{"signal", uuid.NewString(), "go", "--payload-file", path}, "does not hold one JSON value"},
	} {
		code, out, errOut := runCLI(t, p.Flags(tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	huge := `"` + strings.Repeat("p", durable.DefaultMaxEventSize) + `"`
	require.NoError(t, os.WriteFile(path, []byte(huge), 0o600))
	code, _, errOut = runCLI(t, p.Flags("events", "send", "--key", "k", "--payload-file", path)...)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, "payload too large")
}
