package durablecli

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/cliflag"
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
