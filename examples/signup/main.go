// Command signup is a program that serves its own workflow, user-signup,
// with durable's command line: "signup worker" executes its runs, "signup
// trigger --workflow user-signup --input '{...}'" starts them, "signup
// serve" is the HTTP API and dashboard, and "signup runs", "signup
// schedules", ... operate them. Run "signup help" for every command.
//
//	export DURABLE_DATABASE_URL=postgres://user:password@127.0.0.1:5432/app
//	go build -o signup ./examples/signup
//	./signup migrate up
//	./signup worker &
//	./signup trigger --workflow user-signup --input '{"email":"ada@example.com"}' --wait
package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablecli"
)

// Signup is the input of a user-signup run.
type Signup struct {
	Email string `json:"email"`
	Name  string `json:"name"`
}

func main() {
	durablecli.Main(durablecli.Config{
		Workflows: []durable.Definition{signupWorkflow()},
	})
}

// signupWorkflow creates the account, then sends the welcome mail, which
// is retried: the mail server refuses the first attempt, as busy ones do.
func signupWorkflow() *durable.Workflow[Signup] {
	wf := durable.NewWorkflow[Signup]("user-signup")
	account := durable.Step(wf, "create-account", func(ctx durable.Context, in Signup) (string, error) {
		if !strings.Contains(in.Email, "@") {
			return "", durable.Terminal(fmt.Errorf("invalid email %q", in.Email))
		}
		return "acct-" + strings.ToLower(in.Email), nil
	})
	durable.Step(wf, "send-welcome", func(ctx durable.Context, in Signup) (string, error) {
		if ctx.Attempt() == 1 {
			return "", errors.New("mail server busy, try again")
		}
		id, _ := account.Output(ctx)
		return fmt.Sprintf("welcome mail sent to %s (account %s)", in.Email, id), nil
	}, durable.After(account), durable.WithRetry(durable.RetryPolicy{MaxRetries: 3, InitialDelay: 200 * time.Millisecond}))
	return wf
}
