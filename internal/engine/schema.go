package engine

import (
	"bytes"
	"encoding/json"

	"github.com/google/jsonschema-go/jsonschema"
)

// A tool may declare the JSON Schema (draft 2020-12 or draft-07) its
// input must match. Call checks every input against it before anything
// is journaled, on every way in (the JSON gateway, MCP), so a tool never
// sees an input its schema refuses and a model reads why.

// CheckInputSchema reports what is wrong with a tool's input schema (see
// Tool.InputSchema), as New would: configuration checks it at start-up.
func CheckInputSchema(tool string, raw json.RawMessage) error {
	_, err := compileSchema(tool, raw)
	return err
}

// inputSchema is a tool's schema, resolved for validation.
type inputSchema struct{ resolved *jsonschema.Resolved }

// compileSchema reads and resolves a tool's input schema: nil when it has
// none. Remote references are refused: resolving one would fetch it.
func compileSchema(tool string, raw json.RawMessage) (*inputSchema, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var s jsonschema.Schema
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, Errorf(Invalid, "tool %q: inputSchema is not a JSON Schema: %v", tool, err)
	}
	r, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, Errorf(Invalid, "tool %q: inputSchema: %v", tool, err)
	}
	return &inputSchema{r}, nil
}

// check says why input does not match the schema, as an Invalid error.
func (s *inputSchema) check(tool, input string) error {
	var v any
	if err := json.Unmarshal([]byte(input), &v); err != nil {
		return Errorf(Invalid, "input of tool %s is not JSON, which its schema needs: %v", tool, err)
	}
	if err := s.resolved.Validate(v); err != nil {
		return Errorf(Invalid, "input of tool %s does not match its schema: %v", tool, err)
	}
	return nil
}
