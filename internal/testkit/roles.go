package testkit

import (
	"crypto/rand"
	"net/url"
	"strings"
	"testing"
)

// Roles are the two PostgreSQL roles of the production checklist in
// docs/operating.md, made for one test: the schema's owner, who migrates
// (sagacity_owner there), and the application role the server connects as
// (sagacity_app). Roles belong to the whole cluster, so theirs are named
// for the test; they are dropped when it ends.
type Roles struct {
	Owner, App string
	password   string
}

// NewRoles creates a fresh owner and application role, LOGIN roles with a
// password (so that they connect whatever the server's authentication),
// and nothing else: neither may create a schema or a database.
func NewRoles(t testing.TB) *Roles {
	t.Helper()
	base := postgresBase(t)
	prefix := "sagacity_" + strings.ToLower(rand.Text()[:10])
	r := &Roles{Owner: prefix + "_owner", App: prefix + "_app", password: rand.Text()}
	Exec(t, base, `CREATE ROLE "`+r.Owner+`" LOGIN PASSWORD '`+r.password+`'`)
	Exec(t, base, `CREATE ROLE "`+r.App+`" LOGIN PASSWORD '`+r.password+`'`)
	t.Cleanup(func() {
		// After the tests' schemas were dropped, with the privileges on
		// what they held.
		Exec(t, base, `DROP OWNED BY "`+r.Owner+`", "`+r.App+`"`)
		Exec(t, base, `DROP ROLE "`+r.Owner+`", "`+r.App+`"`)
	})
	return r
}

// Schema makes a fresh schema owned by the owner role, dropped when the
// test ends, and returns the urls that connect to it as the owner, as the
// application role, and as the test's superuser (for what neither role
// may do: tampering, reading behind the server's back). The application
// role may do nothing in it until Grant.
func (r *Roles) Schema(t testing.TB) (owner, app, admin string) {
	t.Helper()
	admin = PostgresURL(t)
	Exec(t, admin, `ALTER SCHEMA "`+SchemaOf(t, admin)+`" OWNER TO "`+r.Owner+`"`)
	return r.as(t, admin, r.Owner), r.as(t, admin, r.App), admin
}

// as is dbURL connecting as role.
func (r *Roles) as(t testing.TB, dbURL, role string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, r.password)
	return u.String()
}

// Grant runs the README's GRANT script as the owner on the schema of
// ownerURL, as an operator would after `sagacity migrate`: the block
// after <!-- grants: … --> in README.md (or docs/*.md), with the
// test's role names for sagacity_owner and sagacity_app, and the test's
// schema for public.
func (r *Roles) Grant(t testing.TB, ownerURL string) {
	t.Helper()
	script := strings.NewReplacer("sagacity_app", `"`+r.App+`"`, "sagacity_owner", `"`+r.Owner+`"`,
		"SCHEMA public", `SCHEMA "`+SchemaOf(t, ownerURL)+`"`).Replace(ReadmeBlock(t, "grants"))
	Exec(t, ownerURL, script)
}

// SchemaOf is the schema a PostgresURL url works in.
func SchemaOf(t testing.TB, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	s := u.Query().Get("search_path")
	if s == "" {
		t.Fatalf("%s names no schema (search_path)", dbURL)
	}
	return s
}
