// Durable functions: a workflow written as plain Go. Each call to Do, Go,
// SleepFor or AwaitEvent is checkpointed as the function makes it; when the
// function must wait (a sleep, an event, a retry's backoff) its execution
// ends, holding nothing, and later it runs again from the start, every
// call it made already answering from its record. So the function must
// make the same calls each time: anything that reads the world goes
// inside a call.
//
//	go run ./examples/functions
//
// With DURABLE_DATABASE_URL set (a PostgreSQL URL) it runs on PostgreSQL,
// in the schema durable_examples (or DURABLE_SCHEMA).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/examples/internal/example"
)

// Trip is the input of a run.
type Trip struct {
	ID   string
	From string
	To   string
}

// Quote is a carrier's price.
type Quote struct {
	Carrier string
	Cents   int
}

// Booking is the output of a run.
type Booking struct {
	Status  string // "confirmed" or "cancelled"
	Carrier string
	Ref     string
	By      string `json:",omitempty"`
}

// Timings of the flow: hours in production, short here.
const (
	HoldFor        = 200 * time.Millisecond // the carrier holds the seat this long before we ask
	ConfirmTimeout = 500 * time.Millisecond // how long the traveller has to confirm
)

func main() {
	if err := run(context.Background(), os.Stdout, example.FromEnv()); err != nil {
		fmt.Fprintln(os.Stderr, "functions:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, db example.DB) error {
	var executions, bookings atomic.Int32
	book := durable.NewFunction("book-trip", func(ctx durable.FuncContext, t Trip) (Booking, error) {
		executions.Add(1)

		// Ask three carriers at once (Go), and wait for them all.
		var quotes []*durable.Future[Quote]
		var all []durable.Awaitable
		for i, carrier := range []string{"rail", "coach", "air"} {
			f := durable.Go(ctx, "quote-"+carrier, func(ctx durable.Context) (Quote, error) {
				return Quote{Carrier: carrier, Cents: []int{5400, 2900, 8900}[i]}, nil // call the carrier here
			})
			quotes = append(quotes, f)
			all = append(all, f)
		}
		if err := durable.AwaitAll(ctx, all...); err != nil {
			return Booking{}, err
		}
		best := Quote{}
		for _, f := range quotes { // a branch on recorded results
			q, err := f.Get(ctx)
			if err != nil {
				return Booking{}, err
			}
			if best.Carrier == "" || q.Cents < best.Cents {
				best = q
			}
		}

		// Book the cheapest, with retries.
		ref, err := durable.Do(ctx, "book", func(ctx durable.Context) (string, error) {
			bookings.Add(1)
			return fmt.Sprintf("%s-%s-%s", best.Carrier, t.From, t.To), nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 3}))
		if err != nil {
			return Booking{}, err // a *durable.StepError: its retries are spent
		}

		// Sleep durably, then wait for the traveller's confirmation.
		durable.SleepFor(ctx, "hold", HoldFor)
		confirm, err := durable.AwaitEvent[string](ctx, "await-confirmation", "confirm:"+t.ID,
			durable.WithWaitTimeout(ConfirmTimeout), durable.WithLookback(time.Hour))
		if errors.Is(err, durable.ErrWaitTimeout) { // compensate
			if _, err := durable.Do(ctx, "cancel-booking", func(ctx durable.Context) (string, error) {
				return "cancelled " + ref, nil
			}); err != nil {
				return Booking{}, err
			}
			return Booking{Status: "cancelled", Carrier: best.Carrier, Ref: ref}, nil
		}
		if err != nil {
			return Booking{}, err
		}
		return Booking{Status: "confirmed", Carrier: best.Carrier, Ref: ref, By: confirm}, nil
	}, durable.MaxParallel(3))

	st, err := example.Open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	engine, err := durable.New(st.Store, durable.Config{Logger: example.Logger()})
	if err != nil {
		return err
	}
	if err := engine.Register(book); err != nil {
		return err
	}
	if err := engine.Start(ctx); err != nil {
		return err
	}
	defer engine.Stop(context.Background())
	fmt.Fprintln(out, "running", st.Where())

	// t-1's traveller confirms at once (the wait's lookback finds it);
	// t-2's never does.
	if _, err := engine.SendEvent(ctx, "tenant-1", "confirm:t-1", "ada"); err != nil {
		return err
	}
	for _, trip := range []Trip{{ID: "t-1", From: "PAR", To: "LYS"}, {ID: "t-2", From: "PAR", To: "NCE"}} {
		executions.Store(0)
		bookings.Store(0)
		res, err := book.Run(ctx, engine, "tenant-1", trip)
		if err != nil {
			return err
		}
		b, err := book.Output(res)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %s %+v\n", trip.ID, res.Status, b)
		fmt.Fprintf(out, "  the body ran more than once: %t; the booking call ran %d time\n", executions.Load() > 1, bookings.Load())
		for _, s := range res.Steps { // the body, then one record per call
			fmt.Fprintf(out, "  %-24s %s\n", s.Name, s.State)
		}
	}
	return nil
}
