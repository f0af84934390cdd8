package durablecli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/clitest"
)

func TestTriggerCreatesQueuedRuns(t *testing.T) {
	t.Parallel()
	p := newPG(t, false) // trigger migrates the schema itself
	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "bench-noop", "--count", "5", "--tenant", "acme")...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Empty(t, errOut)
	ids := clitest.ParseIDs(t, out, 5)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 5, "one ID per line, nothing else")

	e := p.Client(t)
	seen := map[uuid.UUID]bool{}
	for _, id := range ids {
		require.False(t, seen[id], "IDs are distinct")
		seen[id] = true
		res, err := e.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, "bench-noop", res.Workflow)
		require.Equal(t, "acme", res.Tenant)
		require.Equal(t, durabletype.RunRunning, res.Status, "no worker runs them")
		require.Len(t, res.Steps, 1)
		require.Equal(t, durabletype.TaskQueued, res.Steps[0].State)
	}
}

func TestTriggerFlowOptions(t *testing.T) {
	t.Parallel()
	p := newPG(t, false)
	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "bench-noop", "--count", "3", "--tenant", "acme",
		"--idempotency-key", "order-9", "--priority", "2", "--start-after", "1h", "--run-timeout", "2h")...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	ids := clitest.ParseIDs(t, out, 3)
	require.Equal(t, ids[0], ids[1], "one run, its duplicates name it")
	require.Equal(t, ids[0], ids[2])
	require.Equal(t, 2, strings.Count(errOut, "duplicate"), "stderr:\n%s", errOut)

	// Again: a duplicate of the same run.
	code, out, errOut = runCLI(t, p.Flags("trigger", "--workflow", "bench-noop", "--tenant", "acme", "--idempotency-key", "order-9")...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Equal(t, ids[:1], clitest.ParseIDs(t, out, 1))
	require.Contains(t, errOut, "duplicate")

	res, err := p.Client(t).Get(context.Background(), ids[0])
	require.NoError(t, err)
	require.Equal(t, durabletype.TaskQueued, res.Steps[0].State, "waiting for its start time")
}

func TestTriggerInput(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "order-processing",
		"--input", `{"id":"Z-9","customer":"zoe","cents":0,"items":["pen"]}`)...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	id := clitest.ParseIDs(t, out, 1)[0]

	// The input was stored as given: a worker rejects the order.
	p.StartWorker(t)
	set := newFixtures(0)
	res, err := p.Client(t).Wait(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	got, err := set.Demo.Reject.Result(res)
	require.NoError(t, err)
	require.Equal(t, "order Z-9 rejected: amount must be positive", got)
}

func TestTriggerWaitTimeout(t *testing.T) {
	t.Parallel()
	p := newPG(t, true) // no worker: the run cannot finish
	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "bench-chain", "--wait", "--timeout", "300ms")...)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	id := clitest.ParseIDs(t, out, 1)[0]
	require.Contains(t, out, id.String()+" RUNNING (not settled after --timeout 300ms; a QUEUED, b PENDING)")
	require.Contains(t, errOut, "1 of 1 runs did not complete")
}

func TestTriggerUsageErrors(t *testing.T) {
	t.Parallel()
	// Flags are checked before connecting, so no database is needed.
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workflow", "bench-noop", "--database-url="}, "--database-url (or $DURABLE_DATABASE_URL) is required"},
		{db, "--workflow is required: one of order-processing, bench-noop, bench-dag, bench-chain, bench-keyed, bench-map, bench-wait, bench-parent, chaos"},
		{append([]string{"--workflow", "nope"}, db...), `unknown workflow "nope"`},
		{append([]string{"--workflow", "chaos", "--input", `{"n":`}, db...), "--input for chaos: invalid JSON"},
		{append([]string{"--workflow", "chaos", "--input", `{"m":1}`}, db...), `unknown field "m"`},
		{append([]string{"--workflow", "chaos", "--input", `{"n":1} {}`}, db...), "unexpected data after the value"},
		{append([]string{"--workflow", "bench-noop", "--input", `"x"`}, db...), "--input for bench-noop: invalid JSON"},
		{append([]string{"--workflow", "bench-noop", "--count", "0"}, db...), "--count must be between 1 and 100000, got 0"},
		{append([]string{"--workflow", "bench-noop", "--tenant", ""}, db...), `--tenant "" is empty: use 1-200 bytes`},
		{append([]string{"--workflow", "bench-noop", "--timeout", "1s"}, db...), "--timeout applies only with --wait"},
		{append([]string{"--workflow", "bench-noop", "--wait", "--timeout", "-1s"}, db...), "--timeout must not be negative"},
		{append([]string{"--workflow", "bench-noop", "--count", "many"}, db...), "invalid value"},
		{append([]string{"--workflow", "bench-noop", "extra"}, db...), `unexpected argument "extra"`},
		{append([]string{"--workflow", "bench-noop", "--idempotency-key", "a\x01b"}, db...), "--idempotency-key"},
		{append([]string{"--workflow", "bench-noop", "--priority", "4"}, db...), "--priority must be between 0 and 3, got 4"},
		{append([]string{"--workflow", "bench-noop", "--start-after", "-1s"}, db...), "--start-after must not be negative"},
		{append([]string{"--workflow", "bench-noop", "--run-timeout", "-1s"}, db...), "--run-timeout must not be negative"},
	} {
		code, out, errOut := runCLI(t, append([]string{"trigger"}, tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}

	code, _, errOut := runCLI(t, "trigger", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable trigger")

	// A database that cannot be reached is an error, not a usage error.
	code, out, errOut := runCLI(t, "trigger", "--workflow", "bench-noop", "--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=5")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "durable trigger: connecting")
}

// TestTriggerByName: a workflow without a default input is started by
// name (Engine.StartByName): --input is required, decoded by the engine
// into the workflow's input type, and --count runs are started one by one,
// idempotency included.
func TestTriggerByName(t *testing.T) {
	t.Parallel()
	type Greeting struct {
		Name string `json:"name"`
	}
	greet := durable.NewWorkflow[Greeting]("greet")
	durable.Step(greet, "hello", func(ctx durable.Context, in Greeting) (string, error) { return "hello " + in.Name, nil })
	cfg := Config{Name: "app", Workflows: []durable.Definition{greet}}
	p := newPG(t, true)

	code, out, errOut := runConfig(cfg, p.Flags("trigger", "--workflow", "greet", "--input", `{"name":"ada"}`,
		"--count", "3", "--idempotency-key", "k1", "--tenant", "acme")...)
	require.Equal(t, 0, code, errOut)
	ids := clitest.ParseIDs(t, out, 3)
	require.Equal(t, ids[0], ids[1])
	require.Equal(t, ids[0], ids[2])
	require.Equal(t, 2, strings.Count(errOut, "duplicate"), errOut)
	res, err := p.Client(t).Get(context.Background(), ids[0])
	require.NoError(t, err)
	require.Equal(t, "greet", res.Workflow)
	require.Equal(t, "acme", res.Tenant)
	require.JSONEq(t, `{"name":"ada"}`, string(res.Input))

	code, out, errOut = runConfig(cfg, p.Flags("trigger", "--workflow", "greet", "--count", "2", "--input", `{"name":"bo"}`)...)
	require.Equal(t, 0, code, errOut)
	two := clitest.ParseIDs(t, out, 2)
	require.NotEqual(t, two[0], two[1])

	code, out, errOut = runConfig(cfg, p.Flags("trigger", "--workflow", "greet", "--input", `{"name":7}`)...)
	require.Equal(t, 2, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, "app trigger: --input for greet: durable: input does not decode into the workflow's input type")
	code, _, errOut = runConfig(cfg, p.Flags("trigger", "--workflow", "greet")...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "app trigger: --input is required: workflow greet has no default input")
}

// kvCodec encodes a Greeting as "name=<name>": a codec other than JSON.
type kvCodec struct{}

func (kvCodec) Marshal(v any) ([]byte, error) {
	if g, ok := v.(kvGreeting); ok {
		return []byte("name=" + g.Name), nil
	}
	return json.Marshal(v)
}

func (kvCodec) Unmarshal(b []byte, v any) error {
	g, ok := v.(*kvGreeting)
	if !ok {
		return json.Unmarshal(b, v)
	}
	name, found := strings.CutPrefix(string(b), "name=")
	if !found {
		return fmt.Errorf("want name=..., got %q", b)
	}
	g.Name = name
	return nil
}

type kvGreeting struct{ Name string }

// TestEngineHook: Config.Engine reaches the engines of the commands: with
// its codec, --input is the codec's encoding, not JSON, with a default
// input or without.
func TestEngineHook(t *testing.T) {
	t.Parallel()
	greet := durable.NewWorkflow[kvGreeting]("greet")
	durable.Step(greet, "hello", func(ctx durable.Context, in kvGreeting) (string, error) { return "hello " + in.Name, nil })
	hail := durable.NewWorkflow[kvGreeting]("hail")
	durable.Step(hail, "hello", func(ctx durable.Context, in kvGreeting) (string, error) { return "hail " + in.Name, nil })
	cfg := Config{
		Name:          "app",
		Workflows:     []durable.Definition{greet, hail},
		DefaultInputs: []Input{DefaultInput(hail, kvGreeting{Name: "all"})},
		Engine:        func(c *durable.Config) { c.Codec = kvCodec{} },
	}
	p := newPG(t, true)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workflow", "greet", "--input", "name=ada"}, "name=ada"},
		{[]string{"--workflow", "hail", "--input", "name=bo"}, "name=bo"},
		{[]string{"--workflow", "hail"}, "name=all"},
	} {
		code, out, errOut := runConfig(cfg, p.Flags(append([]string{"trigger"}, tc.args...)...)...)
		require.Equal(t, 0, code, "%v: %s", tc.args, errOut)
		res, err := p.Client(t).Get(context.Background(), clitest.ParseIDs(t, out, 1)[0])
		require.NoError(t, err)
		require.Equal(t, tc.want, string(res.Input), "%v", tc.args)
	}
	for _, wf := range []string{"greet", "hail"} {
		code, _, errOut := runConfig(cfg, p.Flags("trigger", "--workflow", wf, "--input", `{"Name":"ada"}`)...)
		require.Equal(t, 2, code, errOut)
		require.Contains(t, errOut, "want name=...", wf)
	}
}

// A failure names its step only when a step failed: a run past its
// deadline failed as a whole, a cancelled run has a reason or none.
func TestFailureText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		re   durable.RunError
		want string
	}{
		{durable.RunError{Status: durabletype.RunFailed, Step: "charge", Message: "card declined\nmore"}, `step "charge": card declined …`},
		{durable.RunError{Status: durabletype.RunFailed, Message: "run deadline exceeded"}, "run deadline exceeded"},
		{durable.RunError{Status: durabletype.RunCancelled, Message: "by ops"}, "by ops"},
		{durable.RunError{Status: durabletype.RunCancelled}, ""},
	} {
		require.Equal(t, c.want, failureText(&c.re))
	}
}

// TestTriggerJSONLOnePass: a --jsonl file of a workflow without a default
// input reports every wrong line in one pass, its JSON, its type and its
// fields alike (a misspelt field is refused, as the engine's by-name rule
// says), and starts nothing; --input refuses a misspelt field the same
// way.
func TestTriggerJSONLOnePass(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	set := newFixtures(0)
	cfg := Config{Name: "app", Workflows: []durable.Definition{set.Demo.Workflow}} // no default input
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"id":"x1","customer":"a","cents":1,"items":[]}
{"id":"x2","customer":"b","cents":"2","items":[]}
{"id":"x3","custmer":"c","cents":3,"items":[]}
{"id":"x4","customer":
`), 0o600))
	code, out, errOut := runWith(t, cfg, p.Flags("trigger", "--workflow", "order-processing", "--jsonl", path)...)
	require.Equal(t, exitUsage, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, "line 2: ")
	require.Contains(t, errOut, `line 3: `)
	require.Contains(t, errOut, `unknown field "custmer"`)
	require.Contains(t, errOut, "line 4: invalid JSON")
	require.NotContains(t, errOut, "line 1:")
	require.Empty(t, listIDs(t, p, "--limit", "10"), "nothing started")

	code, out, errOut = runWith(t, cfg, p.Flags("trigger", "--workflow", "order-processing",
		"--input", `{"id":"x3","custmer":"c","cents":3,"items":[]}`)...)
	require.Equal(t, exitUsage, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, `unknown field "custmer"`)
	require.Empty(t, listIDs(t, p, "--limit", "10"), "nothing started")

	// --allow-unknown-fields: a field the type lacks is ignored, kept in
	// the recorded input; with a default input too.
	good := filepath.Join(t.TempDir(), "good.jsonl")
	require.NoError(t, os.WriteFile(good, []byte(`{"id":"x1","customer":"a","cents":1,"items":[],"source":"crm"}`+"\n"), 0o600))
	code, out, errOut = runWith(t, cfg, p.Flags("trigger", "--workflow", "order-processing", "--jsonl", good, "--allow-unknown-fields")...)
	require.Equal(t, 0, code, errOut)
	clitest.ParseIDs(t, out, 1)
	code, out, errOut = runCLI(t, p.Flags("trigger", "--workflow", "order-processing", "--input", `{"id":"x5","customer":"e","cents":5,"items":[],"source":"crm"}`)...)
	require.Equal(t, exitUsage, code, errOut)
	require.Contains(t, errOut, `unknown field "source"`, "with a default input: refused as well")
	code, out, errOut = runCLI(t, p.Flags("trigger", "--workflow", "order-processing", "--allow-unknown-fields",
		"--input", `{"id":"x5","customer":"e","cents":5,"items":[],"source":"crm"}`)...)
	require.Equal(t, 0, code, errOut)
	ids := clitest.ParseIDs(t, out, 1)
	res, err := p.Client(t).Get(context.Background(), ids[0])
	require.NoError(t, err)
	require.Contains(t, string(res.Input), `"source":"crm"`)
}
