package durablecli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/effectivelabs/durable/internal/core/dag"
)

// Values read from files: --input-file and --jsonl of "trigger",
// --payload-file of "events send" and "signal". A path of "-" reads the
// standard input (Config.Stdin).

// maxFileSize is the most bytes a file flag reads: a larger file is a
// usage error (split it). The engine's own limits (Config.MaxInputSize,
// MaxEventSize) apply to each value after.
const maxFileSize = 256 << 20

// readFile reads the file of flag (a path, or "-" for the standard input)
// whole; its errors name the flag and are usage errors.
func (c *cli) readFile(flag, path string) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = c.cfg.Stdin
		if r == nil {
			r = os.Stdin
		}
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%s %s: larger than %d MiB: split it", flag, path, maxFileSize>>20)
	}
	return b, nil
}

// jsonLine is one run of a --jsonl file: its line number, its input, and
// the idempotency key taken from it (--key-field), if any.
type jsonLine struct {
	line  int
	input []byte
	key   string
}

// lineError is the error of one line of a --jsonl file.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// maxLineErrors is the most line errors a --jsonl file reports.
const maxLineErrors = 20

// parseJSONLines splits a --jsonl file into runs: one per line that is
// not blank, each one JSON value (the run's input); with keyField, the
// run's idempotency key is that top-level field of the input, a string
// or a number. check checks each input further (the workflow's input
// type). It returns every line, or the errors of the first lines that
// are wrong (at most maxLineErrors), each a *lineError.
func parseJSONLines(b []byte, keyField string, check func([]byte) error) ([]jsonLine, []error) {
	var out []jsonLine
	var errs []error
	for n := 1; len(b) > 0 && len(errs) < maxLineErrors; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		jl := jsonLine{line: n, input: line}
		err := check(line)
		if err == nil && keyField != "" {
			jl.key, err = keyOf(line, keyField)
		}
		if err != nil {
			errs = append(errs, &lineError{line: n, err: err})
			continue
		}
		out = append(out, jl)
	}
	return out, errs
}

// keyOf returns the idempotency key of an input: its top-level field
// named field, a string or a number (as written).
func keyOf(input []byte, field string) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(input, &obj); err != nil || obj == nil {
		return "", fmt.Errorf("--key-field %s: the input is not a JSON object", strconv.Quote(field))
	}
	raw, ok := obj[field]
	if !ok {
		return "", fmt.Errorf("--key-field %s: the input has no such field", strconv.Quote(field))
	}
	var key string
	var num json.Number
	switch {
	case json.Unmarshal(raw, &key) == nil:
	case json.Unmarshal(raw, &num) == nil:
		key = num.String()
	default:
		return "", fmt.Errorf("--key-field %s: want a string or a number, got %s", strconv.Quote(field), dag.Quote(string(raw)))
	}
	if err := dag.IdempotencyKeyRule.Check("idempotency key (--key-field "+field+")", key); err != nil {
		return "", err
	}
	return key, nil
}

// errNoLines: a --jsonl file without a run.
var errNoLines = errors.New("no line holds an input")
