package authtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is a person the test provider knows.
type User struct {
	ID       string // subject
	Username string // what is typed in the login form
	Password string
	Email    string // email_verified is always true
	Name     string // optional display name
	// Groups is emitted as the "groups" claim (a JSON array of strings) in the
	// ID token and in userinfo whenever the "openid" scope is granted.
	Groups []string
}

// Provider is a real OpenID provider running in the test process:
// zitadel/oidc's example OP with its storage wrapped so that users come from
// the list given to NewProvider and a "groups" claim is added.
//
// Its login form is at /login/username (fields "username" and "password",
// hidden "id"); the authorization endpoint is /auth.
type Provider struct {
	// Issuer is the exact issuer string the provider reports in discovery,
	// "http://127.0.0.1:PORT/" with the trailing slash. A relying party must be
	// configured with it byte for byte.
	Issuer string

	storage *opStorage
}

// NewProvider starts a provider on 127.0.0.1 that knows users; it is stopped
// at t's cleanup.
//
// The example OP logs each request through slog.Default. NewProvider passes
// no logger to it on purpose: a logger there would replace slog.Default and
// the standard log output for the whole test binary.
func NewProvider(t testing.TB, users ...User) *Provider {
	t.Helper()
	byID := make(map[string]User, len(users))
	for _, u := range users {
		if u.ID == "" || u.Username == "" {
			t.Fatalf("NewProvider: user %+v needs an ID and a Username", u)
		}
		if _, dup := byID[u.ID]; dup {
			t.Fatalf("NewProvider: two users with ID %q", u.ID)
		}
		u.Groups = slices.Clone(u.Groups)
		byID[u.ID] = u
	}
	st := &opStorage{users: byID, clients: map[string]webClient{}}
	// A private, empty client map: storage.RegisterClients writes a
	// package-global map that every running example OP reads, which races
	// when tests run in parallel. opStorage answers client lookups itself.
	st.Storage = storage.NewStorageWithClients(userStore{byID}, map[string]*storage.Client{})

	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String() + "/"
	opHandler := exampleop.SetupServer(issuer, st, nil, false)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Chromium reports the example OP's missing favicon as a console
		// error, which would fail every "no console errors" check.
		if r.URL.Path == "/favicon.ico" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		opHandler.ServeHTTP(w, r)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	return &Provider{Issuer: issuer, storage: st}
}

var clientSeq atomic.Uint64

// WebClient registers a confidential web client (client secret sent with
// HTTP Basic or in the form; authorization code flow, PKCE S256 honoured
// when the relying party sends a challenge) that may redirect only to
// redirectURI, and whose sign-outs (RP-initiated logout) may return only
// to postLogout, if given. Every call returns a fresh, unique client id
// and secret.
func (p *Provider) WebClient(t testing.TB, redirectURI string, postLogout ...string) (clientID, clientSecret string) {
	t.Helper()
	clientID = fmt.Sprintf("web-%d-%s", clientSeq.Add(1), rand.Text()[:8])
	clientSecret = rand.Text()
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	p.storage.clients[clientID] = webClient{
		client:     storage.WebClient(clientID, clientSecret, redirectURI),
		secret:     clientSecret,
		postLogout: postLogout,
	}
	return clientID, clientSecret
}

// PublicClient registers a public client: one without a secret, which
// the token endpoint authenticates by PKCE alone, as an OpenID provider
// does for a client registered as public. It may redirect only to
// redirectURI.
func (p *Provider) PublicClient(t testing.TB, redirectURI string) (clientID string) {
	t.Helper()
	clientID = fmt.Sprintf("public-%d-%s", clientSeq.Add(1), rand.Text()[:8])
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	p.storage.clients[clientID] = webClient{client: storage.NativeClient(clientID, redirectURI)}
	return clientID
}

// AuthenticatedAgo makes the provider say, of the sign-ins it completes
// from now on, that the person authenticated d ago (auth_time), as a
// provider that kept an old session of theirs would: what a step-up must
// refuse. 0 says the truth again.
func (p *Provider) AuthenticatedAgo(d time.Duration) {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	p.storage.ago = d
}

// SignOuts lists the clients whose sign-outs the provider's end-session
// endpoint took, in order.
func (p *Provider) SignOuts() []string {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	return slices.Clone(p.storage.signOuts)
}

// webClient keeps the secret next to the example client, whose own copy is
// unexported.
type webClient struct {
	client     *storage.Client
	secret     string
	postLogout []string
}

// loggingOut is a client with the post-logout redirect URIs it was
// registered with.
type loggingOut struct {
	op.Client
	uris []string
}

func (c loggingOut) PostLogoutRedirectURIs() []string { return c.uris }

// opStorage is the example OP's storage with users from the test, clients
// from WebClient, and a "groups" claim.
type opStorage struct {
	*storage.Storage
	users map[string]User // read-only after NewProvider

	mu       sync.Mutex
	clients  map[string]webClient
	signOuts []string
	ago      time.Duration // how much older sign-ins are said to be (AuthenticatedAgo)
}

// aged is an authorization request whose auth_time is said to be older.
type aged struct {
	op.AuthRequest
	ago time.Duration
}

func (a aged) GetAuthTime() time.Time { return a.AuthRequest.GetAuthTime().Add(-a.ago) }

// AuthRequestByCode hands the token endpoint the request whose ID token
// it signs, aged as AuthenticatedAgo says.
func (s *opStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := s.Storage.AuthRequestByCode(ctx, code)
	s.mu.Lock()
	ago := s.ago
	s.mu.Unlock()
	if err != nil || ago == 0 {
		return r, err
	}
	return aged{r, ago}, nil
}

// TerminateSession records a sign-out the end-session endpoint took.
func (s *opStorage) TerminateSession(ctx context.Context, userID, clientID string) error {
	s.mu.Lock()
	s.signOuts = append(s.signOuts, clientID)
	s.mu.Unlock()
	return s.Storage.TerminateSession(ctx, userID, clientID)
}

// GetClientByClientID replaces the example storage's lookup in the
// package-global client map.
func (s *opStorage) GetClientByClientID(_ context.Context, clientID string) (op.Client, error) {
	s.mu.Lock()
	c, ok := s.clients[clientID]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("client not found")
	}
	return loggingOut{storage.RedirectGlobsClient(c.client), c.postLogout}, nil
}

// AuthorizeClientIDSecret checks a client's secret at the token endpoint.
func (s *opStorage) AuthorizeClientIDSecret(_ context.Context, clientID, clientSecret string) error {
	s.mu.Lock()
	c, ok := s.clients[clientID]
	s.mu.Unlock()
	if !ok {
		return errors.New("client not found")
	}
	if c.secret != clientSecret {
		return errors.New("invalid secret")
	}
	return nil
}

// SetUserinfoFromRequest fills the ID token's user claims.
func (s *opStorage) SetUserinfoFromRequest(ctx context.Context, userinfo *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, userinfo, token, scopes); err != nil {
		return err
	}
	if slices.Contains(scopes, oidc.ScopeOpenID) {
		s.addClaims(userinfo, token.GetSubject())
	}
	return nil
}

// SetUserinfoFromToken fills the userinfo endpoint's answer.
func (s *opStorage) SetUserinfoFromToken(ctx context.Context, userinfo *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, userinfo, tokenID, subject, origin); err != nil {
		return err
	}
	// The token's scopes are private to the example storage, but it sets
	// the subject exactly when "openid" was granted.
	if userinfo.Subject != "" {
		s.addClaims(userinfo, userinfo.Subject)
	}
	return nil
}

func (s *opStorage) addClaims(userinfo *oidc.UserInfo, subject string) {
	u, ok := s.users[subject]
	if !ok {
		return
	}
	groups := slices.Clone(u.Groups)
	if groups == nil {
		groups = []string{} // an empty array, not null
	}
	userinfo.AppendClaims("groups", groups)
	// The example storage composes the name as "first last"; give back the
	// display name as the test wrote it.
	if userinfo.Name != "" {
		userinfo.Name = u.Name
	}
}

// userStore serves the test's users to the example storage.
type userStore struct {
	users map[string]User
}

func (s userStore) GetUserByID(id string) *storage.User {
	u, ok := s.users[id]
	if !ok {
		return nil
	}
	return exampleUser(u)
}

func (s userStore) GetUserByUsername(username string) *storage.User {
	for _, u := range s.users {
		if u.Username == username {
			return exampleUser(u)
		}
	}
	return nil
}

// ExampleClientID names the example's service account (JWT profile grant),
// which these tests never use.
func (s userStore) ExampleClientID() string { return storage.ServiceUserID }

func exampleUser(u User) *storage.User {
	first, last, _ := strings.Cut(u.Name, " ")
	return &storage.User{
		ID:            u.ID,
		Username:      u.Username,
		Password:      u.Password,
		FirstName:     first,
		LastName:      last,
		Email:         u.Email,
		EmailVerified: true,
	}
}
