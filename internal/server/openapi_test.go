package server_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
	"github.com/pb33f/libopenapi-validator/paths"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/server"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// contract is the OpenAPI document the server serves (api.OpenAPI, the
// embedded bytes, never a copy), ready to hold requests and responses to.
type contract struct {
	// mu serialises checks: libopenapi renders a schema the first time it
	// is used, and two goroutines doing so at once race.
	mu      sync.Mutex
	doc     libopenapi.Document
	model   *v3.Document
	v       validator.Validator
	opts    *config.ValidationOptions
	schemas schema_validation.SchemaValidator
}

// Tokens are not checked against the document's security: dev mode serves
// anonymous callers, and the tests that send tokens check who may do what.
var contractOptions = []config.Option{config.WithFormatAssertions(), config.WithoutSecurityValidation()}

// openAPI loads the contract once for every test.
var openAPI = sync.OnceValues(func() (*contract, error) {
	doc, err := libopenapi.NewDocument(api.OpenAPI)
	if err != nil {
		return nil, err
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return nil, err
	}
	return &contract{doc: doc, model: &m.Model, v: validator.NewValidatorFromV3Model(&m.Model, contractOptions...),
		opts: config.NewValidationOptions(contractOptions...), schemas: schema_validation.NewSchemaValidator(contractOptions...)}, nil
})

// holds reports whether the document covers a request to path: everything
// under /sagacity, and the public paths it lists. HEAD is GET without a
// body; the document describes the GET.
func (c *contract) holds(method, path string) bool {
	return method != http.MethodHead && (strings.HasPrefix(path, "/sagacity/") || c.model.Paths.PathItems.GetOrZero(path) != nil)
}

// check reports how a response departs from the document, nil when it
// does not. A request the server accepted (2xx) must be one the document
// allows too; a refused one may be anything, as tests send bad requests
// on purpose. A request for a path or method the document does not list
// must have been refused as the server refuses them (see unlisted).
func (c *contract) check(req *http.Request, reqBody []byte, resp *http.Response, body []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	reset := func() {
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	item, errs, _ := paths.FindPath(req, c.model, c.opts)
	if len(errs) > 0 {
		return c.unlisted(req.URL.Path, errs, resp, body)
	}
	reset()
	if ok, errs := c.v.ValidateHttpResponse(req, resp); !ok {
		return joined(errs)
	}
	if resp.StatusCode/100 == 2 {
		reset()
		if ok, errs := c.v.ValidateHttpRequest(req); !ok {
			return fmt.Errorf("the server accepted a request the document does not allow: %w", joined(errs))
		}
	}
	return c.bodies(item.GetOperations().GetOrZero(strings.ToLower(req.Method)), resp, body)
}

// unlisted checks the answer to a request the document has no operation
// for: 404 for a path it does not list, 405 for a method, or 401 under
// /sagacity for a caller without a token, who is told nothing of which
// routes there are; an error body under /sagacity, where every error is
// JSON.
func (c *contract) unlisted(path string, why []*liberrors.ValidationError, resp *http.Response, body []byte) error {
	want := http.StatusNotFound
	if why[0].ValidationType == helpers.PathValidation && why[0].ValidationSubType == helpers.ValidationMissingOperation {
		want = http.StatusMethodNotAllowed
	}
	if resp.StatusCode == http.StatusUnauthorized && strings.HasPrefix(path, "/sagacity/") {
		want = http.StatusUnauthorized
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%w; the server answered %d, want %d", joined(why), resp.StatusCode, want)
	}
	if !strings.HasPrefix(path, "/sagacity/") {
		return nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("%w; the server answered %s, want application/json", joined(why), ct)
	}
	if ok, errs := c.schemas.ValidateSchemaBytes(c.schema("Error"), body); !ok {
		return fmt.Errorf("%d body is not an Error: %w", want, joined(errs))
	}
	return nil
}

// bodies checks what the validator leaves unread: a text/plain body is
// the string its schema describes, and each line of an NDJSON body the
// value its media type names as x-item-schema (OpenAPI 3.1 has no word
// for a stream of JSON values).
func (c *contract) bodies(op *v3.Operation, resp *http.Response, body []byte) error {
	// The validator has refused a status, or a media type, the operation
	// does not list.
	r := op.Responses.Codes.GetOrZero(strconv.Itoa(resp.StatusCode))
	if r.Content == nil {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	content := r.Content.GetOrZero(mt)
	switch {
	case mt == "text/plain" && content.Schema != nil:
		if ok, errs := c.schemas.ValidateSchemaObject(content.Schema.Schema(), string(body)); !ok {
			return joined(errs)
		}
	case mt == "application/x-ndjson":
		return c.lines(content, body)
	}
	return nil
}

// lines checks each line of an NDJSON body against its x-item-schema.
func (c *contract) lines(content *v3.MediaType, body []byte) error {
	node := content.Extensions.GetOrZero("x-item-schema")
	if node == nil {
		return errors.New("application/x-ndjson names no x-item-schema")
	}
	var ref struct {
		Ref string `yaml:"$ref"`
	}
	if err := node.Decode(&ref); err != nil {
		return err
	}
	schema := c.schema(strings.TrimPrefix(ref.Ref, "#/components/schemas/"))
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, engine.MaxNDJSONLine)
	for n := 1; sc.Scan(); n++ {
		if ok, errs := c.schemas.ValidateSchemaBytes(schema, sc.Bytes()); !ok {
			return fmt.Errorf("line %d %s: %w", n, sc.Bytes(), joined(errs))
		}
	}
	return sc.Err()
}

// schema is a schema of the document's components; nil when there is no
// such schema, which no value matches.
func (c *contract) schema(name string) *base.Schema {
	if p := c.model.Components.Schemas.GetOrZero(name); p != nil {
		return p.Schema()
	}
	return nil
}

func joined(errs []*liberrors.ValidationError) error {
	var all []error
	for _, e := range errs {
		all = append(all, e)
	}
	return errors.Join(all...)
}

// holdToContract fails the test when a response the test saw, or the
// request it accepted, departs from the OpenAPI document.
func (e *apiEnv) holdToContract(req *http.Request, reqBody string, resp *http.Response, body []byte) {
	e.t.Helper()
	c, err := openAPI()
	if err != nil {
		e.t.Fatalf("loading the OpenAPI document: %v", err)
	}
	if !c.holds(req.Method, req.URL.Path) {
		return
	}
	if err := c.check(req, []byte(reqBody), resp, body); err != nil {
		e.t.Errorf("%s %s answered %d %.300q, which the OpenAPI document does not allow:\n%v",
			req.Method, req.URL.RequestURI(), resp.StatusCode, body, err)
	}
}

// TestOpenAPIDocument: the document is valid OpenAPI 3.1, and the server
// serves exactly it, to anyone.
func TestOpenAPIDocument(t *testing.T) {
	c, err := openAPI()
	if err != nil {
		t.Fatal(err)
	}
	if c.model.Version != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", c.model.Version)
	}
	if ok, errs := schema_validation.ValidateOpenAPIDocument(c.doc); !ok {
		t.Errorf("the document is not valid OpenAPI 3.1:\n%v", joined(errs))
	}
	// The same check refuses a document that is not.
	broken, err := libopenapi.NewDocument(bytes.Replace(api.OpenAPI, []byte(`"description": "Alive.",`), nil, 1))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := schema_validation.ValidateOpenAPIDocument(broken); ok {
		t.Errorf("a document with a response without its description passes as valid OpenAPI 3.1")
	}
	agent, _ := token("agent", engine.RoleAgent)
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{tokens: []auth.Token{agent}})
	r := e.get("/sagacity/openapi.json")
	if r.code != 200 || r.header.Get("Content-Type") != "application/json" || r.body != string(api.OpenAPI) {
		t.Errorf("GET /sagacity/openapi.json without a token = %d %s, %d bytes; want 200 application/json, the %d embedded bytes",
			r.code, r.header.Get("Content-Type"), len(r.body), len(api.OpenAPI))
	}
}

// TestOpenAPIRoutes: every route under /sagacity is an operation of the
// document, and every operation of the document is a route.
func TestOpenAPIRoutes(t *testing.T) {
	c, err := openAPI()
	if err != nil {
		t.Fatal(err)
	}
	e := newAPI(t, testkit.SQLiteURL(t), envOptions{})
	routed := map[string]bool{}
	err = chi.Walk(server.Routes(e.opts), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed[method+" "+route] = true
		return nil
	})
	if err != nil || len(routed) == 0 {
		t.Fatalf("walking the routes: %v, %d routes", err, len(routed))
	}
	documented := map[string]bool{}
	for path, item := range c.model.Paths.PathItems.FromOldest() {
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

// TestOpenAPIRefuses: the check every test's requests go through refuses
// answers the document does not allow, so it cannot pass by accepting
// everything.
func TestOpenAPIRefuses(t *testing.T) {
	c, err := openAPI()
	if err != nil {
		t.Fatal(err)
	}
	const (
		saga   = `"sagaId":"s","initiator":"anonymous","ended":false,"headSeq":1,"headHash":"` + engine.ZeroHash + `","createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:05.5Z"`
		line   = `"sagaId":"s","seq":1,"toolName":"t","input":"{}","payload":"requester=anonymous","timestamp":"2026-01-02T03:04:05.000000Z","hash":"` + engine.ZeroHash + `"`
		jsonCT = "application/json"
	)
	errBody := func(code int) string { return `{"error":"` + http.StatusText(code) + `","kind":"not_found"}` }
	tests := []struct {
		name, method, path, reqBody string
		code                        int
		contentType, body           string
		header                      []string
		ok                          bool
	}{
		{"a saga", "GET", "/sagacity/sagas/s", "", 200, jsonCT, `{"status":"RUNNING",` + saga + `}`, nil, true},
		{"a saga without its status", "GET", "/sagacity/sagas/s", "", 200, jsonCT, `{` + saga + `}`, nil, false},
		{"a status no saga has", "GET", "/sagacity/sagas/s", "", 200, jsonCT, `{"status":"DONE",` + saga + `}`, nil, false},
		{"a field the document does not name", "GET", "/sagacity/sagas/s", "", 200, jsonCT, `{"status":"RUNNING","extra":1,` + saga + `}`, nil, false},
		{"a time that is not one", "GET", "/sagacity/sagas/s", "", 200, jsonCT, `{"status":"RUNNING",` + strings.Replace(saga, "2026-01-02T03:04:05Z", "yesterday", 1) + `}`, nil, false},
		{"a status the operation does not answer", "GET", "/sagacity/sagas/s", "", 418, jsonCT, errBody(418), nil, false},
		{"an error with more than an error", "POST", "/sagacity/sagas/s/calls", `{"tool":"t","input":""}`, 404, jsonCT, `{"error":"no","extra":1}`, nil, false},
		{"an error as HTML", "GET", "/sagacity/sagas/s", "", 404, "text/html; charset=utf-8", "<p>no</p>", nil, false},
		{"401 without WWW-Authenticate", "GET", "/sagacity/sagas/s", "", 401, jsonCT, errBody(401), nil, false},
		{"401", "GET", "/sagacity/sagas/s", "", 401, jsonCT, errBody(401), []string{"WWW-Authenticate", `Bearer realm="sagacity", resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource"`}, true},
		{"401 naming no metadata", "GET", "/sagacity/sagas/s", "", 401, jsonCT, errBody(401), []string{"WWW-Authenticate", `Bearer realm="sagacity"`}, false},
		{"approvals without X-Total-Count", "GET", "/sagacity/approvals", "", 200, jsonCT, `[]`, nil, false},
		{"a log whose checkpoint is a number", "GET", "/sagacity/log", "", 200, jsonCT,
			`{"size":0,"checkpoint":7,"signedAt":null,"checkedAt":null,"fullCheckAt":null}`, nil, false},
		{"a log before its first checkpoint", "GET", "/sagacity/log", "", 200, jsonCT,
			`{"size":0,"checkpoint":null,"signedAt":null,"checkedAt":null,"fullCheckAt":null}`, nil, true},
		{"a journal", "GET", "/sagacity/audit/s", "", 200, "application/x-ndjson", `{"phase":"INTENT",` + line + "}\n", nil, true},
		{"a journal entry of no phase", "GET", "/sagacity/audit/s", "", 200, "application/x-ndjson", `{"phase":"INTENT",` + line + "}\n" + `{"phase":"BOGUS",` + line + "}\n", nil, false},
		{"a proof without its leaf", "GET", "/sagacity/audit/s", "", 200, "application/x-ndjson", `{"phase":"INTENT","treeSize":1,"proof":[],` + line + "}\n", nil, false},
		{"an accepted request without input", "POST", "/sagacity/sagas/s/calls", `{"tool":"t"}`, 200, jsonCT,
			`{"sagaId":"s","journalSeq":1,"toolName":"t","outcome":"EXECUTED","status":"RUNNING","result":"ok"}`, nil, false},
		{"an accepted request", "POST", "/sagacity/sagas/s/calls", `{"tool":"t","input":""}`, 200, jsonCT,
			`{"sagaId":"s","journalSeq":1,"toolName":"t","outcome":"EXECUTED","status":"RUNNING","result":"ok"}`, nil, true},
		{"a call's outcome given as its status", "POST", "/sagacity/sagas/s/calls", `{"tool":"t","input":""}`, 200, jsonCT,
			`{"sagaId":"s","journalSeq":1,"toolName":"t","outcome":"EXECUTED","status":"EXECUTED","result":"ok"}`, nil, false},
		{"a gated call without its hash", "POST", "/sagacity/sagas/s/calls", `{"tool":"t","input":""}`, 202, jsonCT,
			`{"sagaId":"s","journalSeq":1,"toolName":"t","outcome":"AWAITING_APPROVAL","status":"AWAITING_APPROVAL","message":"[AWAITING_APPROVAL] Tool 't' requires human approval before execution."}`, nil, false},
		{"an error without its kind", "GET", "/sagacity/sagas/s", "", 404, jsonCT, `{"error":"no such saga"}`, nil, false},
		{"an unknown path answered", "GET", "/sagacity/nope", "", 200, jsonCT, `{}`, nil, false},
		{"an unknown path refused", "GET", "/sagacity/nope", "", 404, jsonCT, errBody(404), nil, true},
		{"a wrong method refused as unknown", "GET", "/sagacity/approve/s/3", "", 404, jsonCT, errBody(404), nil, false},
		{"a wrong method refused", "GET", "/sagacity/approve/s/3", "", 405, jsonCT, errBody(405), nil, true},
		{"a checkpoint that is no note", "GET", "/sagacity/checkpoints/latest", "", 200, "text/plain; charset=utf-8", "size 3", nil, false},
		{"readiness that says something else", "GET", "/readyz", "", 200, "text/plain; charset=utf-8", "fine\n", nil, false},
		{"readiness", "GET", "/readyz", "", 200, "text/plain; charset=utf-8", "ok\n", nil, true},
		{"readiness in JSON", "GET", "/readyz", "", 200, jsonCT, `"ok"`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://127.0.0.1"+tt.path, strings.NewReader(tt.reqBody))
			if err != nil {
				t.Fatal(err)
			}
			if tt.reqBody != "" {
				req.Header.Set("Content-Type", jsonCT)
			}
			resp := &http.Response{StatusCode: tt.code, Header: http.Header{"Content-Type": {tt.contentType}, "X-Request-Id": {"R"}}, Request: req}
			for i := 0; i+1 < len(tt.header); i += 2 {
				resp.Header.Set(tt.header[i], tt.header[i+1])
			}
			err = c.check(req, []byte(tt.reqBody), resp, []byte(tt.body))
			if got := err == nil; got != tt.ok {
				t.Errorf("check(%s %s, %d %s) = %v; want accepted %t", tt.method, tt.path, tt.code, tt.body, err, tt.ok)
			}
		})
	}
}
