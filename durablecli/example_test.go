package durablecli_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablecli"
	"github.com/effectivelabs/durable/pgstore"
)

// Signup is the input of the examples' workflow.
type Signup struct {
	Email string `json:"email"`
}

func signupWorkflow() *durable.Workflow[Signup] {
	wf := durable.NewWorkflow[Signup]("user-signup")
	durable.Step(wf, "create-account", func(ctx durable.Context, in Signup) (string, error) {
		return "acct-" + in.Email, nil
	})
	return wf
}

// A program's whole main: its binary has worker, serve, trigger, runs,
// schedules, ... for its workflows. Run it as "signup worker
// --database-url postgres://...", "signup trigger --workflow user-signup
// --input '{"email":"ada@example.com"}' --wait", "signup help".
func ExampleMain() {
	durablecli.Main(durablecli.Config{
		Workflows: []durable.Definition{signupWorkflow()},
	})
}

// Run is Main without the process around it: the arguments, the writers
// and the exit status are the caller's. A workflow the program does not
// serve is a usage error that names those it serves; the command line is
// checked before connecting, so this example needs no database.
func ExampleRun() {
	cfg := durablecli.Config{Name: "signup", Workflows: []durable.Definition{signupWorkflow()}}
	args := []string{"trigger", "--workflow", "order-processing", "--database-url", "postgres://127.0.0.1:5432/app"}
	code := durablecli.Run(context.Background(), cfg, args, os.Stdout, os.Stdout)
	fmt.Println("exit status", code)
	// Output:
	// signup trigger: unknown workflow "order-processing": this program can start user-signup
	// exit status 2
}

// With a default input, "trigger" and "schedules create" may leave
// --input out, and --input is decoded into the workflow's input type
// strictly before connecting: a misspelt field is a usage error.
func ExampleDefaultInput() {
	wf := signupWorkflow()
	cfg := durablecli.Config{
		Name:          "signup",
		Workflows:     []durable.Definition{wf},
		DefaultInputs: []durablecli.Input{durablecli.DefaultInput(wf, Signup{Email: "test@example.com"})},
	}
	args := []string{"trigger", "--workflow", "user-signup", "--input", `{"emial":"ada@example.com"}`,
		"--database-url", "postgres://127.0.0.1:5432/app"}
	code := durablecli.Run(context.Background(), cfg, args, os.Stdout, os.Stdout)
	fmt.Println("exit status", code)
	// Output:
	// signup trigger: --input for user-signup: invalid JSON: json: unknown field "emial"
	// exit status 2
}

// Flags gives the commands that register the workflows flags of the
// program's own, and builds the workflows from them once they are parsed.
func ExampleConfig_flags() {
	cfg := durablecli.Config{
		Name: "signup",
		Flags: func(command string, fs *flag.FlagSet) durablecli.Load {
			from := fs.String("mail-from", "hello@example.com", "the sender of welcome mails")
			return func(ctx context.Context, db durablecli.DB) ([]durable.Definition, []durablecli.Input, error) {
				if *from == "" {
					return nil, nil, durablecli.UsageErrorf("--mail-from must not be empty")
				}
				wf := durable.NewWorkflow[Signup]("user-signup")
				durable.Step(wf, "send-welcome", func(ctx durable.Context, in Signup) (string, error) {
					return "mail from " + *from + " to " + in.Email, nil
				})
				return []durable.Definition{wf}, nil, nil
			}
		},
	}
	args := []string{"worker", "--mail-from", "", "--database-url", "postgres://127.0.0.1:5432/app"}
	code := durablecli.Run(context.Background(), cfg, args, os.Stdout, os.Stdout)
	fmt.Println("exit status", code)
	// Output:
	// signup worker: --mail-from must not be empty
	// exit status 2
}

// Migrations are the program's own schema migrations: "migrate up" and the
// worker apply them after durable's, once, under durable's migration lock.
// A program reads them from its files (here a testing/fstest.MapFS stands
// in for the program's embed.FS, "//go:embed migrations/*.sql") or
// declares them in Go. A version given twice is an error of the Config,
// reported before any command runs, so this example needs no database.
func ExampleConfig_migrations() {
	files := fstest.MapFS{
		"migrations/001_create_accounts.up.sql":   {Data: []byte(`CREATE TABLE public.accounts (email text PRIMARY KEY)`)},
		"migrations/001_create_accounts.down.sql": {Data: []byte(`DROP TABLE public.accounts`)},
	}
	migrations, err := pgstore.AppMigrationsFS(files, "migrations")
	if err != nil {
		fmt.Println(err)
		return
	}
	migrations = append(migrations, pgstore.AppMigration{
		Version: 1, Name: "seed_accounts", // should have been 2
		UpFunc: func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO public.accounts VALUES ('ops@example.com')`)
			return err
		},
	})
	cfg := durablecli.Config{Name: "signup", Workflows: []durable.Definition{signupWorkflow()}, Migrations: migrations}
	code := durablecli.Run(context.Background(), cfg, []string{"migrate", "up", "--database-url", "postgres://127.0.0.1:5432/app"},
		os.Stdout, os.Stdout)
	fmt.Println("exit status", code)
	// Output:
	// signup: invalid durablecli.Config: Migrations: pgstore: invalid application migration 001_seed_accounts: version 1 is given twice (also to "create_accounts")
	// exit status 1
}
