package httpapi_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/memstore"
)

// New mounts the API in a server of your own: a bearer token authenticates
// every request, and each customer sees only its own tenant's runs.
func ExampleNew() {
	wf := durable.NewWorkflow[string]("welcome")
	durable.Step(wf, "email", func(ctx durable.Context, user string) (string, error) {
		return "sent to " + user, nil
	})
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet})
	if err != nil {
		panic(err)
	}
	if err := e.Register(wf); err != nil { // triggered by name, not executed: no Start
		panic(err)
	}
	api := httpapi.New(e, httpapi.Options{
		Authenticate: httpapi.BearerToken("s3cret"),
		Tenant: func(r *http.Request) (string, bool, error) {
			customer := r.Header.Get("X-Customer") // in real life: from the verified credentials
			if customer == "" {
				return "", false, errors.New("no customer")
			}
			return customer, false, nil
		},
	})
	mux := http.NewServeMux()
	mux.Handle("/", api)

	req := httptest.NewRequest("POST", "/api/v1/workflows/welcome/runs", strings.NewReader(`{"input":"ada@example.com"}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("X-Customer", "acme")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))

	req = httptest.NewRequest("GET", "/api/v1/runs", nil)
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, req) // no token
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output:
	// 201 application/json
	// 401 application/problem+json
}
