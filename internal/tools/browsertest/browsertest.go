// Package browsertest holds what the dashboard's browser tests (httpapi's
// and cmd/durable's) share: a headless Chromium that fails the test on any
// console error, and screenshots into docs/.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// Chromium returns Debian's Chromium, or skips the test without it (fails
// it under CI=true: CI must not pass by skipping browser tests).
func Chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium: install it (apt-get install -y chromium)")
	}
	t.Skip("no chromium: install it (apt-get install -y chromium) to run the browser tests")
	return ""
}

// New starts a headless Chromium and returns its context, with a timeout
// for the test's actions. Console errors, uncaught exceptions and browser
// log errors (failed loads) are collected; the test fails on any, except
// that for a test that expects the API to refuse some of the page's
// requests, a failed load of the API whose message has one of expected
// (such as "status of 409") is not a problem, and each of them must have
// been seen.
func New(t *testing.T, expected ...string) context.Context {
	t.Helper()
	exe := Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	require.NoError(t, chromedp.Do(ctx)) // start the browser, without a timeout
	cctx, stopConsole := context.WithCancel(ctx)
	messages := chromedp.Console(cctx)
	var problems []string
	seen := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return // the subscription ended
			}
			if m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleException {
				continue
			}
			if i := slices.IndexFunc(expected, func(e string) bool { return strings.Contains(m.Text, e) }); i >= 0 &&
				m.Source == "network" && strings.Contains(m.URL, "/api/v1/") {
				seen[expected[i]] = true
				continue
			}
			problems = append(problems, string(m.Type)+": "+m.Text+" "+m.URL)
		}
	}()
	t.Cleanup(func() {
		stopConsole()
		<-done
		cancelCtx()
		cancelAlloc()
		require.Empty(t, problems, "the page logged errors")
		for _, e := range expected {
			require.True(t, seen[e], "the page made no request that failed with %q", e)
		}
	})
	tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	return tctx
}

// Screenshots takes full-page screenshots into the directory docs (the
// repository's docs/, relative to the test's package) when
// DURABLE_UPDATE_SCREENSHOTS is set: shot(name) is an action, and the
// files are written when the test passes.
func Screenshots(t *testing.T, docs string) func(name string) chromedp.Action[chromedp.Void] {
	t.Helper()
	shots := map[string][]byte{}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		for name, b := range shots {
			require.NoError(t, os.WriteFile(filepath.Join(docs, name), b, 0o644))
		}
	})
	return func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if os.Getenv("DURABLE_UPDATE_SCREENSHOTS") == "" {
				return nil
			}
			b, err := chromedp.FullScreenshot(100)(ctx, tg)
			shots[name] = b
			return err
		})
	}
}
