// Command txapp is the service of the transactional-step crash proof
// (cmd/durable/internal/crashtest, TestTxStepExactlyOnce), on durable's
// command line (durablecli): it serves the workflow tx-effects (see
// package txeffects), whose steps write to tables of the command's schema.
package main

import (
	"context"
	"flag"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/crashtest/txeffects"
	"github.com/effectivelabs/durable/durablecli"
)

func main() {
	durablecli.Main(durablecli.Config{
		Name:      "txapp",
		Workflows: []durable.Definition{txeffects.New(nil, "")},
		Flags: func(string, *flag.FlagSet) durablecli.Load {
			return func(ctx context.Context, db durablecli.DB) ([]durable.Definition, []durablecli.Input, error) {
				return []durable.Definition{txeffects.New(db.Pool, db.Schema)}, nil, nil
			}
		},
	})
}
