// Package apitest holds HTTP traffic to the OpenAPI document the server
// serves: the server's suite checks every request and answer it makes
// with it, and a proxy checks whatever a test sends through it (the
// README's curl walkthrough).
package apitest

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
	"github.com/sagacity-go/sagacity/internal/engine"
)

// Contract is the OpenAPI document the server serves (api.OpenAPI, the
// embedded bytes, never a copy), ready to hold requests and responses to.
type Contract struct {
	// mu serialises checks: libopenapi renders a schema the first time it
	// is used, and two goroutines doing so at once race.
	mu      sync.Mutex
	Doc     libopenapi.Document
	Model   *v3.Document
	v       validator.Validator
	opts    *config.ValidationOptions
	schemas schema_validation.SchemaValidator
}

// Requests are held to the document's security too: a bearer token, or
// none (the empty requirement dev mode's anonymous callers meet).
var contractOptions = []config.Option{config.WithFormatAssertions()}

// Load loads the contract once for every test of a binary.
var Load = sync.OnceValues(func() (*Contract, error) {
	doc, err := libopenapi.NewDocument(api.OpenAPI)
	if err != nil {
		return nil, err
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return nil, err
	}
	return &Contract{Doc: doc, Model: &m.Model, v: validator.NewValidatorFromV3Model(&m.Model, contractOptions...),
		opts: config.NewValidationOptions(contractOptions...), schemas: schema_validation.NewSchemaValidator(contractOptions...)}, nil
})

// Holds reports whether the document covers a request to path: everything
// under /sagacity, and the public paths it lists. HEAD is GET without a
// body; the document describes the GET.
func (c *Contract) Holds(method, path string) bool {
	return method != http.MethodHead && (strings.HasPrefix(path, "/sagacity/") || c.Model.Paths.PathItems.GetOrZero(path) != nil)
}

// Check reports how a response departs from the document, nil when it
// does not. A request the server accepted (2xx) must be one the document
// allows too; a refused one may be anything, as tests send bad requests
// on purpose. A request for a path or method the document does not list
// must have been refused as the server refuses them (see unlisted).
func (c *Contract) Check(req *http.Request, reqBody []byte, resp *http.Response, body []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	reset := func() {
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	item, errs, _ := paths.FindPath(req, c.Model, c.opts)
	if len(errs) > 0 {
		return c.unlisted(req.URL.Path, errs, resp, body)
	}
	reset()
	if ok, errs := c.v.ValidateHttpResponse(req, resp); !ok {
		return Joined(errs)
	}
	if resp.StatusCode/100 == 2 {
		reset()
		if ok, errs := c.v.ValidateHttpRequest(req); !ok {
			return fmt.Errorf("the server accepted a request the document does not allow: %w", Joined(errs))
		}
	}
	return c.bodies(item.GetOperations().GetOrZero(strings.ToLower(req.Method)), resp, body)
}

// unlisted checks the answer to a request the document has no operation
// for: 404 for a path it does not list, 405 for a method, or 401 under
// /sagacity for a caller without a token, who is told nothing of which
// routes there are; an error body under /sagacity, where every error is
// JSON.
func (c *Contract) unlisted(path string, why []*liberrors.ValidationError, resp *http.Response, body []byte) error {
	want := http.StatusNotFound
	if why[0].ValidationType == helpers.PathValidation && why[0].ValidationSubType == helpers.ValidationMissingOperation {
		want = http.StatusMethodNotAllowed
	}
	if resp.StatusCode == http.StatusUnauthorized && strings.HasPrefix(path, "/sagacity/") {
		want = http.StatusUnauthorized
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%w; the server answered %d, want %d", Joined(why), resp.StatusCode, want)
	}
	if !strings.HasPrefix(path, "/sagacity/") {
		return nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("%w; the server answered %s, want application/json", Joined(why), ct)
	}
	if ok, errs := c.schemas.ValidateSchemaBytes(c.Schema("Error"), body); !ok {
		return fmt.Errorf("%d body is not an Error: %w", want, Joined(errs))
	}
	return nil
}

// bodies checks what the validator leaves unread: a text/plain body is
// the string its schema describes, and each line of an NDJSON body the
// value its media type names as x-item-schema (OpenAPI 3.1 has no word
// for a stream of JSON values).
func (c *Contract) bodies(op *v3.Operation, resp *http.Response, body []byte) error {
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
			return Joined(errs)
		}
	case mt == "application/x-ndjson":
		return c.lines(content, body)
	}
	return nil
}

// lines checks each line of an NDJSON body against its x-item-schema.
func (c *Contract) lines(content *v3.MediaType, body []byte) error {
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
	schema := c.Schema(strings.TrimPrefix(ref.Ref, "#/components/schemas/"))
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, engine.MaxNDJSONLine)
	for n := 1; sc.Scan(); n++ {
		if ok, errs := c.schemas.ValidateSchemaBytes(schema, sc.Bytes()); !ok {
			return fmt.Errorf("line %d %s: %w", n, sc.Bytes(), Joined(errs))
		}
	}
	return sc.Err()
}

// Schema is a schema of the document's components; nil when there is no
// such schema, which no value matches.
func (c *Contract) Schema(name string) *base.Schema {
	if p := c.Model.Components.Schemas.GetOrZero(name); p != nil {
		return p.Schema()
	}
	return nil
}

// Matches checks a JSON value against a schema of the document's
// components (a webhook's body against Event).
func (c *Contract) Matches(name string, body []byte) error {
	schema := c.Schema(name)
	if schema == nil {
		return fmt.Errorf("the document has no schema %s", name)
	}
	if ok, errs := c.schemas.ValidateSchemaBytes(schema, body); !ok {
		return Joined(errs)
	}
	return nil
}

// Joined is the validator's findings as one error.
func Joined(errs []*liberrors.ValidationError) error {
	var all []error
	for _, e := range errs {
		all = append(all, e)
	}
	return errors.Join(all...)
}
