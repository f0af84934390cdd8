package durable_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
)

// TestStartByName: a registered workflow started from encoded input, with
// its options, duplicates and concurrency keys computed from the decoded
// input; bad input, tenants, options and names start nothing.
func TestStartByName(t *testing.T) {
	t.Parallel()
	type Job struct {
		Account string `json:"account"`
	}
	wf := durable.NewWorkflow[Job]("job")
	durable.Step(wf, "work", func(ctx durable.Context, j Job) (string, error) {
		return "done for " + j.Account, nil
	}, durable.WithConcurrency(func(j Job) string {
		if j.Account == "" {
			panic("no account") // a key function that panics: ErrInvalidKey
		}
		return j.Account
	}, 1))
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, e.Register(wf))
	ctx := context.Background()

	id := uuid.Must(uuid.NewV7())
	st, err := e.StartByName(ctx, "job", "t1", []byte(`{"account":"acme"}`),
		durable.WithRunID(id), durable.WithPriority(durable.PriorityHigh), durable.WithIdempotencyKey("k"))
	require.NoError(t, err)
	require.Equal(t, durable.Started{RunID: id}, st)
	st, err = e.StartByName(ctx, "job", "t1", []byte(`{"account":"other"}`), durable.WithIdempotencyKey("k"))
	require.NoError(t, err)
	require.Equal(t, durable.Started{RunID: id, Duplicate: true}, st)
	_, err = e.StartByName(ctx, "job", "t2", []byte(`{"account":"acme"}`), durable.WithRunID(id))
	require.ErrorIs(t, err, durabletype.ErrRunExists)

	res, err := e.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, durable.PriorityHigh, res.Priority)
	require.JSONEq(t, `{"account":"acme"}`, string(res.Input))
	require.Equal(t, durabletype.RunRunning, res.Status)

	for _, c := range []struct {
		name, workflow, tenant, input string
		opts                          []durable.TriggerOption
		want                          error
	}{
		{"input of another type", "job", "t1", `{"account":7}`, nil, durable.ErrInvalidInput},
		{"not JSON", "job", "t1", `acme`, nil, durable.ErrInvalidInput},
		{"empty input", "job", "t1", ``, nil, durable.ErrInvalidInput},
		{"key function panics", "job", "t1", `{}`, nil, durabletype.ErrInvalidKey},
		{"unknown workflow", "nope", "t1", `{}`, nil, durable.ErrWorkflowNotRegistered},
		{"bad tenant", "job", "t\x00", `{"account":"a"}`, nil, durabletype.ErrInvalidTenant},
		{"empty tenant", "job", "", `{"account":"a"}`, nil, durabletype.ErrInvalidTenant},
		{"bad option", "job", "t1", `{"account":"a"}`, []durable.TriggerOption{durable.WithStartAfter(-time.Second)}, durable.ErrInvalidTrigger},
		{"misspelt field", "job", "t1", `{"acount":"a"}`, nil, durable.ErrInvalidInput},
		{"data after the value", "job", "t1", `{"account":"a"} {}`, nil, durable.ErrInvalidInput},
	} {
		_, err := e.StartByName(ctx, c.workflow, c.tenant, []byte(c.input), c.opts...)
		require.ErrorIs(t, err, c.want, c.name)
		require.ErrorIs(t, e.CheckByName(c.workflow, c.tenant, []byte(c.input), c.opts...), c.want, "CheckByName: %s", c.name)
	}
	require.NoError(t, e.CheckByName("job", "t1", []byte(`{"account":"checked"}`)))
	_, err = e.StartByName(ctx, "job", "t1", []byte(`{"acount":"a"}`))
	require.ErrorContains(t, err, `unknown field "acount"`)
	require.NoError(t, e.CheckByName("job", "t1", []byte(`{"account":"a","note":"x"}`), durable.WithUnknownFields()),
		"WithUnknownFields lets unknown fields through")
	page, err := e.ListRuns(ctx, durable.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page.Runs, 1, "a failed trigger or a check started a run")

	require.NoError(t, e.Stop(ctx))
	_, err = e.StartByName(ctx, "job", "t1", []byte(`{"account":"a"}`))
	require.ErrorIs(t, err, durable.ErrEngineStopped)
	require.NoError(t, e.Check(ctx)) // memstore cannot tell: ready
}

// TestWorkflows describes the registered workflows, child workflows
// registered through their parents included.
func TestWorkflows(t *testing.T) {
	t.Parallel()
	child := durable.NewWorkflow[int]("kid")
	out := durable.Step(child, "out", func(ctx durable.Context, n int) (int, error) { return n, nil })
	wf := durable.NewWorkflow[int]("main")
	list := durable.Step(wf, "list", func(ctx durable.Context, n int) ([]int, error) { return []int{n}, nil })
	nap := durable.Sleep(wf, "nap", time.Minute, durable.After(list))
	durable.Map(wf, "each", list, func(ctx durable.Context, n int) (int, error) { return n, nil }, durable.After(nap))
	durable.WaitForSignal[string](wf, "ok", "approve", durable.After(nap))
	durable.Child(wf, "sub", child, out, func(ctx durable.Context, n int) (int, error) { return n, nil }, durable.After(list))
	wf.OnFailure(func(ctx durable.Context, n int, f durable.Failure) error { return nil })

	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
	require.NoError(t, err)
	require.Empty(t, e.Workflows())
	require.NoError(t, e.Register(wf))
	require.Equal(t, []durable.WorkflowInfo{
		{Name: "kid", Version: child.Version(), Versions: []string{child.Version()}, Input: "int", ChildOnly: true,
			Steps: []durable.StepInfo{{Name: "out", Kind: "step", Output: "int"}}},
		{Name: "main", Version: wf.Version(), Versions: []string{wf.Version()}, Input: "int", OnFailure: true, Steps: []durable.StepInfo{
			{Name: "list", Kind: "step", Output: "[]int"},
			{Name: "nap", Kind: "sleep", Parents: []string{"list"}, Sleep: time.Minute, Output: "struct {}"},
			{Name: "each", Kind: "map", Parents: []string{"list", "nap"}, MapOver: "list", Output: "[]int"},
			{Name: "ok", Kind: "event", Parents: []string{"nap"}, Signal: "approve", Output: "string"},
			{Name: "sub", Kind: "child", Parents: []string{"list"}, Child: "kid", Output: "int"},
		}},
	}, e.Workflows())
}

// TestStartManyByName: many runs by name in one atomic call, duplicates
// by idempotency key reported; a refused trigger is named by its index
// and starts nothing.
func TestStartManyByName(t *testing.T) {
	t.Parallel()
	type Job struct {
		Account string `json:"account"`
	}
	wf := durable.NewWorkflow[Job]("job")
	durable.Step(wf, "work", func(ctx durable.Context, j Job) (string, error) { return j.Account, nil })
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet, MaxInputSize: 100})
	require.NoError(t, err)
	require.NoError(t, e.Register(wf))
	ctx := context.Background()
	count := func() int {
		page, err := e.ListRuns(ctx, durable.ListOptions{})
		require.NoError(t, err)
		return len(page.Runs)
	}

	for _, tc := range []struct {
		bad  durable.TriggerByName
		want error
	}{
		{durable.TriggerByName{Tenant: "t", Input: []byte(`{"account":`)}, durable.ErrInvalidInput},
		{durable.TriggerByName{Tenant: "t", Input: []byte(`{"account":"` + strings.Repeat("x", 100) + `"}`)}, durable.ErrPayloadTooLarge},
		{durable.TriggerByName{Tenant: "t\x00", Input: []byte(`{}`)}, durable.ErrInvalidValue},
	} {
		_, err = e.StartManyByName(ctx, "job", []durable.TriggerByName{{Tenant: "t", Input: []byte(`{"account":"a"}`)}, tc.bad})
		var te *durable.TriggerError
		require.ErrorAs(t, err, &te)
		require.Equal(t, 1, te.Index)
		require.ErrorIs(t, err, tc.want)
		require.Zero(t, count(), "nothing started")
	}
	_, err = e.StartManyByName(ctx, "nope", nil)
	require.ErrorIs(t, err, durable.ErrWorkflowNotRegistered)

	st, err := e.StartManyByName(ctx, "job", []durable.TriggerByName{
		{Tenant: "t", Input: []byte(`{"account":"a"}`), Options: []durable.TriggerOption{durable.WithIdempotencyKey("a")}},
		{Tenant: "t", Input: []byte(`{"account":"b"}`)},
		{Tenant: "t", Input: []byte(`{"account":"a2"}`), Options: []durable.TriggerOption{durable.WithIdempotencyKey("a")}},
	})
	require.NoError(t, err)
	require.Len(t, st, 3)
	require.False(t, st[0].Duplicate)
	require.False(t, st[1].Duplicate)
	require.Equal(t, durable.Started{RunID: st[0].RunID, Duplicate: true}, st[2])
	require.Equal(t, 2, count())
	res, err := e.Get(ctx, st[1].RunID)
	require.NoError(t, err)
	require.JSONEq(t, `{"account":"b"}`, string(res.Input))
}
