// Package auth establishes who is calling: the principal whose identity is
// journaled with every decision. Handlers read it from the request context;
// it is never taken from a request body.
package auth

import (
	"context"

	"github.com/sagacity-go/sagacity/internal/engine"
)

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p engine.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// From returns the principal in ctx, or the zero Principal, which the
// engine refuses as unauthenticated.
func From(ctx context.Context) engine.Principal {
	p, _ := ctx.Value(principalKey{}).(engine.Principal)
	return p
}

// Mode is how the server lets people and agents in (SAGACITY_AUTH).
type Mode string

// The modes.
const (
	ModeOIDC   Mode = "oidc"   // console through OIDC login, API through OIDC bearer tokens
	ModeTokens Mode = "tokens" // API only, through the tokens declared in the file
	ModeDev    Mode = "dev"    // everyone is let in; loopback only
)

// Anonymous is a dev-mode API caller without a token: every role, and a
// decision is recorded under the approver it names. Dev mode is allowed on
// loopback addresses alone.
var Anonymous = engine.Principal{ID: "anonymous", Auth: engine.AuthDev, Roles: engine.Roles, Anonymous: true}
