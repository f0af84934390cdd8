package durablecli

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.ClosePool()
	pgtest.NoteSkipped()
	os.Exit(code)
}

// testConfig is the command line the tests run: the workflows of
// fixtures_test.go, with default inputs, as cmd/durable serves its
// built-ins of the same names, under the name durable.
func testConfig() Config {
	set := newFixtures(0)
	return Config{
		Name: "durable",
		Workflows: []durable.Definition{set.Demo.Workflow, set.Noop, set.DAG, set.Chain, set.Keyed, set.Map,
			set.Wait, set.Parent, set.Chaos},
		DefaultInputs: []Input{
			DefaultInput(set.Demo.Workflow, order{ID: "cli-1", Customer: "cli", Cents: 4200, Items: []string{"keyboard"}}),
			DefaultInput(set.Noop, 0), DefaultInput(set.DAG, 0), DefaultInput(set.Chain, 0), DefaultInput(set.Keyed, 0),
			DefaultInput(set.Map, 0), DefaultInput(set.Wait, 0), DefaultInput(set.Parent, 0),
			DefaultInput(set.Chaos, chaosInput{}),
		},
	}
}

// testPG is a per-test schema (clitest.PG) with engines on it that know the
// workflows of fixtures_test.go.
type testPG struct{ *clitest.PG }

// newPG is clitest.NewPG.
func newPG(t *testing.T, migrate bool) *testPG { return &testPG{clitest.NewPG(t, migrate)} }

// Client returns an engine on the schema that is never started.
func (p *testPG) Client(t *testing.T) *durable.Engine {
	t.Helper()
	e, err := durable.New(p.Store, durable.Config{Logger: clitest.QuietLogger()})
	require.NoError(t, err)
	return e
}

// StartWorker starts an in-process engine serving the workflows of
// fixtures_test.go (and extra ones) on the schema, stopped when the test
// ends.
func (p *testPG) StartWorker(t *testing.T, extra ...durable.Definition) *durable.Engine {
	t.Helper()
	e, err := durable.New(p.Store, durable.Config{Logger: clitest.QuietLogger(), HeartbeatInterval: time.Second, DeadAfter: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, e.Register(newFixtures(0).all()...))
	require.NoError(t, e.Register(extra...))
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Stop(ctx))
	})
	return e
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
