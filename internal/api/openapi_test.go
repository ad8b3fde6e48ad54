package api

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sagacity-go/sagacity/wire"
)

// schemaTypes is the wire type each object schema of the OpenAPI document
// describes; several schemas may describe one type, each for an outcome.
var schemaTypes = map[string]reflect.Type{
	"Error":                reflect.TypeFor[wire.Error](),
	"Saga":                 reflect.TypeFor[wire.Saga](),
	"SagaList":             reflect.TypeFor[wire.SagaPage](),
	"ApprovalRequest":      reflect.TypeFor[wire.Approval](),
	"DecisionRequest":      reflect.TypeFor[wire.DecisionRequest](),
	"Decision":             reflect.TypeFor[wire.Decision](),
	"ResumeRequest":        reflect.TypeFor[wire.ResumeRequest](),
	"Resumed":              reflect.TypeFor[wire.ResumeResult](),
	"ResumeRefused":        reflect.TypeFor[wire.ResumeResult](),
	"ResumeUndecided":      reflect.TypeFor[wire.ResumeResult](),
	"ResumeFailed":         reflect.TypeFor[wire.ResumeResult](),
	"ResumeInDoubt":        reflect.TypeFor[wire.ResumeResult](),
	"CallRequest":          reflect.TypeFor[wire.CallRequest](),
	"CallExecuted":         reflect.TypeFor[wire.CallResult](),
	"CallAwaitingApproval": reflect.TypeFor[wire.CallResult](),
	"CallInDoubt":          reflect.TypeFor[wire.CallResult](),
	"CallFailed":           reflect.TypeFor[wire.CallResult](),
	"CallRefused":          reflect.TypeFor[wire.CallResult](),
	"AbortRequest":         reflect.TypeFor[wire.AbortRequest](),
	"ResolveRequest":       reflect.TypeFor[wire.Resolution](),
	"InDoubtCall":          reflect.TypeFor[wire.CallInDoubt](),
	"Verification":         reflect.TypeFor[wire.Verification](),
	"Keys":                 reflect.TypeFor[wire.Keys](),
	"LogStatus":            reflect.TypeFor[wire.LogStatus](),
	"Consistency":          reflect.TypeFor[wire.ConsistencyProof](),
	"ExportHead":           reflect.TypeFor[wire.ExportHead](),
	"ExportPolicy":         reflect.TypeFor[wire.ExportPolicy](),
	"ExportPasskey":        reflect.TypeFor[wire.ExportPasskey](),
	"ExportSignIn":         reflect.TypeFor[wire.ExportSignIn](),
	"ExportDelegation":     reflect.TypeFor[wire.ExportDelegation](),
	"DelegationRequest":    reflect.TypeFor[wire.DelegationRequest](),
	"Delegation":           reflect.TypeFor[wire.Delegation](),
	"Event":                reflect.TypeFor[wire.Event](),
	"PolicyDocument":       reflect.TypeFor[wire.PolicyDocument](),
	"PolicyProposal":       reflect.TypeFor[wire.PolicyProposal](),
	"ProposalRequest":      reflect.TypeFor[wire.ProposalRequest](),
	"Policies":             reflect.TypeFor[wire.Policies](),
	"RequestState":         reflect.TypeFor[wire.RequestState](),
	"SagaRequests":         reflect.TypeFor[wire.SagaRequests](),
	"ResourceMetadata":     reflect.TypeFor[wire.ResourceMetadata](),
	"JournalEntry":         reflect.TypeFor[wire.Entry](),
}

// jsonField is a field as encoding/json writes it.
type jsonField struct {
	name   string
	always bool // no omitempty: every body has it
}

// jsonFields lists the fields encoding/json writes for struct type t,
// embedded structs inlined.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for f := range t.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name, !slices.Contains(strings.Split(opts, ","), "omitempty")})
	}
	return out
}

// TestOpenAPIMatchesWire holds the OpenAPI document to package wire, the
// one declaration of the API's shapes: every object schema describes a
// wire type; none names a field the type lacks; each requires every field
// the type always writes; and every field of each type is in a schema of
// it. A field added to one and not the other fails here.
func TestOpenAPIMatchesWire(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	described := map[reflect.Type]map[string]bool{}
	for name, s := range doc.Components.Schemas {
		if s.Properties == nil {
			continue // a scalar, an array or a union of others
		}
		typ, ok := schemaTypes[name]
		if !ok {
			t.Errorf("schema %s describes no wire type: declare its shape in package wire and map it here", name)
			continue
		}
		fields := map[string]bool{}
		for _, f := range jsonFields(typ) {
			fields[f.name] = true
			if f.always && !slices.Contains(s.Required, f.name) {
				t.Errorf("wire.%s always sends %q, which schema %s does not require", typ.Name(), f.name, name)
			}
		}
		if described[typ] == nil {
			described[typ] = map[string]bool{}
		}
		for p := range s.Properties {
			described[typ][p] = true
			if !fields[p] {
				t.Errorf("schema %s has %q, which wire.%s has not", name, p, typ.Name())
			}
		}
		for _, r := range s.Required {
			if s.Properties[r] == nil {
				t.Errorf("schema %s requires %q, which it does not describe", name, r)
			}
		}
	}
	for name, typ := range schemaTypes {
		if _, ok := doc.Components.Schemas[name]; !ok {
			t.Errorf("schema %s, for wire.%s, is not in the document", name, typ.Name())
		}
		for _, f := range jsonFields(typ) {
			if !described[typ][f.name] {
				t.Errorf("wire.%s has %q, which no schema of it describes", typ.Name(), f.name)
			}
		}
	}
}
