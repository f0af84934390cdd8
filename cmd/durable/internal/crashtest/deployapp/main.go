// Command deployapp is a service of the rolling-deploy crash proof
// (cmd/durable/internal/crashtest, TestRollingDeploy), on durable's command
// line (durablecli): $DEPLOY_BUILD selects the build, "old" or "new" (see
// package deploy); $DEPLOY_SAME_VERSION=1 gives both builds' workflows one
// version, as before versions; $DEPLOY_NAP is the length of their sleeps;
// $DEPLOY_FN_VERSION is the version of the build's durable function,
// deploy-fn ("1" by default, in both builds).
// Every step records its execution in the table deploy_steps of the
// command's schema.
package main

import (
	"cmp"
	"context"
	"flag"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/crashtest/deploy"
	"github.com/effectivelabs/durable/durablecli"
)

func main() {
	build := os.Getenv("DEPLOY_BUILD")
	same := os.Getenv("DEPLOY_SAME_VERSION") == "1"
	nap, err := time.ParseDuration(os.Getenv("DEPLOY_NAP"))
	if err != nil {
		nap = 3 * time.Second
	}
	fnVersion := cmp.Or(os.Getenv("DEPLOY_FN_VERSION"), "1")
	all := func(rec deploy.Recorder) []durable.Definition {
		return append(deploy.New(build, nap, same, rec).All(), deploy.NewFunc(build, nap, fnVersion, rec))
	}
	durablecli.Main(durablecli.Config{
		Name:      "deployapp",
		Workflows: all(nil),
		Flags: func(string, *flag.FlagSet) durablecli.Load {
			return func(ctx context.Context, db durablecli.DB) ([]durable.Definition, []durablecli.Input, error) {
				table := pgx.Identifier{db.Schema, "deploy_steps"}.Sanitize()
				rec := func(ctx durable.Context, build, workflow, version, step string) error {
					_, err := db.Pool.Exec(ctx, `INSERT INTO `+table+` (run_id, workflow, step, build, version, attempt)
VALUES ($1, $2, $3, $4, $5, $6)`, ctx.RunID(), workflow, step, build, version, ctx.Attempt())
					return err
				}
				return all(rec), nil, nil
			}
		},
	})
}
