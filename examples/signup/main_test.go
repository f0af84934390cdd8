package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// These tests build the example into a binary, as a user builds their own,
// and run its command line against PostgreSQL.

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.ClosePool()
	pgtest.NoteSkipped()
	os.Exit(code)
}

// app is the built example and the schema it works on.
type app struct {
	exe string
	pg  *clitest.PG
	// url is the database URL the commands get, with a password: the
	// test's own when it has one, else a made-up one that a server
	// trusting local connections ignores. secret is that password, which
	// no output may show; empty when the test database cannot take one.
	url    string
	secret string
}

// client returns an engine on the app's schema that is never started.
func (a *app) client(t *testing.T) *durable.Engine {
	t.Helper()
	e, err := durable.New(a.pg.Store, durable.Config{Logger: clitest.QuietLogger()})
	require.NoError(t, err)
	return e
}

func newApp(t *testing.T) *app {
	t.Helper()
	pg := clitest.NewPG(t, false) // "migrate up" creates it
	a := &app{exe: clitest.Build(t, ".", ".", "signup"), pg: pg, url: pg.URL}
	u, err := url.Parse(pg.URL)
	require.NoError(t, err)
	if p, ok := u.User.Password(); ok {
		a.secret = p
	} else if os.Getenv("PGPASSWORD") == "" && os.Getenv("PGPASSFILE") == "" {
		a.secret = "pa55-w0rd-not-shown"
		u.User = url.UserPassword(u.User.Username(), a.secret)
		a.url = u.String()
	}
	return a
}

// run runs the example with args and the database flags, and returns its
// exit status and output.
func (a *app) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(a.exe, append(args, "--database-url", a.url, "--schema", a.pg.Schema)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	a.noSecret(t, stdout.String()+stderr.String())
	return code, stdout.String(), stderr.String()
}

func (a *app) noSecret(t *testing.T, out string) {
	t.Helper()
	if a.secret != "" {
		require.NotContains(t, out, a.secret, "the database password is never shown")
	}
}

// start starts a long-running command of the example (worker or serve)
// on its schema, killed if still running when the test ends.
func (a *app) start(t *testing.T, args ...string) *clitest.Proc {
	t.Helper()
	return clitest.Start(t, exec.Command(a.exe, append(args, "--database-url", a.url, "--schema", a.pg.Schema)...))
}

const adaInput = `{"email":"ada@example.com","name":"Ada"}`

// TestSignupApp: the user's own binary migrates, serves its workflow as a
// worker, starts runs by name (with its input checked by the engine),
// operates them, schedules them and serves them over HTTP; its worker
// drains on SIGTERM and exits 0.
func TestSignupApp(t *testing.T) {
	t.Parallel()
	a := newApp(t)

	code, out, errOut := a.run(t, "migrate", "up")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "applied migration 001")

	worker := a.start(t, "worker", "--worker-id", "signup-1", "--drain-timeout", "20s")
	worker.Log.WaitFor(t, "signup worker: serving", 60*time.Second)
	require.Contains(t, worker.Log.String(), "workflows=user-signup")

	// Trigger by name and wait: send-welcome fails once, then its retry
	// completes the run.
	code, out, errOut = a.run(t, "trigger", "--workflow", "user-signup", "--input", adaInput, "--wait", "--timeout", "60s")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	id := clitest.ParseIDs(t, out, 1)[0]
	require.Regexp(t, `(?m)^`+id.String()+` COMPLETED in \S+$`, out)

	code, out, errOut = a.run(t, "runs", "show", id.String(), "--outputs")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^workflow\s+user-signup$`, out)
	require.Regexp(t, `(?m)^send-welcome\s+create-account\s+COMPLETED\s+2\s`, out, "retried once")
	require.Contains(t, out, `"welcome mail sent to ada@example.com (account acct-ada@example.com)"`)
	code, out, errOut = a.run(t, "runs", "list", "--workflow", "user-signup")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^`+id.String()+`\s+user-signup\s+[0-9a-f]{12}\s+default\s+COMPLETED\s`, out)
	code, out, errOut = a.run(t, "workers")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "signup-1")
	require.Contains(t, out, "user-signup@")
	// The version of the workflow this binary registers: its newest,
	// served by its worker.
	code, out, errOut = a.run(t, "workflows")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut, "nothing unserved")
	require.Regexp(t, `(?m)^user-signup +workflow +[0-9a-f]{12} +newest +0 +0 +signup-1 +- +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +-$`, out)

	// A terminal failure of the user's step.
	code, out, _ = a.run(t, "trigger", "--workflow", "user-signup", "--input", `{"email":"nobody"}`, "--wait", "--timeout", "60s")
	require.Equal(t, 1, code)
	require.Contains(t, out, `FAILED in`)
	require.Contains(t, out, `step "create-account": invalid email "nobody"`)

	// Bad triggers are usage errors that say what to do.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--workflow", "order-processing"}, `signup trigger: unknown workflow "order-processing": this program can start user-signup`},
		{[]string{"--workflow", "user-signup"}, "signup trigger: --input is required: workflow user-signup has no default input"},
		{[]string{"--workflow", "user-signup", "--input", `{"email":`}, "signup trigger: --input for user-signup: invalid JSON"},
		{[]string{"--workflow", "user-signup", "--input", `{"email":5}`}, "signup trigger: --input for user-signup: durable: input does not decode into the workflow's input type"},
	} {
		code, out, errOut := a.run(t, append([]string{"trigger"}, tc.args...)...)
		require.Equal(t, 2, code, "%v: %s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}

	// A schedule of the user's workflow, and one with an input that does
	// not decode.
	code, out, errOut = a.run(t, "schedules", "create", "nightly-digest", "--workflow", "user-signup", "--cron", "@daily",
		"--input", adaInput, "--tenant", "acme")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^acme\s+nightly-digest\s+user-signup\s+@daily\s+UTC\s+active\s`, out)
	code, _, errOut = a.run(t, "schedules", "create", "broken", "--workflow", "user-signup", "--cron", "@daily", "--input", `{"email":[]}`)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "input does not decode into the workflow's input type")
	code, _, errOut = a.run(t, "schedules", "create", "other", "--workflow", "bench-noop", "--cron", "@daily", "--input", "0")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, `unknown workflow "bench-noop": this program can start user-signup`)
	code, out, errOut = a.run(t, "schedules", "list", "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"workflow": "user-signup"`)

	// The HTTP API starts the user's workflow by name.
	serve := a.start(t, "serve", "--addr", "127.0.0.1:0", "--token", "tok-signup")
	serve.Log.WaitFor(t, "signup serve: listening", 60*time.Second)
	m := regexp.MustCompile(`addr=(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(serve.Log.String())
	require.NotNil(t, m, serve.Log.String())
	post := func(path, body string) (int, map[string]any) {
		req, err := http.NewRequest("POST", m[1]+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer tok-signup")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	status, body := post("/api/v1/workflows/user-signup/runs", `{"tenant":"acme","input":`+adaInput+`}`)
	require.Equal(t, http.StatusCreated, status, "%v", body)
	httpRun := uuid.MustParse(body["run_id"].(string))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := a.client(t).Wait(ctx, httpRun)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	require.Equal(t, "user-signup", res.Workflow)
	status, body = post("/api/v1/workflows/order-processing/runs", `{"tenant":"acme","input":{}}`)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, `no workflow "order-processing" here: this server can start "user-signup"`, body["detail"])
	require.Equal(t, 0, serve.Stop(t, syscall.SIGTERM, 30*time.Second), serve.Log.String())
	a.noSecret(t, serve.Log.String())
	require.NotContains(t, serve.Log.String(), "tok-signup")

	// SIGTERM drains the worker, which exits 0.
	require.Equal(t, 0, worker.Stop(t, syscall.SIGTERM, 30*time.Second), worker.Log.String())
	for _, want := range []string{"signup worker: draining", "signup worker: stopped"} {
		require.Contains(t, worker.Log.String(), want)
	}
	a.noSecret(t, worker.Log.String())
}

// TestSignupHelp: the example's help names it and its workflow, and with
// secrets in the environment shows neither the database password nor the
// API token. No database needed.
func TestSignupHelp(t *testing.T) {
	t.Parallel()
	exe := clitest.Build(t, ".", ".", "signup")
	env := append(os.Environ(),
		"DURABLE_DATABASE_URL=postgres://app:db-SECRET-pw@db.example:5432/prod",
		"DURABLE_API_TOKEN=api-SECRET-token")
	for _, args := range [][]string{
		{"help"}, {"worker", "-h"}, {"serve", "-h"}, {"trigger", "-h"}, {"schedules", "create", "-h"},
		{"runs", "list", "-h"}, {"runs", "upgrade", "-h"}, {"migrate", "-h"}, {"stats", "-h"}, {"workflows", "-h"},
	} {
		cmd := exec.Command(exe, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%v: %s", args, out)
		require.NotContains(t, string(out), "SECRET", "%v", args)
		if args[0] != "help" {
			require.Contains(t, string(out), "Usage: signup "+args[0], "%v", args)
		}
	}
	cmd := exec.Command(exe, "serve", "-h")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err)
	require.Contains(t, string(out), "(default $DURABLE_DATABASE_URL: postgres://app:xxxxx@db.example:5432/prod)")
	require.Contains(t, string(out), "(default $DURABLE_API_TOKEN: set, hidden)")
	require.Contains(t, string(out), "Workflows: user-signup.")

	cmd = exec.Command(exe, "frobnicate")
	out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v", err)
	require.Equal(t, 2, exit.ExitCode())
	require.Equal(t, "signup: unknown command \"frobnicate\"; see 'signup help'\n", string(out), "one line, no help dumped")
}
