package durable_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
)

// badValues break the rule of every kind of name, key and text.
var badValues = []string{"a\x00b", "\xff", "\x00", strings.Repeat("x", 1<<20)}

// TestInvalidValuesAtTheLibrary: every public call that takes a name, a
// key or a text and reaches a store refuses a NUL, invalid UTF-8 or an
// over-long value (and an empty one where a value is required) with an
// *InvalidValueError naming the parameter, on both stores alike: nothing
// reaches PostgreSQL, which would refuse the bytes with an error of its
// own.
func TestInvalidValuesAtTheLibrary(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("validated")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		e := h.client()
		require.NoError(t, e.Register(wf))
		ctx := h.ctx(time.Minute)
		id := uuid.New()

		calls := []struct {
			name  string
			field string
			call  func(v string) error
		}{
			{"StartByName workflow", "workflow", func(v string) error {
				_, err := e.StartByName(ctx, v, "t", []byte("1"))
				return err
			}},
			{"StartByName tenant", "tenant", func(v string) error {
				_, err := e.StartByName(ctx, "validated", v, []byte("1"))
				return err
			}},
			{"RunNoWait tenant", "tenant", func(v string) error { _, err := wf.RunNoWait(ctx, e, v, 1); return err }},
			{"WithIdempotencyKey", "idempotency key", func(v string) error {
				_, err := wf.RunNoWait(ctx, e, "t", 1, durable.WithIdempotencyKey(v))
				return err
			}},
			{"Versions", "workflow", func(v string) error { _, err := e.Versions(ctx, v); return err }},
			{"ListRuns workflow", "workflow", func(v string) error {
				_, err := e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Workflow: v}})
				return err
			}},
			{"ListRuns version", "version", func(v string) error {
				_, err := e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Version: v}})
				return err
			}},
			{"ListRuns tenant", "tenant", func(v string) error {
				_, err := e.Tenant("t").ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Tenant: v}})
				return err
			}},
			{"ReplayRuns from step", "from step", func(v string) error {
				_, err := e.ReplayRuns(ctx, durable.RunFilter{}, durable.ReplayOptions{FromStep: v})
				return err
			}},
			{"Replay from step", "from step", func(v string) error {
				return e.Replay(ctx, id, durable.ReplayOptions{FromStep: v})
			}},
			{"Signal", "signal name", func(v string) error { return e.Tenant("t").Signal(ctx, id, v, nil) }},
			{"SendEvent tenant", "tenant", func(v string) error { _, err := e.SendEvent(ctx, v, "k", nil); return err }},
			{"SendEvent key", "key", func(v string) error { _, err := e.SendEvent(ctx, "t", v, nil); return err }},
			{"UpgradeRuns workflow", "workflow", func(v string) error {
				_, err := e.UpgradeRuns(ctx, v, "1", "2", durable.UpgradeOptions{})
				return err
			}},
			{"UpgradeRuns from", "from", func(v string) error {
				_, err := e.UpgradeRuns(ctx, "validated", v, "2", durable.UpgradeOptions{})
				return err
			}},
			{"GetSchedule", "name", func(v string) error { _, err := e.GetSchedule(ctx, "t", v); return err }},
			{"PauseSchedule", "tenant", func(v string) error { _, err := e.PauseSchedule(ctx, v, "s"); return err }},
			{"ResumeSchedule", "name", func(v string) error { _, err := e.Tenant("t").ResumeSchedule(ctx, v); return err }},
			{"DeleteSchedule", "name", func(v string) error { return e.DeleteSchedule(ctx, "t", v) }},
			{"CreateSchedule", "name", func(v string) error {
				_, err := e.CreateSchedule(ctx, durable.ScheduleSpec{Tenant: "t", Name: v, Workflow: "validated", Input: []byte("1"), Cron: "@hourly"})
				return err
			}},
		}
		for _, c := range calls {
			values := badValues
			if !strings.HasPrefix(c.name, "Versions") && !strings.Contains(c.name, "ListRuns") && !strings.Contains(c.name, "from step") {
				// The empty value is refused too, but where it means none
				// (all workflows, no filter, no step).
				values = append([]string{""}, values...)
			}
			for _, v := range values {
				err := c.call(v)
				require.ErrorIs(t, err, durable.ErrInvalidValue, "%s(%.20q)", c.name, v)
				var ive *durable.InvalidValueError
				require.True(t, errors.As(err, &ive))
				require.Equal(t, c.field, ive.Field, c.name)
				require.Less(t, len(err.Error()), 400, "a huge value is not echoed whole")
			}
		}

		// Free text may be empty, but not hold a NUL, invalid UTF-8 or more
		// than 1,000 bytes.
		for _, v := range append(badValues, strings.Repeat("é", 501), "\x1b[2J") {
			err := e.Cancel(ctx, id, v)
			require.ErrorIs(t, err, durable.ErrInvalidValue, "%.20q", v)
			_, err = e.CancelRuns(ctx, durable.RunFilter{}, v)
			require.ErrorIs(t, err, durable.ErrInvalidValue, "%.20q", v)
		}
		require.ErrorIs(t, e.Cancel(ctx, id, "withdrawn\nby the customer"), durable.ErrRunNotFound, "a valid reason reaches the store")
	})
}
