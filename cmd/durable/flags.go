package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// exitUsage is the exit status of bad command lines.
const exitUsage = 2

// parseFlags parses a command's flags; it returns -1 to continue, or the
// exit code (0 for -h, 2 for bad flags or stray arguments).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, maxArgs int) int {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() > maxArgs {
		fmt.Fprintf(stderr, "durable %s: unexpected argument %q\n", fs.Name(), fs.Arg(maxArgs))
		fs.Usage()
		return exitUsage
	}
	return -1
}
