package app_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/api/apitest"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/testkit"
)

// holdToContract fails the test when a response the test saw, or the
// request it accepted, departs from the OpenAPI document.
func (e *apiEnv) holdToContract(req *http.Request, reqBody string, resp *http.Response, body []byte) {
	e.t.Helper()
	c, err := apitest.Load()
	if err != nil {
		e.t.Fatalf("loading the OpenAPI document: %v", err)
	}
	if !c.Holds(req.Method, req.URL.Path) {
		return
	}
	if err := c.Check(req, []byte(reqBody), resp, body); err != nil {
		e.t.Errorf("%s %s answered %d %.300q, which the OpenAPI document does not allow:\n%v",
			req.Method, req.URL.RequestURI(), resp.StatusCode, body, err)
	}
}

// TestOpenAPIDocument: the document is valid OpenAPI 3.1, and the server
// serves exactly it, to anyone.
func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	c, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.Version != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", c.Model.Version)
	}
	if ok, errs := schema_validation.ValidateOpenAPIDocument(c.Doc); !ok {
		t.Errorf("the document is not valid OpenAPI 3.1:\n%v", apitest.Joined(errs))
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

// TestOpenAPIRefuses: the check every test's requests go through refuses
// answers the document does not allow, so it cannot pass by accepting
// everything.
func TestOpenAPIRefuses(t *testing.T) {
	t.Parallel()
	c, err := apitest.Load()
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
			err = c.Check(req, []byte(tt.reqBody), resp, []byte(tt.body))
			if got := err == nil; got != tt.ok {
				t.Errorf("check(%s %s, %d %s) = %v; want accepted %t", tt.method, tt.path, tt.code, tt.body, err, tt.ok)
			}
		})
	}
}
