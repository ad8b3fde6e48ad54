package mcpgw

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/store"
	"github.com/sagacity-go/sagacity/internal/store/storetest"
)

// TestWatches: the sagas watched are bounded, in all and for one
// session; only sagas that exist are watched; a session's second
// subscription to a saga or an unsubscription from one it never
// subscribed to changes nothing, and a session that ends without
// unsubscribing stops its watches.
func TestWatches(t *testing.T) {
	defer func(n, m int) { maxWatched, maxWatchedPerSession = n, m }(maxWatched, maxWatchedPerSession)
	maxWatched, maxWatchedPerSession = 3, 2
	db, err := store.Open(t.Context(), storetest.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, err := engine.New(db, nil, engine.WithKeys(storetest.Keys(t)))
	if err != nil {
		t.Fatal(err)
	}
	g := New(t.Context(), e, "test", slog.New(slog.DiscardHandler))
	p := engine.Principal{ID: "agent", Roles: engine.Roles}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.Handler().ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	}))
	defer srv.Close()
	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	watched := func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.watched)
	}
	sub := func(cs *mcp.ClientSession, saga string) error {
		return cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: sagaURI(saga)})
	}
	for _, s := range []string{"s1", "s2", "s3", "s4"} {
		if _, err := e.Saga(t.Context(), p, s, func(*engine.Run) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := connect(), connect(), connect()
	defer b.Close()
	defer c.Close()
	if err := sub(a, "nope"); err == nil || watched() != 0 {
		t.Errorf("a saga that does not exist watched: %v, %d watched; want it refused", err, watched())
	}
	for _, s := range []string{"s1", "s1", "s2"} {
		if err := sub(a, s); err != nil {
			t.Fatalf("subscribe %s: %v", s, err)
		}
	}
	if err := sub(a, "s3"); err == nil || watched() != 2 {
		t.Errorf("a session's third saga watched: %v, %d watched; want it refused, 2 watched", err, watched())
	}
	if err := sub(c, "s3"); err != nil {
		t.Fatalf("subscribe s3: %v", err)
	}
	if err := sub(b, "s4"); err == nil || watched() != 3 {
		t.Errorf("a fourth saga watched: %v, %d watched; want it refused, 3 watched", err, watched())
	}
	if err := sub(b, "s1"); err != nil {
		t.Errorf("another session subscribing to a watched saga: %v", err)
	}
	if err := b.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: sagaURI("s2")}); err != nil || watched() != 3 {
		t.Errorf("unsubscribing from a saga another session watches: %v, %d watched; want nothing changed", err, watched())
	}
	a.Close()
	for deadline := time.Now().Add(5 * time.Second); watched() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sagas watched after the session that watched s2 ended, want 2 (s1 and s3, for the others)", watched())
		}
	}
}

// bearer gives every request a token for the SDK's check to find (the
// principal comes from the context here).
type bearer struct{}

func (bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer t")
	return http.DefaultTransport.RoundTrip(r)
}
