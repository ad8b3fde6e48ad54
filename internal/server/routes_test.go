package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/api/apitest"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/console"
	"github.com/sagacity-go/sagacity/internal/server"
)

// gateway stands in for the MCP gateway, so that the route table has /mcp.
type gateway struct{}

func (gateway) Serve(http.ResponseWriter, *http.Request) error { return nil }

// TestOpenAPIRoutes: every route under /sagacity is an operation of the
// document, and every operation of the document is a route.
func TestOpenAPIRoutes(t *testing.T) {
	c, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	// Every route the server has: the approval endpoints and the MCP
	// gateway are on, as a server in dev mode serves them.
	o := server.Options{API: &api.Handlers{}, Console: &console.Handlers{Mode: auth.ModeDev}, MCP: gateway{}, ApprovalEndpoints: true}
	routed := map[string]bool{}
	err = chi.Walk(server.Routes(o), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed[method+" "+route] = true
		return nil
	})
	if err != nil || len(routed) == 0 {
		t.Fatalf("walking the routes: %v, %d routes", err, len(routed))
	}
	documented := map[string]bool{}
	for path, item := range c.Model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().FromOldest() {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	for route := range routed {
		if _, path, _ := strings.Cut(route, " "); strings.HasPrefix(path, "/sagacity/") && !documented[route] {
			t.Errorf("route %s is not in the OpenAPI document", route)
		}
	}
	for op := range documented {
		if !routed[op] {
			t.Errorf("the OpenAPI document lists %s, which is no route", op)
		}
	}
}
