package durablecli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/clitest"
)

// approvalFunc is a durable function: a step that fails its first attempt
// and is retried (fetch), two steps in parallel (left and right, started
// with Go: each waits until both run), a sleep of its input in
// milliseconds (cool-off), a wait for the signal "approve" (approve),
// then a last step (record): calls 0 to 5.
func approvalFunc() *durable.Function[int, string] {
	var arrived atomic.Int32
	both := make(chan struct{})
	pair := func(v int) func(ctx durable.Context) (int, error) {
		return func(ctx durable.Context) (int, error) {
			if arrived.Add(1) == 2 {
				close(both)
			}
			select {
			case <-both:
				return v, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
	return durable.NewFunction("approval", func(ctx durable.FuncContext, ms int) (string, error) {
		a, err := durable.Do(ctx, "fetch", func(c durable.Context) (int, error) {
			if c.Attempt() == 1 {
				return 0, errors.New("upstream flaky")
			}
			return ms + 1, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: 10 * time.Millisecond}))
		if err != nil {
			return "", err
		}
		l, r := durable.Go(ctx, "left", pair(10)), durable.Go(ctx, "right", pair(20))
		if err := durable.AwaitAll(ctx, l, r); err != nil {
			return "", err
		}
		durable.SleepFor(ctx, "cool-off", time.Duration(ms)*time.Millisecond)
		ok, err := durable.AwaitSignal[bool](ctx, "approve", "approve")
		if err != nil {
			return "", err
		}
		return durable.Do(ctx, "record", func(durable.Context) (string, error) { return fmt.Sprintf("%d %v", a, ok), nil })
	})
}

// callRows returns the rows of the calls table of "runs show", by call
// number, after checking its header and alignment.
func callRows(t *testing.T, out string) [][]string {
	t.Helper()
	_, table, ok := strings.Cut(out, "\ncalls (")
	require.True(t, ok, "no calls table:\n%s", out)
	lines := strings.Split(table, "\n")[1:]
	end := 0
	for end < len(lines) && lines[end] != "" {
		end++
	}
	lines = lines[:end]
	require.Equal(t, "# CALL KIND STATE ATTEMPTS STARTED FINISHED TOOK WAITS FOR ERROR", strings.Join(strings.Fields(lines[0]), " "), out)
	requireAligned(t, lines, "CALL", "KIND", "STATE", "ATTEMPTS", "STARTED", "FINISHED", "TOOK", "WAITS FOR", "ERROR")
	var rows [][]string
	for k, l := range lines[1:] {
		f := fields(l)
		require.Len(t, f, 10, "row %q", l)
		require.Equal(t, fmt.Sprint(k), f[0], "calls in order")
		rows = append(rows, f)
	}
	return rows
}

// TestFunctionCLI: "workflows" says a function is one; "trigger" starts
// one by name; "runs show" prints its body as its one step and its calls
// in order, with their attempts and what they wait for (a sleep until
// when, a signal), and its calls in --json; "runs replay --from-step"
// replays from a call.
func TestFunctionCLI(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	cfg := testConfig()
	cfg.Workflows = append(cfg.Workflows, approvalFunc())
	cli := func(args ...string) (int, string, string) { return runConfig(cfg, p.Flags(args...)...) }

	code, out, errOut := cli("workflows", "--steps", "--workflow", "approval")
	require.Equal(t, 0, code, errOut)
	row := fields(strings.Split(out, "\n")[1])
	require.Equal(t, []string{"approval", "function"}, row[:2], out)
	require.Contains(t, out, ", a function: input int")
	require.Contains(t, out, "the function's body: runs show lists its calls")
	code, out, errOut = cli("workflows", "--workflow", "order-processing")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "workflow", fields(strings.Split(out, "\n")[1])[1], out)

	code, out, errOut = cli("trigger", "--workflow", "approval", "--input", "50")
	require.Equal(t, 0, code, errOut)
	id := clitest.ParseIDs(t, out, 1)[0]
	code, out, errOut = cli("trigger", "--workflow", "approval", "--input", "3600000") // sleeps an hour
	require.Equal(t, 0, code, errOut)
	napper := clitest.ParseIDs(t, out, 1)[0]

	e := p.StartWorker(t, approvalFunc())
	ctx := context.Background()
	body := func(id uuid.UUID) durable.StepResult {
		res, err := e.Get(ctx, id)
		require.NoError(t, err)
		return res.Steps[0]
	}
	require.Eventually(t, func() bool { return body(id).Signal == "approve" }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return body(napper).State == durabletype.TaskSleeping }, 20*time.Second, 10*time.Millisecond)

	code, out, errOut = cli("runs", "show", id.String())
	require.Equal(t, 0, code, errOut)
	steps, _, _ := strings.Cut(out[strings.Index(out, "\nsteps ("):], "\ncalls (")
	require.Equal(t, 1, strings.Count(steps, "\nmain "), out)
	require.NotContains(t, steps, "fetch", "calls are not steps")
	rows := callRows(t, out)
	require.Len(t, rows, 5)
	require.Equal(t, []string{"0", "fetch", "step", "COMPLETED", "2"}, rows[0][:5])
	require.Equal(t, []string{"1", "left", "step", "COMPLETED", "1"}, rows[1][:5])
	require.Equal(t, []string{"2", "right", "step", "COMPLETED", "1"}, rows[2][:5])
	require.Equal(t, []string{"3", "cool-off", "sleep", "COMPLETED", "0"}, rows[3][:5])
	require.True(t, strings.HasPrefix(rows[3][8], "sleep until +"), rows[3][8])
	require.Equal(t, []string{"4", "approve", "event", "WAITING", "0"}, rows[4][:5])
	require.Equal(t, `signal "approve"`, rows[4][8])
	require.Equal(t, "-", rows[4][6], "not finished")
	require.NotContains(t, out, "\nwaits (", "a function's waits are its calls'")

	code, out, errOut = cli("runs", "show", napper.String())
	require.Equal(t, 0, code, errOut)
	rows = callRows(t, out)
	require.Len(t, rows, 4)
	require.Equal(t, []string{"3", "cool-off", "sleep", "SLEEPING"}, rows[3][:4])
	require.Regexp(t, `^sleep until \+1h0m\d+(\.\d+)?s$`, rows[3][8])

	code, out, errOut = cli("runs", "show", "--json", id.String())
	require.Equal(t, 0, code, errOut)
	var d durablejson.RunDetail
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	require.Equal(t, "function", d.Kind)
	require.Len(t, d.Steps, 1)
	require.Len(t, d.Calls, 5)
	require.Equal(t, "approve", d.Calls[4].Signal)

	require.NoError(t, e.Signal(ctx, id, "approve", true))
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := e.Wait(wctx, id)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)

	code, _, errOut = cli("runs", "replay", id.String(), "--from-step", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `has no step "nope"`)
	code, out, errOut = cli("runs", "replay", id.String(), "--from-step", "cool-off")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "replayed")
	res, err = e.Wait(wctx, id)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)
	code, out, errOut = cli("runs", "show", "--events", id.String())
	require.Equal(t, 0, code, errOut)
	require.Len(t, callRows(t, out), 6)
	require.Contains(t, out, "replay from call cool-off")
}
