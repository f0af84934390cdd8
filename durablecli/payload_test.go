package durablecli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// Sizes: an input or a payload over its limit is a usage error (exit 2)
// and sends nothing; "runs show" leaves out the values over 64 KiB, their
// size said, unless --full.
func TestPayloadSizes(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	wf := durable.NewWorkflow[int]("cli-test-big")
	durable.Step(wf, "grow", func(ctx durable.Context, n int) (string, error) {
		return strings.Repeat("x", n), nil
	})
	p.StartWorker(t, wf)
	client := p.Client(t)

	big := `{"id":"` + strings.Repeat("i", durable.DefaultMaxInputSize) + `"}`
	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "order-processing", "--input", big)...)
	require.Equal(t, 2, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, "payload too large: the input is 1048622 bytes, over the limit of 1048576 (Config.MaxInputSize)")
	code, _, errOut = runCLI(t, p.Flags("events", "send", "--key", "k", "--payload", `"`+strings.Repeat("e", durable.DefaultMaxEventSize)+`"`)...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "payload too large")

	id, err := wf.RunNoWait(context.Background(), client, "default", 100<<10)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, settled(t, client, id).Status)
	code, out, errOut = runCLI(t, p.Flags("runs", "show", id.String(), "--outputs")...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "grow: (102402 bytes, left out: over 64 KiB; --full prints it)\n")
	js := showJSON(t, p, id)
	require.Equal(t, float64(102402), jsonStep(t, js, "grow")["output_omitted"])
	require.NotContains(t, jsonStep(t, js, "grow"), "output")
	code, out, errOut = runCLI(t, p.Flags("runs", "show", "--json", "--full", id.String())...)
	require.Equal(t, 0, code, errOut)
	var full struct {
		Steps []struct {
			Output json.RawMessage `json:"output"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &full))
	require.Len(t, full.Steps[0].Output, 102402)
}
