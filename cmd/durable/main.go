// Command durable is the command-line companion of the durable library:
// durablecli's command line (migrations, workers, the HTTP API, triggers,
// operating runs, schedules, events and signals) for the built-in
// workflows (the order-processing demo, the benchmark workflows and the
// chaos workflow of the crash tests), plus a demo and benchmarks.
//
// To get the same command line for your own workflows, build your own
// binary with the package durablecli.
package main

import (
	"github.com/effectivelabs/durable/durablecli"
)

func main() {
	durablecli.Main(config())
}

// config is the command line of this binary.
func config() durablecli.Config {
	defs, inputs := builtin(workloadOptions())
	return durablecli.Config{
		Name:          "durable",
		Workflows:     defs,
		DefaultInputs: inputs,
		Flags:         builtinFlags,
		Commands: []durablecli.Command{
			{Name: "demo", Summary: "run the order-processing demo workflow and watch it (in memory or on PostgreSQL)", Run: demoCmd},
			{Name: "bench", Summary: "measure throughput, latency, fairness and idle cost on PostgreSQL", Run: benchCmd},
		},
	}
}
