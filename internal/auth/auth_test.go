package auth

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/internal/engine"
)

func TestReturnTo(t *testing.T) {
	ok := map[string]string{"": "/", "/": "/", "/?decided=approved&saga=a": "/?decided=approved&saga=a", "/sagas/x%2Fy": "/sagas/x%2Fy"}
	for in, want := range ok {
		if got, err := ReturnTo(in); err != nil || got != want {
			t.Errorf("ReturnTo(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"https://evil.example/", "//evil.example", `/\evil.example`, "/\\x", "javascript:alert(1)",
		"evil", "http:/x", "/a\nb", "/a\tb", "\\\\evil"} {
		if got, err := ReturnTo(in); !engine.IsKind(err, engine.Invalid) {
			t.Errorf("ReturnTo(%q) = %q, %v; want Invalid", in, got, err)
		}
	}
}

func TestRoleMap(t *testing.T) {
	m := RoleMap{Claim: "groups", Map: map[string][]engine.Role{
		"payments": {engine.RoleApprover}, "ops": {engine.RoleApprover, engine.RoleAuditor}, "bots": {engine.RoleAgent}}}
	tests := []struct {
		claims map[string]any
		want   []engine.Role
	}{
		{map[string]any{"groups": []any{"payments", "ops"}}, []engine.Role{engine.RoleApprover, engine.RoleAuditor}},
		{map[string]any{"groups": "bots"}, []engine.Role{engine.RoleAgent}},
		{map[string]any{"groups": []any{"unknown", 7}}, nil},
		{map[string]any{"roles": []any{"payments"}}, nil},
		{map[string]any{}, nil},
	}
	for _, tt := range tests {
		if got := m.Of(tt.claims); !slices.Equal(got, tt.want) {
			t.Errorf("Of(%v) = %v, want %v", tt.claims, got, tt.want)
		}
	}
}

// TestKept: a JWT's principal keeps the claims the policy lists that the
// token has, as it has them, and no other; none when none is listed.
func TestKept(t *testing.T) {
	claims := map[string]any{"department": []any{"treasury"}, "employee_type": "staff", "email": "a@example.com", "empty": nil}
	got := kept(claims, []string{"department", "employee_type", "missing", "empty"})
	want := map[string]any{"department": []any{"treasury"}, "employee_type": "staff"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kept(...) (-want +got):\n%s", diff)
	}
	if got := kept(claims, nil); got != nil {
		t.Errorf("kept(claims, none listed) = %v; want nil", got)
	}
}

func TestBearerStatic(t *testing.T) {
	b := &Bearer{Tokens: []Token{
		{Name: "ci", SHA256: engine.PayloadHash("sgc_right"), Roles: []engine.Role{engine.RoleAgent}},
		{Name: "broken", SHA256: "not-hex"},
	}}
	tests := []struct {
		header string
		want   string // principal ID, or "" for Unauthenticated
	}{
		{"Bearer sgc_right", "token:ci"},
		{"bearer sgc_right", "token:ci"},
		{"Bearer sgc_wrong", ""},
		{"Bearer ", ""},
		{"Basic sgc_right", ""},
		{"sgc_right", ""},
		{"", ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/sagacity/approvals", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		p, err := b.Principal(r)
		switch {
		case tt.want == "" && !engine.IsKind(err, engine.Unauthenticated):
			t.Errorf("Principal(%q) = %+v, %v; want Unauthenticated", tt.header, p, err)
		case tt.want != "" && (err != nil || p.ID != tt.want || p.Auth != "token"):
			t.Errorf("Principal(%q) = %+v, %v; want %s", tt.header, p, err, tt.want)
		}
	}
	b.Anonymous = true
	if p, err := b.Principal(httptest.NewRequest("GET", "/", nil)); err != nil || !p.Anonymous {
		t.Errorf("dev mode without a token = %+v, %v; want Anonymous", p, err)
	}
	if _, err := b.Principal(func() *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer nope")
		return r
	}()); err == nil {
		t.Errorf("dev mode with a wrong token was let in")
	}
}

func TestIdentity(t *testing.T) {
	for iss, want := range map[string]string{"https://id.example.com/": "https://id.example.com#u1", "https://id.example.com": "https://id.example.com#u1"} {
		if got := Identity(iss, "u1"); got != want {
			t.Errorf("Identity(%q, u1) = %q, want %q", iss, got, want)
		}
	}
}
