package pgstore_test

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/pgstore"
)

// keepaliveTimer reads a socket's keepalive timer from ss's output, in
// iproute2's format: "119min", "1min30sec", "10sec", "9.916ms" (9 s and
// 916 ms), "180ms".
var keepaliveTimer = regexp.MustCompile(`timer:\(keepalive,(?:(\d+)min)?(?:(\d+)(?:sec|\.))?(?:(\d+)ms)?,`)

// ssTimer converts keepaliveTimer's submatches to a duration.
func ssTimer(m []string) time.Duration {
	var d time.Duration
	for i, unit := range []time.Duration{time.Minute, time.Second, time.Millisecond} {
		if n, err := strconv.Atoi(m[i+1]); err == nil {
			d += time.Duration(n) * unit
		}
	}
	return d
}

// TestElectorSessionKeepalives: the server probes the election session's
// client after 10 s of silence, so that the leadership of a worker whose
// host vanished (powered off, cut off from the network, no FIN or RST)
// passes to another worker in about 25 s rather than after the kernel's
// default of two hours of silence. The test reads the server side of the
// election connection's socket (ss, from iproute2): its keepalive timer is
// at most 10 s, where the pool's connections show the kernel's 2 hours.
func TestElectorSessionKeepalives(t *testing.T) {
	t.Parallel()
	ss, err := exec.LookPath("ss")
	if err != nil {
		t.Skip("ss (iproute2) is not installed: cannot read the server's socket timers")
	}
	s, pool, schema := setup(t)
	lctx, cancel := context.WithCancel(ctx)
	leading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Lead(lctx, "keeper", func(ctx context.Context) {
			close(leading)
			<-ctx.Done()
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("not elected")
	}

	var serverPort, clientPort *int
	require.NoError(t, pool.QueryRow(ctx, `SELECT inet_server_port(), (SELECT client_port FROM pg_stat_activity WHERE application_name = $1)`,
		pgstore.ApplicationName(schema, "elector:keeper")).Scan(&serverPort, &clientPort))
	if serverPort == nil || clientPort == nil || *clientPort < 0 {
		t.Skip("the test database is reached over a Unix socket, where there are no keepalives")
	}
	filter := "( sport = :" + strconv.Itoa(*serverPort) + " and dport = :" + strconv.Itoa(*clientPort) + " )"
	// While data is in flight the socket shows its retransmission timer
	// ("timer:(on,...)"); idle, its keepalive timer.
	var out []byte
	var m []string
	deadline := time.Now().Add(10 * time.Second)
	for m == nil && time.Now().Before(deadline) {
		out, err = exec.Command(ss, "-tnoH", "state", "established", filter).CombinedOutput()
		require.NoError(t, err, "%s", out)
		if len(out) == 0 {
			t.Skip("ss does not see the server's socket (another network namespace)")
		}
		if m = keepaliveTimer.FindStringSubmatch(string(out)); m == nil {
			time.Sleep(50 * time.Millisecond) // polling the socket's state, with a deadline
		}
	}
	require.NotNil(t, m, "the server's socket of the election session has no keepalive timer: %s", out)
	timer := ssTimer(m)
	t.Logf("the election session's server socket: keepalive in %s (%s)", timer, out)
	require.Positive(t, timer)
	require.LessOrEqual(t, timer, 10*time.Second, "the server waits the kernel's default before it probes the leader")
}

func TestSSTimer(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"119min": 119 * time.Minute, "1min30sec": 90 * time.Second, "10sec": 10 * time.Second,
		"9.916ms": 9916 * time.Millisecond, "180ms": 180 * time.Millisecond,
	} {
		m := keepaliveTimer.FindStringSubmatch("timer:(keepalive," + in + ",0)")
		require.NotNil(t, m, in)
		require.Equal(t, want, ssTimer(m), in)
	}
}
