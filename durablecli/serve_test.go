package durablecli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/clitest"
)

// TestServe starts "durable serve" on a free port with a token, checks the
// probes, an authenticated endpoint with and without the token, a trigger
// by name and a run's page, then stops it as a signal would.
func TestServe(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	worker := p.StartWorker(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	exited := make(chan int, 1)
	go func() {
		code := run(ctx, p.Flags("serve", "--addr", "127.0.0.1:0", "--token", "tok-123"), io.Discard, pw)
		pw.Close()
		exited <- code
	}()
	log := clitest.NewLines(pr)
	log.WaitFor(t, "durable serve: listening", 30*time.Second)
	m := regexp.MustCompile(`addr=(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(log.String())
	require.NotNil(t, m, log.String())
	base := m[1]

	get := func(path, token string) (int, string) {
		req, err := http.NewRequest("GET", base+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/healthz", "")
	require.Equal(t, 200, code, body)
	code, body = get("/readyz", "")
	require.Equal(t, 200, code, body)
	code, body = get("/", "") // the dashboard's page; it asks for the token
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `<script src="ui/app.js" defer></script>`)
	code, body = get("/api/v1/runs", "")
	require.Equal(t, 401, code, body)
	code, body = get("/api/v1/runs", "wrong")
	require.Equal(t, 401, code, body)
	code, body = get("/api/v1/runs", "tok-123")
	require.Equal(t, 200, code, body)
	code, body = get("/api/v1/workflows/order-processing", "tok-123")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `"name":"fraud-window","kind":"sleep"`)

	// Trigger a workflow of testConfig by name; the worker runs it.
	req, err := http.NewRequest("POST", base+"/api/v1/workflows/bench-dag/runs", strings.NewReader(`{"tenant":"t1","input":3}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok-123")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var st struct {
		RunID string `json:"run_id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	resp.Body.Close()
	require.Equal(t, 201, resp.StatusCode)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	res, err := worker.Wait(wctx, uuid.MustParse(st.RunID))
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	code, body = get("/api/v1/runs/"+st.RunID, "tok-123")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `"status":"COMPLETED"`)

	cancel() // what SIGTERM does to main's context
	select {
	case code := <-exited:
		require.Equal(t, 0, code, log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop:\n%s", log.String())
	}
	require.Contains(t, log.String(), "durable serve: stopped")
}

func TestServeFlags(t *testing.T) { // not parallel: it sets the environment
	code, out, errOut := runCLI(t, "serve", "-h")
	require.Equal(t, 0, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "Usage: durable serve")
	require.Contains(t, errOut, "$DURABLE_API_TOKEN")

	code, _, errOut = runCLI(t, "serve", "--database-url=")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--database-url (or $DURABLE_DATABASE_URL) is required")

	t.Setenv(envAPIToken, "") // no token from the environment
	code, _, errOut = runCLI(t, "serve", "--database-url", "postgres://x@127.0.0.1:1/db", "--addr", ":8080")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "is not a loopback address")

	code, _, errOut = runCLI(t, "serve", "--database-url", "postgres://x@127.0.0.1:1/db", "--max-body", "0")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--max-body must be positive")

	code, out, _ = runCLI(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "  serve     serve the HTTP API")

	for addr, want := range map[string]bool{"127.0.0.1:80": true, "localhost:1": true, "[::1]:8080": true,
		":8080": false, "0.0.0.0:8080": false, "example.com:80": false, "nonsense": false} {
		require.Equal(t, want, loopback(addr), addr)
	}
}
