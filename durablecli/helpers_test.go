package durablecli

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/demo"
	"github.com/effectivelabs/durable/internal/pgtest"
	"github.com/effectivelabs/durable/internal/workloads"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.ClosePool()
	pgtest.NoteSkipped()
	os.Exit(code)
}

// testConfig is the command line the tests run: the built-in workflows,
// with default inputs, as cmd/durable serves them, under the name durable.
func testConfig() Config {
	set := workloads.New(workloads.Options{})
	return Config{
		Name: "durable",
		Workflows: []durable.Definition{set.Demo.Workflow, set.Noop, set.DAG, set.Chain, set.Keyed, set.Map,
			set.Wait, set.Parent, set.Chaos},
		DefaultInputs: []Input{
			DefaultInput(set.Demo.Workflow, demo.Order{ID: "cli-1", Customer: "cli", Cents: 4200, Items: []string{"keyboard"}}),
			DefaultInput(set.Noop, 0), DefaultInput(set.DAG, 0), DefaultInput(set.Chain, 0), DefaultInput(set.Keyed, 0),
			DefaultInput(set.Map, 0), DefaultInput(set.Wait, 0), DefaultInput(set.Parent, 0),
			DefaultInput(set.Chaos, workloads.ChaosInput{}),
		},
	}
}

// run runs the command line of testConfig.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Run(ctx, testConfig(), args, stdout, stderr)
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}
