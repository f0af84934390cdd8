package durabletest_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletest"
	"github.com/effectivelabs/durable/durabletype"
)

// Signup is the input of the signup workflow.
type Signup struct{ Email string }

// signupFlow is a signup workflow and the steps a test looks at: it
// provisions the account in a child run, waits (up to a week) for the
// e-mail address to be verified, waits a day, then sends a welcome mail
// through a mail server that may be busy (retried with backoff).
type signupFlow struct {
	wf        *durable.Workflow[Signup]
	accountID *durable.StepRef[int] // the child workflow's result
	account   *durable.StepRef[int]
	verified  *durable.StepRef[bool]
	welcome   *durable.StepRef[string]
}

// newSignupFlow declares the workflow; send is the mail server, a fake in
// tests.
func newSignupFlow(send func(to, body string) error) *signupFlow {
	provision := durable.NewWorkflow[string]("provision-account")
	accountID := durable.Step(provision, "create-account", func(ctx durable.Context, email string) (int, error) {
		return 42, nil
	})

	wf := durable.NewWorkflow[Signup]("signup")
	account := durable.Child(wf, "provision", provision, accountID, func(ctx durable.Context, in Signup) (string, error) {
		return in.Email, nil
	})
	verified := durable.WaitForEvent[bool](wf, "verified", func(ctx durable.Context, in Signup) (string, error) {
		return "verified:" + in.Email, nil
	}, durable.After(account), durable.WithWaitTimeout(7*24*time.Hour))
	nap := durable.Sleep(wf, "wait-a-day", 24*time.Hour, durable.After(verified))
	welcome := durable.Step(wf, "send-welcome", func(ctx durable.Context, in Signup) (string, error) {
		id, _ := account.Output(ctx)
		body := fmt.Sprintf("welcome, your account is %d", id)
		if err := send(in.Email, body); err != nil {
			return "", err
		}
		return body, nil
	}, durable.After(nap, account), durable.WithRetry(durable.RetryPolicy{
		MaxRetries: 3, InitialDelay: time.Minute, MaxDelay: time.Hour,
	}))
	return &signupFlow{wf: wf, accountID: accountID, account: account, verified: verified, welcome: welcome}
}

// testSignup is a test of the signup workflow, as a func TestSignup(t
// *testing.T) in your package would be. Time is virtual: the day's sleep
// and the retry backoffs pass at once, and are measured to the nanosecond.
func testSignup(t *testing.T) {
	durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
		busy := 2 // the mail server refuses the first two mails
		var sent []string
		flow := newSignupFlow(func(to, body string) error {
			if busy > 0 {
				busy--
				return errors.New("mail server busy")
			}
			sent = append(sent, to+": "+body)
			return nil
		})
		start := time.Now()
		id := durabletest.Start(k, flow.wf, Signup{Email: "ada@example.com"})

		// The account is provisioned by a child run; then the run waits
		// for the address to be verified.
		k.WaitStep(id, flow.verified, durabletype.TaskWaiting)
		child := k.Child(k.Get(id), flow.account)
		durabletest.RequireCompleted(t, child)
		durabletest.RequireOutput(t, child, flow.accountID, 42)

		if n := k.SendEvent("verified:ada@example.com", true); n != 1 {
			t.Fatalf("the event reached %d waiting steps, want 1", n)
		}
		// A day later, not a moment sooner, the welcome mail is tried.
		k.Advance(24*time.Hour - time.Nanosecond)
		durabletest.RequireState(t, k.Get(id), flow.welcome, durabletype.TaskPending)

		res := k.Settle(id)
		durabletest.RequireCompleted(t, res)
		durabletest.RequireOutput(t, res, flow.welcome, "welcome, your account is 42")
		durabletest.RequireAttempts(t, res, flow.welcome, 3) // busy twice, then sent
		if len(sent) != 1 {
			t.Fatalf("sent %v, want one mail", sent)
		}
		// A day, then retries after a minute and after two.
		if took := res.FinishedAt.Sub(start); took != 24*time.Hour+3*time.Minute {
			t.Fatalf("the signup took %s", took)
		}
	})
}

// Example shows a test of a signup workflow (a child run, an event wait,
// a day's sleep, retries), written with durabletest: testSignup above is
// what would be a func TestSignup(t *testing.T) in your package.
//
// This example has no output to check: testing/synctest, which gives the
// kit its virtual time, needs a test's *testing.T, which an example does
// not have. The package's own tests run testSignup as TestExampleSignup.
func Example() {
	_ = testSignup
}
