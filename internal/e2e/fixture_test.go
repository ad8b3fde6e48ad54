package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// fixture is what every suite shares: a tool server, API tokens declared in
// a YAML file, clients that use them from distinct source addresses, and
// the transcript of every exchange.
type fixture struct {
	t      *testing.T
	ctx    context.Context // ends at the suite's deadline
	secret string
	// signingKey signs receipts, the same for every server of the suite.
	signingKey string
	tools      *toolServer
	tr         *transcript
	config     string // the SAGACITY_CONFIG file
	// checkpoints holds each server's checkpoint directory, by server
	// name: a server restarted under its name finds its checkpoints.
	checkpoints string

	agents     *pool // role agent: they start sagas (one saga, one initiator) and resume
	approvers  *pool // role approver
	approvers2 *pool // role approver, distinct from approvers: the other side of a race
	auditor    *client
}

// Sizes of the token roster. Suite 2 makes about 2,000 decisions on two
// processes, 50 per client and process.
const (
	nAgents     = 24
	nApprovers  = 8
	nApprovers2 = 4
)

// newFixture prepares a suite that must end within timeout.
func newFixture(t *testing.T, timeout time.Duration) *fixture {
	t.Helper()
	needLoopbackRange(t)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	tr := &transcript{start: time.Now()}
	t.Cleanup(func() {
		if t.Failed() {
			keep(t, "requests and answers", tr.String())
		}
	})
	f := &fixture{t: t, ctx: ctx, tr: tr, secret: "e2e-tool-signing-secret-" + rand.Text(), checkpoints: t.TempDir()}
	// Every server of a suite signs receipts with one key, as replicas do.
	skey, _, err := engine.GenerateKeys("sagacity.e2e")
	if err != nil {
		t.Fatal(err)
	}
	f.signingKey = skey
	f.tools = newToolServer(t, []byte(f.secret))

	ip := 1
	mint := func(name string) *client {
		ip++
		return newClient(name, "sgc_"+rand.Text(), fmt.Sprintf("127.0.0.%d", ip), tr)
	}
	var yaml strings.Builder
	u := f.tools.URL
	fmt.Fprintf(&yaml, `tools:
  - name: %s
    reversibility: COMPENSATABLE
    execute: {url: "%s/reserve", timeout: 30s}
    compensate: {url: "%s/release", timeout: 30s}
  - name: %s
    reversibility: IRREVERSIBLE
    execute: {url: "%s/wire", timeout: 30s}
  - name: %s
    reversibility: COMPENSATABLE
    execute: {url: "%s/ship", timeout: 30s}
    compensate: {url: "%s/unship", timeout: 30s}
policy:
  # Many tokens share the work on each saga to stay under the decision
  # rate limits; who may act on whose saga is tested in internal/app.
  shareSagas: true
log:
  # Checkpoints often, so that a suite sees many of them.
  checkpointEvery: 100
  checkpointInterval: 200ms
  # Checks often, so that a suite sees them find what it did.
  checkEvery: 250ms
  fullCheckEvery: 2s
tokens:
`, toolReserve, u, u, toolWire, u, toolShip, u, u)
	declare := func(c *client, role string) {
		sum := sha256.Sum256([]byte(c.token))
		fmt.Fprintf(&yaml, "  - name: %s\n    sha256: %s\n    roles: [%s]\n", c.name, hex.EncodeToString(sum[:]), role)
	}
	var agents, approvers, approvers2 []*client
	for i := range nAgents {
		c := mint(fmt.Sprintf("agent-%d", i))
		declare(c, "agent")
		agents = append(agents, c)
	}
	for i := range nApprovers {
		c := mint(fmt.Sprintf("approver-%d", i))
		declare(c, "approver")
		approvers = append(approvers, c)
	}
	for i := range nApprovers2 {
		c := mint(fmt.Sprintf("approver-b%d", i))
		declare(c, "approver")
		approvers2 = append(approvers2, c)
	}
	f.auditor = mint("auditor")
	declare(f.auditor, "auditor")
	f.agents, f.approvers, f.approvers2 = newPool(agents), newPool(approvers), newPool(approvers2)

	f.config = filepath.Join(t.TempDir(), "sagacity.yaml")
	if err := os.WriteFile(f.config, []byte(yaml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// server starts the binary on dbURL in tokens mode with the fixture's
// tools, keeping its checkpoints in a directory of its name.
func (f *fixture) server(name, dbURL string) *server {
	f.t.Helper()
	s := newServer(f.t, name, f.env(name, dbURL, nil))
	s.start()
	return s
}

// serverRefused runs the binary as server does, with the settings in
// more changed, when it must refuse to start, and returns what it said.
func (f *fixture) serverRefused(name, dbURL string, more map[string]string) string {
	f.t.Helper()
	return newServer(f.t, name, f.env(name, dbURL, more)).refused()
}

// env is the environment of the server of a name on dbURL, with the
// settings in more changed.
func (f *fixture) env(name, dbURL string, more map[string]string) map[string]string {
	env := map[string]string{
		"SAGACITY_ADDR":                "127.0.0.1:0",
		"SAGACITY_DATABASE_URL":        dbURL,
		"SAGACITY_AUTH":                "tokens",
		"SAGACITY_CONFIG":              f.config,
		"SAGACITY_TOOL_SIGNING_SECRET": f.secret,
		"SAGACITY_SIGNING_KEY":         f.signingKey,
		"SAGACITY_CHECKPOINT_DIR":      f.checkpointDir(name),
	}
	maps.Copy(env, more)
	return env
}

// checkpointDir is where the server of a name keeps its checkpoints.
func (f *fixture) checkpointDir(name string) string { return filepath.Join(f.checkpoints, name) }

// initiator is the agent that starts the i-th saga of a suite.
func (f *fixture) initiator(i int) *client { return f.agents.clients[i%len(f.agents.clients)] }
