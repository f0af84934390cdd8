package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MethodServerLog names the statement count read from the server's log:
// with log_statement = 'all' on the measured database, PostgreSQL logs
// every statement a client sends, pings, BEGIN and COMMIT included, one
// "LOG:  statement:" (simple protocol) or "LOG:  execute" (extended
// protocol) line each, prefixed with the backend's PID.
const MethodServerLog = "server log"

// logFormat recognises the statement lines of a PostgreSQL stderr log
// written with one log_line_prefix, and extracts their backend PID and
// database.
type logFormat struct {
	re  *regexp.Regexp
	pid int // submatch of %p
	db  int // submatch of %d; 0 when the prefix has no %d
}

// errNoPID is returned for a log_line_prefix without %p: statements
// cannot be told apart by backend.
var errNoPID = errors.New("log_line_prefix has no %p (process ID)")

// parseLogLinePrefix compiles a log_line_prefix (e.g. Debian's
// "%m [%p] %q%u@%d ") into a pattern for statement lines.
func parseLogLinePrefix(prefix string) (*logFormat, error) {
	var b strings.Builder
	b.WriteString("^")
	f := &logFormat{}
	group := 0
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		if c != '%' || i+1 == len(prefix) {
			b.WriteString(regexp.QuoteMeta(string(c)))
			continue
		}
		// An escape, with optional padding: %-10p, %10p.
		j := i + 1
		for j < len(prefix) && (prefix[j] == '-' || (prefix[j] >= '0' && prefix[j] <= '9')) {
			j++
		}
		if j == len(prefix) {
			b.WriteString(regexp.QuoteMeta(prefix[i:]))
			break
		}
		padded := j > i+1
		esc := prefix[j]
		i = j
		pad := ""
		if padded {
			pad = ` *`
		}
		switch esc {
		case 'p':
			group++
			f.pid = group
			b.WriteString(pad + `(\d+)` + pad)
		case 'd':
			group++
			f.db = group
			b.WriteString(pad + `(.*?)` + pad)
		case 'm':
			b.WriteString(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \S+`)
		case 't', 's':
			b.WriteString(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+`)
		case 'n':
			b.WriteString(`\d+\.\d{3}`)
		case 'q':
			// Stops the prefix for processes that are not sessions;
			// statements come from sessions.
		case '%':
			b.WriteString("%")
		default: // %a %u %r %h %b %P %i %e %c %l %v %x %Q and unknown ones
			b.WriteString(`.*?`)
		}
	}
	if f.pid == 0 {
		return nil, errNoPID
	}
	b.WriteString(`LOG:  (?:statement: |execute [^:]*: )`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("log_line_prefix %q: %w", prefix, err)
	}
	f.re = re
	return f, nil
}

// logCount is the statements logged for one database between two marker
// statements, per backend PID.
type logCount struct {
	db                 string // the database's name
	startMark, endMark string // text of the statements that open and close the window
	started, ended     bool
	perPID             map[int32]int64
}

// add processes one line of the log.
func (f *logFormat) add(c *logCount, line string) {
	if c.ended {
		return
	}
	m := f.re.FindStringSubmatchIndex(line)
	if m == nil {
		return // not a statement (DETAIL lines, errors, continuation lines)
	}
	if f.db > 0 && line[m[2*f.db]:m[2*f.db+1]] != c.db {
		return
	}
	text := line[m[1]:]
	switch {
	case !c.started:
		c.started = strings.Contains(text, c.startMark)
		return
	case strings.Contains(text, c.endMark):
		c.ended = true
		return
	}
	pid, err := strconv.ParseInt(line[m[2*f.pid]:m[2*f.pid+1]], 10, 32)
	if err != nil {
		return
	}
	if c.perPID == nil {
		c.perPID = map[int32]int64{}
	}
	c.perPID[int32(pid)]++
}

// serverLog follows the server's log file from the start of the window.
type serverLog struct {
	path   string
	format *logFormat
	file   *os.File
	pos    int64
	part   []byte // an incomplete last line
	count  logCount
}

// debianLogDir is where Debian's pg_ctlcluster has a cluster's stderr
// written when logging_collector is off.
const debianLogDir = "/var/log/postgresql"

// openServerLog finds the server's log file and positions it at its end.
// override is --server-log. It fails when the log cannot be found or read,
// or lines cannot be attributed to backends.
func openServerLog(ctx context.Context, stats *pgxpool.Pool, override string) (*serverLog, error) {
	var prefix, dest, collector, cluster string
	var version int
	if err := stats.QueryRow(ctx, `SELECT current_setting('log_line_prefix'), current_setting('log_destination'),
  current_setting('logging_collector'), current_setting('cluster_name'), current_setting('server_version_num')::int`,
		pgx.QueryExecModeSimpleProtocol).Scan(&prefix, &dest, &collector, &cluster, &version); err != nil {
		return nil, fmt.Errorf("reading the log settings: %w", err)
	}
	format, err := parseLogLinePrefix(prefix)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(dest, "stderr") {
		return nil, fmt.Errorf("log_destination is %q: only the stderr format is read", dest)
	}
	path := override
	if path == "" {
		if path, err = defaultLogPath(ctx, stats, collector == "on", cluster, version); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the server log: %w", err)
	}
	pos, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("server log %s: %w", path, err)
	}
	return &serverLog{path: path, format: format, file: f, pos: pos}, nil
}

// defaultLogPath is pg_current_logfile() with the logging collector on;
// otherwise Debian's file for the cluster, when it exists.
func defaultLogPath(ctx context.Context, stats *pgxpool.Pool, collector bool, cluster string, version int) (string, error) {
	if collector {
		var rel, dir *string
		if err := stats.QueryRow(ctx, `SELECT pg_current_logfile('stderr'), current_setting('data_directory')`,
			pgx.QueryExecModeSimpleProtocol).Scan(&rel, &dir); err != nil {
			return "", fmt.Errorf("finding the server log (pg_current_logfile): %w", err)
		}
		if rel == nil || dir == nil {
			return "", errors.New("the logging collector writes no stderr log")
		}
		if filepath.IsAbs(*rel) {
			return *rel, nil
		}
		return filepath.Join(*dir, *rel), nil
	}
	// Debian names the file after cluster_name, "15/main"; else guess main.
	major, name := strconv.Itoa(version/10000), "main"
	if v, n, ok := strings.Cut(cluster, "/"); ok && v != "" && n != "" {
		major, name = v, n
	}
	path := filepath.Join(debianLogDir, "postgresql-"+major+"-"+name+".log")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("logging_collector is off and %s is not readable (%w): pass --server-log", path, err)
	}
	return path, nil
}

// read processes what was appended since the last read.
func (l *serverLog) read() error {
	st, err := l.file.Stat()
	if err != nil {
		return err
	}
	if st.Size() < l.pos {
		return fmt.Errorf("server log %s was truncated during the measurement (rotated?)", l.path)
	}
	r := bufio.NewReaderSize(io.NewSectionReader(l.file, l.pos, st.Size()-l.pos), 1<<16)
	for {
		chunk, err := r.ReadSlice('\n')
		l.pos += int64(len(chunk))
		if errors.Is(err, bufio.ErrBufferFull) {
			l.part = append(l.part, chunk...)
			continue
		}
		if err != nil { // io.EOF: an incomplete line, kept for later
			l.part = append(l.part, chunk...)
			return nil
		}
		line := string(bytes.TrimRight(chunk, "\r\n"))
		if len(l.part) > 0 {
			line = string(l.part) + line
			l.part = l.part[:0]
		}
		l.format.add(&l.count, line)
	}
}

// waitFor reads the log until done reports true or timeout passes.
func (l *serverLog) waitFor(ctx context.Context, done func() bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := l.read(); err != nil {
			return err
		}
		if done() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no marker statement in %s after %s: is it this server's log?", l.path, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // the server appends as it goes
		}
	}
}

func (l *serverLog) close() {
	if l != nil && l.file != nil {
		l.file.Close()
	}
}
