package evidence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// A condition sees, besides the request's bytes (payload), tool, saga and
// requester (the requester's identity, a string, as it always was), its
// context: who asked, as an object (who), and when (now), in the policy's
// time zone (tz). New variables rather than a requester that became an
// object: a document written before keeps its text, its hash and its
// meaning, and its pinned requests verify as they did. A policy whose
// conditions read the context (UsesContext) has each request journal
// what its conditions saw (KeyContext), so verification, on the server
// and offline, re-evaluates the rule from that and gets the same one.

// Context is what a request's conditions saw besides its bytes: who asked
// and when.
type Context struct {
	Who Who       `json:"who"`
	Now time.Time `json:"now"`
}

// Who is the requester as a condition sees it (who): its identity (the
// requester variable's string), the name shown for it, its roles and
// groups, and the claims of its token that the policy lists (claims:),
// each a list of strings (ClaimValue).
type Who struct {
	ID     string              `json:"id" cel:"id"`
	Name   string              `json:"name" cel:"name"`
	Roles  []string            `json:"roles" cel:"roles"`
	Groups []string            `json:"groups" cel:"groups"`
	Claims map[string][]string `json:"claims" cel:"claims"`
}

// Bounds on the claims a policy lists and keeps.
const (
	// MaxClaims bounds the claims a policy lists.
	MaxClaims = 10
	// MaxClaimValues bounds a claim that is a list: a longer one is not
	// kept.
	MaxClaimValues = 20
	// MaxClaimLen bounds each string of a claim, in bytes (CheckName's
	// bound): a claim with a longer one is not kept.
	MaxClaimLen = MaxIDLen
)

// ClaimValue is a token's claim v as a condition sees it: a list of
// strings, a string being a list of one (as groups are); ok is false for
// anything else, an empty string, or one past the bounds (MaxClaimValues,
// MaxClaimLen, no control characters): such a claim is not kept, and a
// condition that reads it cannot be evaluated, rather than see it cut.
func ClaimValue(v any) ([]string, bool) {
	var list []any
	switch v := v.(type) {
	case string:
		list = []any{v}
	case []string:
		for _, x := range v {
			list = append(list, x)
		}
	case []any:
		list = v
	default:
		return nil, false
	}
	if len(list) > MaxClaimValues {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok || CheckName("claim", s) != nil {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// UsesContext reports whether a condition of the policy reads the
// context (who, now, tz, sameGroup): its requests journal it.
func (a *Approvals) UsesContext() bool { return a.contextual }

// Claims are the claims the policy lists, which a requester's token
// keeps for its conditions.
func (a *Approvals) Claims() []string { return slices.Clone(a.claims) }

// See is the context of a request by who, whose token holds claims, at
// now, as the policy's conditions see it: the claims it lists, empty for
// one the token does not hold, left out for one past the bounds
// (ClaimValue); now in its time zone; lists never nil.
func (a *Approvals) See(who Who, claims map[string]any, now time.Time) Context {
	c := Context{Who: Who{ID: who.ID, Name: who.Name, Roles: orEmpty(who.Roles), Groups: orEmpty(who.Groups), Claims: map[string][]string{}},
		Now: now.In(a.zone)}
	for _, k := range a.claims {
		v, ok := ClaimValue(claims[k])
		switch {
		case claims[k] == nil:
			c.Who.Claims[k] = []string{} // the token has none
		case ok:
			c.Who.Claims[k] = v
		}
	}
	return c
}

// orEmpty is s, or an empty list for nil.
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// String is the context's canonical JSON, the value of a request's
// KeyContext line: one line, as encoding/json writes it.
func (c Context) String() string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		panic(err) // strings, lists of strings and a time always encode
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Says says what the conditions saw, for people: "alice@example.com
// (roles approver; groups finance; claims department: eng) at
// 2026-12-01 12:00:00 +01:00".
func (c Context) Says() string {
	list := func(s []string) string {
		if len(s) == 0 {
			return "none"
		}
		return strings.Join(s, ", ")
	}
	s := fmt.Sprintf("%s (roles %s; groups %s", c.Who.ID, list(c.Who.Roles), list(c.Who.Groups))
	for _, k := range slices.Sorted(maps.Keys(c.Who.Claims)) {
		s += fmt.Sprintf("; claim %s: %s", k, list(c.Who.Claims[k]))
	}
	return s + ") at " + c.Now.Format("2006-01-02 15:04:05 -07:00")
}

// ReadContext reads a KeyContext line's value. An *Error when it is not
// the canonical JSON of a context (String), whose claims are within
// bounds.
func ReadContext(text string) (Context, error) {
	var c Context
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Context{}, errorf("the request's context is not one: %v", err)
	}
	for k, v := range c.Who.Claims {
		if _, ok := ClaimValue(v); !ok || v == nil {
			return Context{}, errorf("the request's context has claim %q past its bounds", k)
		}
	}
	if c.Who.Roles == nil || c.Who.Groups == nil || c.Who.Claims == nil || c.String() != text {
		return Context{}, errorf("the request's context is not written as the server writes it")
	}
	return c, nil
}

// contextOf is the context a request (its AWAITING_APPROVAL entry gated)
// journaled: nil under a policy whose conditions read none. An *Error
// when the policy reads one and the entry carries none that reads, or one
// of another requester than the entry's, or with claims the policy does
// not list.
func (a *Approvals) contextOf(gated Entry) (*Context, error) {
	text, has := ParseLines(gated.Payload).Get(KeyContext)
	switch {
	case !a.contextual && !has:
		return nil, nil
	case !a.contextual:
		return nil, errorf("the request at seq=%d carries a context, which its policy's conditions do not read", gated.Seq)
	case !has:
		return nil, errorf("the request at seq=%d carries no context, which its policy's conditions read: nothing is decided on it", gated.Seq)
	}
	c, err := ReadContext(text)
	if err != nil {
		return nil, errorf("the request at seq=%d: %s", gated.Seq, Message(err))
	}
	if c.Who.ID != gated.Field(KeyRequester) {
		return nil, errorf("the request at seq=%d carries the context of %s, not of its requester", gated.Seq, c.Who.ID)
	}
	for k := range c.Who.Claims {
		if !slices.Contains(a.claims, k) {
			return nil, errorf("the request at seq=%d carries claim %q, which its policy does not list", gated.Seq, k)
		}
	}
	return &c, nil
}

// contextVars are the variables and functions a condition may name
// besides payload, tool, saga and requester; a condition that names one
// of them reads the context.
var contextVars = []string{"who", "now", "tz", "sameGroup"}

// stringsType is a list of strings, as sameGroup reads one.
var stringsType = reflect.TypeFor[[]string]()

// nativeWho declares Who to CEL, its fields by their cel tags: what
// ext.NativeTypes does, without the module that package brings.
func nativeWho(env *cel.Env) (*cel.Env, error) {
	p, a, err := types.ComposeTypes(env.CELTypeProvider(), env.CELTypeAdapter(), reflect.TypeFor[Who](), types.ParseStructTags(true))
	if err != nil {
		return nil, err
	}
	if env, err = cel.CustomTypeAdapter(a)(env); err != nil {
		return nil, err
	}
	return cel.CustomTypeProvider(p)(env)
}

// whoType is who's CEL type.
var whoType = cel.ObjectType("evidence.Who")

// conditionEnv is the environment conditions compile in, the policy's
// time zone tz.
func conditionEnv(tz string) (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("payload", cel.DynType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("saga", cel.StringType),
		cel.Variable("requester", cel.StringType),
		nativeWho,
		cel.Variable("who", whoType),
		cel.Variable("now", cel.TimestampType),
		cel.Constant("tz", cel.StringType, types.String(tz)),
		cel.Function("sameGroup",
			cel.Overload("sameGroup_who_dyn", []*cel.Type{whoType, cel.DynType}, cel.BoolType,
				cel.BinaryBinding(sameGroup))),
	)
}

// sameGroup(who, groups) holds when the requester is in groups: a group's
// name, or a list of them (as a payload names the teams it touches).
func sameGroup(whoVal, groups ref.Val) ref.Val {
	w, ok := whoVal.Value().(Who)
	if !ok {
		return types.NewErr("sameGroup: the first argument is not who")
	}
	var names []string
	switch g := groups.Value().(type) {
	case string:
		names = []string{g}
	default:
		list, err := groups.ConvertToNative(stringsType)
		if err != nil {
			return types.NewErr("sameGroup: the groups are a string or a list of strings, not a %s", groups.Type().TypeName())
		}
		names = list.([]string)
	}
	for _, n := range names {
		if slices.Contains(w.Groups, n) {
			return types.True
		}
	}
	return types.False
}

// readsContext reports whether a checked condition names one of
// contextVars.
func readsContext(ast *cel.Ast) bool {
	for _, ref := range ast.NativeRep().ReferenceMap() {
		if slices.Contains(contextVars, ref.Name) {
			return true
		}
		for _, id := range ref.OverloadIDs {
			if strings.HasPrefix(id, "sameGroup_") {
				return true
			}
		}
	}
	return false
}

// checkContext checks the policy's claims and time zone, returning the
// zone.
func checkContext(spec PolicySpec) (*time.Location, error) {
	if len(spec.Claims) > MaxClaims {
		return nil, fmt.Errorf("claims lists %d claims; at most %d", len(spec.Claims), MaxClaims)
	}
	for i, k := range spec.Claims {
		if err := CheckName("a claim's name", k); err != nil || strings.ContainsAny(k, " \n") {
			return nil, fmt.Errorf("claims, claim %d: a claim's name must be printable, without spaces", i+1)
		}
		if slices.Contains(spec.Claims[:i], k) {
			return nil, fmt.Errorf("claims, claim %d: %q is listed already", i+1, k)
		}
	}
	if spec.TimeZone == "" {
		return time.UTC, nil
	}
	zone, err := time.LoadLocation(spec.TimeZone)
	if err != nil || spec.TimeZone == "Local" {
		return nil, fmt.Errorf("timeZone: %q is not a time zone of the IANA database, such as Europe/Paris", spec.TimeZone)
	}
	return zone, nil
}
