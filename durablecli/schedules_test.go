package durablecli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/tools/cliflag"
)

func TestSchedulesUsage(t *testing.T) {
	t.Setenv(cliflag.EnvDatabaseURL, "")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"schedules"}, exitUsage},
		{[]string{"schedules", "-h"}, 0},
		{[]string{"schedules", "frobnicate"}, exitUsage},
		{[]string{"schedules", "create", "x", "--cron", "* * * * *", "--workflow", "bench-noop"}, exitUsage}, // no URL
		{[]string{"schedules", "create", "x", "--cron", "* * * * *", "--workflow", "nope", "--database-url", "postgres://x"}, exitUsage},
		{[]string{"schedules", "create", "--cron", "* * * * *", "--workflow", "bench-noop", "--database-url", "postgres://x"}, exitUsage},
		{[]string{"schedules", "create", "x", "--workflow", "bench-noop", "--database-url", "postgres://x"}, exitUsage},
		{[]string{"schedules", "create", "x", "--cron", "@daily", "--workflow", "bench-noop", "--input", "{", "--database-url", "postgres://x"}, exitUsage},
		{[]string{"schedules", "pause", "--database-url", "postgres://x"}, exitUsage},
		{[]string{"schedules", "list", "extra", "--database-url", "postgres://x"}, exitUsage},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, tc.code, run(context.Background(), tc.args, &out, &errOut), "%v: %s", tc.args, errOut.String())
	}
}

// TestSchedulesListSaysWhereFrom: "schedules list" tells a schedule
// declared in code from one created with the API.
func TestSchedulesListSaysWhereFrom(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	wf := durable.NewWorkflow[int]("declares")
	durable.Step(wf, "a", func(ctx durable.Context, n int) (int, error) { return n, nil })
	wf.DeclareSchedule("acme", "nightly", 1, "0 3 * * *", durable.ScheduleOptions{})
	e := p.StartWorker(t, wf)
	_, err := wf.Schedule(context.Background(), e, "acme", "by-hand", 2, "@hourly", durable.ScheduleOptions{})
	require.NoError(t, err)

	code, out, errOut := runCLI(t, p.Flags("schedules", "list")...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, rows, 3)
	require.Regexp(t, `FROM$`, rows[0])
	require.Regexp(t, `^acme +by-hand +declares .* api$`, rows[1])
	require.Regexp(t, `^acme +nightly +declares .* code$`, rows[2])

	code, out, errOut = runCLI(t, p.Flags("schedules", "list", "--json")...)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	var got struct {
		Schedules []struct {
			Name     string `json:"name"`
			Declared bool   `json:"declared"`
		} `json:"schedules"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got.Schedules, 2)
	require.False(t, got.Schedules[0].Declared)
	require.True(t, got.Schedules[1].Declared)
}
