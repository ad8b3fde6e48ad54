package console

import (
	"net/http"
	"time"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/web/templates"
)

// Login is the sign-in page of dev and tokens modes: GET /login.
// With max_age, a vote on a request whose rule asks for a recent sign-in
// sent the person here: the page says so.
func (h *Handlers) Login(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	returnTo, err := auth.ReturnTo(q.Get("return_to"))
	if err != nil {
		return err
	}
	stepUp, _, err := auth.StepUp(q.Get(auth.MaxAgeParam))
	if err != nil {
		return err
	}
	v := templates.LoginPage{Chrome: templates.Chrome{Title: "Sign in"}, Dev: h.Mode == auth.ModeDev, ReturnTo: returnTo}
	if v.Dev {
		v.Roles, v.People = engine.Roles, h.People
	}
	if stepUp > 0 {
		v.StepUp = stepUp.String()
	}
	return render(w, r, http.StatusOK, templates.Login(v))
}

// DevSignIn signs in whoever is named, with the roles they chose: POST
// /login in dev mode only. The decisions they make are journaled with
// auth=dev. Invalid without a name or a role, or with an unknown role.
func (h *Handlers) DevSignIn(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(r); err != nil {
		return err
	}
	returnTo, err := auth.ReturnTo(r.PostForm.Get("return_to"))
	if err != nil {
		return err
	}
	p, err := auth.Anonymous.Claiming(r.PostForm.Get("name"))
	if err != nil {
		return err
	}
	if p.ID == engine.Unknown {
		return engine.Errorf(engine.Invalid, "type a name to sign in")
	}
	if len(r.PostForm["role"]) == 0 {
		return engine.Errorf(engine.Invalid, "choose at least one role to sign in")
	}
	if p.Roles, err = engine.ParseRoles(r.PostForm["role"]); err != nil {
		return err
	}
	// The sign-in's time stands for the provider's auth_time: a rule's
	// step-up holds votes to it.
	p.Name, p.Anonymous, p.AuthTime = p.ID, false, h.Now().UTC().Truncate(time.Second)
	if err := h.Sessions.SignIn(w, r, p); err != nil {
		return err
	}
	http.Redirect(w, r, returnTo, http.StatusSeeOther)
	return nil
}

// SignedOut is the page a person lands on after signing out in oidc
// mode: GET /signed-out.
func (h *Handlers) SignedOut(w http.ResponseWriter, r *http.Request) error {
	return render(w, r, http.StatusOK, templates.SignedOut(templates.Chrome{Title: "Signed out"}))
}

// Logout ends the session: POST /logout.
func (h *Handlers) Logout(w http.ResponseWriter, r *http.Request) error {
	if err := h.Sessions.SignOut(w, r); err != nil {
		return err
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}
