package templates

import "github.com/sagacity-go/sagacity/internal/engine"

// Flash is a one-line notice at the top of a page.
type Flash struct {
	Kind string // "ok" or "bad"
	Text string
}

// ApprovalsPage lists pending approval requests, and the calls whose
// outcome the journal does not know.
type ApprovalsPage struct {
	Me       engine.Principal
	Flash    Flash
	Requests []engine.ApprovalRequest
	InDoubt  []engine.Call
}

// Decided is what replaces a request's card once it is decided.
type Decided struct {
	Decision engine.Decision
	Flash    Flash
}

// LoginPage is the sign-in page of dev and tokens modes.
type LoginPage struct {
	Mode     string // "dev" or "tokens"
	ReturnTo string
	Flash    Flash
}

// ErrorPage is a failed request.
type ErrorPage struct {
	Me      *engine.Principal
	Status  int
	Message string
}
