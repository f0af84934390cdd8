package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
)

// TestOpenAPICoversRoutes fails when a route of the handler is missing
// from the OpenAPI document, or the document names one the handler does
// not serve.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openAPIDoc, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3.1."), doc.OpenAPI)

	h := New(nil, Options{}) // the routes only: no request reaches the engine
	var served, documented []string
	for _, rt := range h.routes {
		served = append(served, rt.method+" "+rt.pattern)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			var o struct {
				OperationID string                     `json:"operationId"`
				Responses   map[string]json.RawMessage `json:"responses"`
			}
			require.NoError(t, json.Unmarshal(op, &o))
			require.NotEmpty(t, o.OperationID, "%s %s", method, path)
			require.NotEmpty(t, o.Responses, "%s %s", method, path)
		}
	}
	slices.Sort(served)
	slices.Sort(documented)
	for _, r := range served {
		require.Contains(t, documented, r, "route missing from openapi.json")
	}
	for _, d := range documented {
		require.Contains(t, served, d, "openapi.json documents a route the handler does not serve")
	}

	// The document is served as it is checked in.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/openapi.json", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Equal(t, openAPIDoc, rec.Body.Bytes())
}

// TestOpenAPIDocumentsListFields fails when a JSON field of a listed run
// (or of what it waits for), a run and its steps, a workflow with its
// versions and steps, a worker, the workers, the stats, the statuses or an
// upgrade is missing from its schema in
// the OpenAPI document, or the schema names one the API does not write.
func TestOpenAPIDocumentsListFields(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openAPIDoc, &doc))
	for schema, v := range map[string]any{"RunSummary": durablejson.Run{}, "Wait": durablejson.RunWait{}, "RunPage": durablejson.RunList{},
		"Run": durablejson.RunDetail{}, "Step": durablejson.Step{}, "Call": durablejson.Call{}, "RunError": durablejson.RunError{}, "Parent": durablejson.Parent{}, "Event": durablejson.Event{},
		"Workflow": durablejson.Workflow{}, "WorkflowVersion": durablejson.WorkflowVersion{}, "WorkflowStep": durablejson.WorkflowStep{}, "Workflows": durablejson.WorkflowList{},
		"Worker": durablejson.Worker{}, "Workers": durablejson.Workers{}, "Stats": durablejson.Stats{},
		"Storage": durablejson.Storage{}, "TableStorage": durablejson.TableStorage{},
		"Statuses": durablejson.Statuses{}, "StatusMeaning": durablejson.StatusMeaning{},
		"UpgradeRequest": upgradeRequest{}, "UpgradeResult": durablejson.Upgrade{}, "UpgradeRefusal": durablejson.UpgradeRefusal{}, "EventSent": durablejson.EventSent{}, "Problem": problemBody{}} {
		var fields []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			fields = append(fields, name)
		}
		var documented []string
		for name := range doc.Components.Schemas[schema].Properties {
			documented = append(documented, name)
		}
		slices.Sort(fields)
		slices.Sort(documented)
		require.Equal(t, fields, documented, "the properties of schema %s", schema)
	}
}

// TestOpenAPIRunStatuses fails when the run statuses the OpenAPI document
// lists are not durabletype.RunStatuses, in their order: a new status is
// documented, or this fails.
func TestOpenAPIRunStatuses(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas struct {
				RunStatus struct {
					Enum []durabletype.RunStatus `json:"enum"`
				} `json:"RunStatus"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openAPIDoc, &doc))
	require.Equal(t, durabletype.RunStatuses, doc.Components.Schemas.RunStatus.Enum)
}
