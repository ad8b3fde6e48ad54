package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/engine"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Secret values used throughout; no error message may contain them.
const (
	sessionKey    = "session-key-0123456789abcdefghijklmnop"
	signingSecret = "signing-secret-0123456789abcdefghijklm"
	// receiptKey is a signing key made for these tests by sagacity keygen.
	receiptKey   = "PRIVATE+KEY+sagacity.test+0ac935d1+AU3NVAlT3pyzHaFV+snyiE6Quwj1snkIcuvyA9StxjF2"
	clientSecret = "client-secret-do-not-print"
	dbPassword   = "db-pass-s3cret"
	databaseURL  = "postgres://sagacity:" + dbPassword + "@db.internal:5432/sagacity"
)

func TestLoadFull(t *testing.T) {
	vars := map[string]string{
		"SAGACITY_ADDR":                       "0.0.0.0:8443",
		"SAGACITY_DATABASE_URL":               databaseURL,
		"SAGACITY_CONFIG":                     filepath.Join("testdata", "full.yaml"),
		"SAGACITY_PUBLIC_URL":                 "https://sagacity.example.com/",
		"SAGACITY_OIDC_ISSUER":                "https://idp.example.com/realms/main",
		"SAGACITY_OIDC_CLIENT_ID":             "sagacity-console",
		"SAGACITY_OIDC_CLIENT_SECRET":         clientSecret,
		"SAGACITY_API_AUDIENCE":               "sagacity-api",
		"SAGACITY_SESSION_KEY":                sessionKey,
		"SAGACITY_TOOL_SIGNING_SECRET":        signingSecret,
		"SAGACITY_SIGNING_KEY":                receiptKey,
		"SAGACITY_CHECKPOINT_DIR":             "/var/lib/sagacity/checkpoints",
		"SAGACITY_AUTH":                       "oidc",
		"SAGACITY_APPROVAL_ENDPOINTS_ENABLED": "false",
		"SAGACITY_DEMO":                       "true",
	}
	got, err := Load(env(vars))
	if err != nil {
		t.Fatalf("Load(%v): %v", vars, err)
	}
	want := Config{
		Addr:              "0.0.0.0:8443",
		DatabaseURL:       databaseURL,
		ConfigPath:        filepath.Join("testdata", "full.yaml"),
		PublicURL:         "https://sagacity.example.com",
		OIDCIssuer:        "https://idp.example.com/realms/main",
		OIDCClientID:      "sagacity-console",
		OIDCClientSecret:  clientSecret,
		APIAudience:       "sagacity-api",
		SessionKey:        []byte(sessionKey),
		ToolSigningSecret: []byte(signingSecret),
		SigningKey:        receiptKey,
		CheckpointDir:     "/var/lib/sagacity/checkpoints",
		Auth:              "oidc",
		ApprovalEndpoints: false,
		Demo:              true,
		Hosts:             []string{"sagacity.example.com"},
		File: File{
			Tools: []Tool{
				{
					Name:          "reserveInventory",
					Reversibility: engine.Compensatable,
					Execute:       Endpoint{URL: "http://127.0.0.1:9000/reserve", Timeout: 10 * time.Second},
					Compensate:    &Endpoint{URL: "http://127.0.0.1:9000/release", Timeout: 90 * time.Second},
				},
				{
					Name:          "refundPayment",
					Reversibility: engine.Reversible,
					Execute:       Endpoint{URL: "https://payments.internal/refund?mode=full", Timeout: 5 * time.Minute},
					Compensate:    &Endpoint{URL: "https://payments.internal/charge", Timeout: 10 * time.Second},
				},
				{
					Name:          "notifyTeam",
					Reversibility: engine.Compensatable,
					Execute:       Endpoint{URL: "http://127.0.0.1:9000/notify", Timeout: 250 * time.Millisecond},
					Compensate:    &Endpoint{URL: "http://127.0.0.1:9000/unnotify", Timeout: 10 * time.Second},
				},
				{
					Name:          "sendWireTransfer",
					Reversibility: engine.Irreversible,
					Execute:       Endpoint{URL: "http://127.0.0.1:9000/wire", Timeout: 10 * time.Second},
					Description:   "Wires an amount to an account. Needs a person's approval.",
					InputSchema: json.RawMessage(`{"additionalProperties":false,"properties":{"amount":{"pattern":"^[0-9]+$","type":"string"},` +
						`"to":{"type":"string"}},"required":["amount","to"],"type":"object"}`),
				},
			},
			Upstreams: []Upstream{
				{
					Name: "files", Command: []string{"mcp-server-files", "--root", "/srv/share"}, Env: map[string]string{"FILES_MODE": "strict"},
					Timeout: 30 * time.Second, Prefix: "files_", Default: engine.Irreversible,
					Tools: map[string]UpstreamTool{
						"write_file": {Reversibility: engine.Compensatable, Compensate: &UpstreamUndo{Tool: "delete_file", Arguments: "result"}},
						"list_files": {ReadOnly: true},
					},
				},
				{
					Name: "crm", URL: "https://crm.internal/mcp", Timeout: time.Minute, Default: engine.Irreversible,
					Tools: map[string]UpstreamTool{"create_contact": {Compensate: &UpstreamUndo{Tool: "delete_contact", Arguments: "input"}}},
				},
			},
			Tokens: []Token{
				{Name: "ci-bot", SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Roles: []engine.Role{engine.RoleAgent}},
				{Name: "audit-export", SHA256: "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752", Roles: []engine.Role{engine.RoleAuditor, engine.RoleApprover}},
			},
			Roles: Roles{
				Claim: "groups",
				Map: map[string][]engine.Role{
					"payments-approvers": {engine.RoleApprover},
					"auditors":           {engine.RoleAuditor},
					"agents":             {engine.RoleAgent, engine.RoleAuditor},
				},
			},
			Policy: Policy{MaxBodyBytes: 512 << 10, MaxResultBytes: 2 << 20, ShareSagas: true, MaxWait: 10 * time.Minute, ExecutionsPerMinute: 6000},
			Log:    Log{Every: 250, Interval: 2 * time.Second, CheckEvery: 30 * time.Second, FullCheckEvery: 10 * time.Minute},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(%v) mismatch (-want +got):\n%s", vars, diff)
	}
}

func TestLoadDefaults(t *testing.T) {
	got, err := Load(env(nil))
	if err != nil {
		t.Fatalf("Load(no variables): %v", err)
	}
	want := Config{
		Addr:              DefaultAddr,
		DatabaseURL:       DefaultDatabaseURL,
		Auth:              "dev",
		ApprovalEndpoints: true,
		File: File{
			Roles:  Roles{Claim: "groups"},
			Policy: Policy{MaxBodyBytes: 1 << 20, MaxResultBytes: 1 << 20, MaxWait: 5 * time.Minute, ExecutionsPerMinute: 1200},
			Log:    Log{Every: 1000, Interval: 10 * time.Second, CheckEvery: 30 * time.Second, FullCheckEvery: 10 * time.Minute},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(no variables) mismatch (-want +got):\n%s", diff)
	}
}

// writeConfig writes a YAML file into a fresh directory and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sagacity.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadValid checks one aspect of Config per accepted setting.
func TestLoadValid(t *testing.T) {
	const oneTool = `
tools:
  - name: t
    execute: {url: "http://127.0.0.1:9000/t", timeout: %s}
    compensate: {url: "http://127.0.0.1:9000/u"}
`
	const oneToken = "tokens: [{name: a, sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, roles: [agent]}]\n"
	file := func(c Config) any { return c.File }
	policy := func(c Config) any { return c.File.Policy }
	timeout := func(c Config) any { return c.File.Tools[0].Execute.Timeout }
	tests := []struct {
		name string
		vars map[string]string
		yaml string // when set, written to a file named by SAGACITY_CONFIG
		got  func(Config) any
		want any
	}{
		{"empty file", nil, "\n", file, defaultFile()},
		{"comments only", nil, "# nothing yet\n", file, defaultFile()},
		{"empty lists and mappings", nil, "tools: []\ntokens: []\nroles: {}\npolicy: {}\n", file, defaultFile()},
		// A hook's tool is IRREVERSIBLE, and needs no tool signing secret.
		{"hook tool", nil, "tools:\n  - name: claudeCode\n    hook: claude-code\n    description: Claude Code's tool uses\n",
			func(c Config) any { return c.File.Tools },
			[]Tool{{Name: "claudeCode", Reversibility: engine.Irreversible, Hook: HookClaudeCode, Description: "Claude Code's tool uses"}}},
		{"public url slash trimmed", map[string]string{"SAGACITY_PUBLIC_URL": "https://s.example/sagacity/"}, "",
			func(c Config) any { return c.PublicURL }, "https://s.example/sagacity"},
		{"public url plain http", map[string]string{"SAGACITY_PUBLIC_URL": "http://127.0.0.1:8080"}, "",
			func(c Config) any { return c.PublicURL }, "http://127.0.0.1:8080"},
		{"issuer kept as given", map[string]string{"SAGACITY_AUTH": "tokens", "SAGACITY_OIDC_ISSUER": "https://idp.example/", "SAGACITY_SIGNING_KEY": receiptKey, "SAGACITY_CHECKPOINT_DIR": "cp"}, oneToken,
			func(c Config) any { return c.OIDCIssuer }, "https://idp.example/"},
		{"issuer http on 127.0.0.1", map[string]string{"SAGACITY_AUTH": "dev", "SAGACITY_OIDC_ISSUER": "http://127.0.0.1:5556/dex"}, "",
			func(c Config) any { return c.OIDCIssuer }, "http://127.0.0.1:5556/dex"},
		{"issuer http on localhost", map[string]string{"SAGACITY_AUTH": "dev", "SAGACITY_OIDC_ISSUER": "http://localhost:5556"}, "",
			func(c Config) any { return c.OIDCIssuer }, "http://localhost:5556"},
		{"issuer http on ::1", map[string]string{"SAGACITY_AUTH": "dev", "SAGACITY_OIDC_ISSUER": "http://[::1]:5556"}, "",
			func(c Config) any { return c.OIDCIssuer }, "http://[::1]:5556"},
		{"postgresql scheme", map[string]string{"SAGACITY_DATABASE_URL": "postgresql://db/s"}, "",
			func(c Config) any { return c.DatabaseURL }, "postgresql://db/s"},
		{"dev default on localhost", map[string]string{"SAGACITY_ADDR": "localhost:8080"}, "",
			func(c Config) any { return c.Auth }, auth.ModeDev},
		{"dev default on ::1", map[string]string{"SAGACITY_ADDR": "[::1]:8080"}, "",
			func(c Config) any { return c.Auth }, auth.ModeDev},
		{"dev default on 127.0.0.2", map[string]string{"SAGACITY_ADDR": "127.0.0.2:0"}, "",
			func(c Config) any { return c.Auth }, auth.ModeDev},
		{"dev explicit", map[string]string{"SAGACITY_AUTH": "dev"}, "",
			func(c Config) any { return c.Auth }, auth.ModeDev},
		{"tokens on every interface", map[string]string{"SAGACITY_AUTH": "tokens", "SAGACITY_ADDR": ":8080", "SAGACITY_ALLOWED_HOSTS": "sagacity.internal",
			"SAGACITY_SIGNING_KEY": receiptKey, "SAGACITY_CHECKPOINT_DIR": "cp"}, oneToken,
			func(c Config) any { return c.Auth }, auth.ModeTokens},
		{"hosts from the public url and the allowed list", map[string]string{"SAGACITY_PUBLIC_URL": "https://Console.Example:8443/base",
			"SAGACITY_ALLOWED_HOSTS": " sagacity.svc.cluster.local ,, API.internal"}, "",
			func(c Config) any { return c.Hosts }, []string{"console.example", "sagacity.svc.cluster.local", "api.internal"}},
		{"no hosts needed on loopback", nil, "", func(c Config) any { return c.Hosts }, []string(nil)},
		{"no signing key needed in dev mode", nil, "", func(c Config) any { return c.SigningKey }, ""},
		{"no checkpoint directory needed in dev mode", nil, "", func(c Config) any { return c.CheckpointDir }, ""},
		{"log defaults", nil, "", func(c Config) any { return c.File.Log },
			Log{Every: 1000, Interval: 10 * time.Second, CheckEvery: 30 * time.Second, FullCheckEvery: 10 * time.Minute}},
		{"log bounds", nil, "log: {checkpointEvery: 1, checkpointInterval: 100ms, checkEvery: 100ms, fullCheckEvery: 1s}\n",
			func(c Config) any { return c.File.Log }, Log{Every: 1, Interval: 100 * time.Millisecond, CheckEvery: 100 * time.Millisecond, FullCheckEvery: time.Second}},
		{"mcp holds calls", nil, "mcp: {holdFor: 2m}\n", func(c Config) any { return c.File.MCP }, MCP{HoldFor: 2 * time.Minute}},
		{"mcp holds no call by default", nil, "", func(c Config) any { return c.File.MCP }, MCP{}},
		{"signing key with spaces around", map[string]string{"SAGACITY_SIGNING_KEY": " " + receiptKey + "\n"}, "", func(c Config) any { return c.SigningKey }, receiptKey},
		{"sagas shared", nil, "policy: {shareSagas: true}\n", policy, Policy{MaxBodyBytes: 1 << 20, MaxResultBytes: 1 << 20, ShareSagas: true, MaxWait: 5 * time.Minute, ExecutionsPerMinute: 1200}},
		{"oidc without client secret", map[string]string{"SAGACITY_SIGNING_KEY": receiptKey, "SAGACITY_CHECKPOINT_DIR": "cp",
			"SAGACITY_AUTH": "oidc", "SAGACITY_ADDR": "0.0.0.0:8080", "SAGACITY_OIDC_ISSUER": "https://idp.example",
			"SAGACITY_OIDC_CLIENT_ID": "c", "SAGACITY_PUBLIC_URL": "https://s.example", "SAGACITY_SESSION_KEY": sessionKey}, "",
			func(c Config) any { return c.Auth }, auth.ModeOIDC},
		{"approval endpoints off", map[string]string{"SAGACITY_APPROVAL_ENDPOINTS_ENABLED": "0"}, "",
			func(c Config) any { return c.ApprovalEndpoints }, false},
		{"demo on", map[string]string{"SAGACITY_DEMO": "1"}, "",
			func(c Config) any { return c.Demo }, true},
		{"keys of exactly 32 bytes", map[string]string{"SAGACITY_SESSION_KEY": strings.Repeat("k", 32), "SAGACITY_TOOL_SIGNING_SECRET": strings.Repeat("s", 32)}, "",
			func(c Config) any { return [][]byte{c.SessionKey, c.ToolSigningSecret} }, [][]byte{[]byte(strings.Repeat("k", 32)), []byte(strings.Repeat("s", 32))}},
		{"sizes in bytes", nil, "policy: {maxBody: 1024, maxResult: 67108864}\n", policy, Policy{MaxBodyBytes: 1 << 10, MaxResultBytes: 64 << 20, MaxWait: 5 * time.Minute, ExecutionsPerMinute: 1200}},
		{"sizes with units", nil, "policy: {maxBody: 1KiB, maxResult: 64MiB}\n", policy, Policy{MaxBodyBytes: 1 << 10, MaxResultBytes: 64 << 20, MaxWait: 5 * time.Minute, ExecutionsPerMinute: 1200}},
		{"holding no call, executions at their bounds", nil, "policy: {maxWait: 0s, executionsPerMinute: 1}\n", policy,
			Policy{MaxBodyBytes: 1 << 20, MaxResultBytes: 1 << 20, ExecutionsPerMinute: 1}},
		{"size with a space", nil, "policy: {maxBody: 3 MiB}\n", policy, Policy{MaxBodyBytes: 3 << 20, MaxResultBytes: 1 << 20, MaxWait: 5 * time.Minute, ExecutionsPerMinute: 1200}},
		{"timeout at most", map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": signingSecret}, strings.Replace(oneTool, "%s", "5m", 1), timeout, 5 * time.Minute},
		{"timeout tiny", map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": signingSecret}, strings.Replace(oneTool, "%s", "1ns", 1), timeout, time.Nanosecond},
		{"timeout null", map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": signingSecret}, strings.Replace(oneTool, "%s", "~", 1), timeout, 10 * time.Second},
		{"reversibility default", map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": signingSecret}, strings.Replace(oneTool, "%s", "1s", 1),
			func(c Config) any { return c.File.Tools[0].Reversibility }, engine.Compensatable},
		{"irreversible with null compensate", map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": signingSecret},
			"tools: [{name: w, reversibility: IRREVERSIBLE, execute: {url: \"https://w.example\"}, compensate: ~}]\n",
			func(c Config) any { return c.File.Tools[0].Compensate }, (*Endpoint)(nil)},
		{"claim default with a map", nil, "roles: {map: {ops: [approver, auditor]}}\n",
			func(c Config) any { return c.File.Roles }, Roles{Claim: "groups", Map: map[string][]engine.Role{"ops": {engine.RoleApprover, engine.RoleAuditor}}}},
		{"claim set", nil, "roles: {claim: roles}\n",
			func(c Config) any { return c.File.Roles }, Roles{Claim: "roles"}},
		// The policy is the one the same rules compile to, whatever the
		// YAML's spelling; without default, the engine's stays.
		{"an approval policy", nil, "approval:\n  tools:\n    wire:\n      - {name: small, when: \"double(payload.amount) <= 1000.0\"}\n",
			func(c Config) any { return c.File.Approvals.Hash }, compiled(t, engine.PolicySpec{Default: engine.DefaultPolicy.Default,
				Tools: map[string][]engine.RuleSpec{"wire": {{Name: "small", When: "double(payload.amount) <= 1000.0"}}}})},
		{"an approval policy refusing what it has no rule for", nil, "approval: {default: []}\n",
			func(c Config) any { return c.File.Approvals.Hash }, compiled(t, engine.PolicySpec{})},
		{"an approval rule whose condition skips when it cannot be evaluated", nil,
			"approval:\n  tools:\n    wire:\n      - {name: small, when: \"payload.amount <= 1000\", onError: skip}\n",
			func(c Config) any { return c.File.Approvals.Hash }, compiled(t, engine.PolicySpec{Default: engine.DefaultPolicy.Default,
				Tools: map[string][]engine.RuleSpec{"wire": {{Name: "small", When: "payload.amount <= 1000", OnError: engine.OnErrorSkip}}}})},
		{"an approval rule counting only passkey votes", nil, "approval:\n  tools:\n    wire:\n      - {name: signed, quorum: 2, passkey: required}\n",
			func(c Config) any { return c.File.Approvals.Hash }, compiled(t, engine.PolicySpec{Default: engine.DefaultPolicy.Default,
				Tools: map[string][]engine.RuleSpec{"wire": {{Name: "signed", Quorum: 2, Passkey: engine.PasskeyRequired}}}})},
		{"an approval rule of one from each of two groups", nil,
			"approval:\n  default:\n    - {name: both, quorum: [{from: finance, count: 1}, {from: security, count: 1}]}\n",
			func(c Config) any { return c.File.Approvals.Hash }, compiled(t, engine.PolicySpec{Default: []engine.RuleSpec{{Name: "both",
				Thresholds: [][]engine.Requirement{{{From: "finance", Count: 1}, {From: "security", Count: 1}}}}}})},
		{"an approval rule of alternatives", nil,
			"approval:\n  default:\n    - name: either\n      quorum:\n        anyOf:\n          - 2\n          - [{from: treasury, count: 1}]\n",
			func(c Config) any { return c.File.Approvals.Hash }, compiled(t, engine.PolicySpec{Default: []engine.RuleSpec{{Name: "either",
				Thresholds: [][]engine.Requirement{{{Count: 2}}, {{From: "treasury", Count: 1}}}}}})},
		{"without default, when every IRREVERSIBLE tool has rules", map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": signingSecret},
			"tools:" + wireTool + reserve + "approval:\n  tools:\n    sendWireTransfer: [{name: one}]\n",
			func(c Config) any { return c.File.Approvals.Hash }, compiled(t, engine.PolicySpec{Default: engine.DefaultPolicy.Default,
				Tools: map[string][]engine.RuleSpec{"sendWireTransfer": {{Name: "one"}}}})},
		{"windows of seconds in dev mode", nil, "approval:\n  default:\n    - {expires: 30s, grant: 2s, stepUp: 1s}\n",
			func(c Config) any {
				r := c.File.Approvals.Default()[0]
				return []time.Duration{r.Expires, r.Grant, r.StepUp}
			}, []time.Duration{30 * time.Second, 2 * time.Second, time.Second}},
		{"tokens in groups meeting a rule that names the group", map[string]string{"SAGACITY_AUTH": "tokens", "SAGACITY_SIGNING_KEY": receiptKey, "SAGACITY_CHECKPOINT_DIR": "cp"},
			"tokens:\n  - {name: alice, sha256: " + hashA + ", roles: [approver], groups: [finance, ops]}\n" +
				"  - {name: bob, sha256: 60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752, roles: [approver], groups: [finance]}\n" +
				"approval:\n  default:\n    - {name: finance, approvers: [finance], quorum: 2}\n",
			func(c Config) any { return [][]string{c.File.Tokens[0].Groups, c.File.Tokens[1].Groups} }, [][]string{{"finance", "ops"}, {"finance"}}},
		{"an approval rule the server executes on approval", nil, "approval:\n  tools:\n    wire:\n      - {name: auto, execute: on-approval}\n",
			func(c Config) any { return c.File.Approvals.Hash }, compiled(t, engine.PolicySpec{Default: engine.DefaultPolicy.Default,
				Tools: map[string][]engine.RuleSpec{"wire": {{Name: "auto", Execute: engine.ExecuteOnApproval}}}})},
		{"a break-glass for oncall, ratified within a day", nil, "approval:\n  breakGlass: {approvers: [oncall], ratifyWithin: 24h}\n  tools:\n    wire:\n      - {name: two, quorum: 2}\n",
			func(c Config) any { return c.File.Approvals.Hash }, compiled(t, engine.PolicySpec{Default: engine.DefaultPolicy.Default,
				Tools:      map[string][]engine.RuleSpec{"wire": {{Name: "two", Quorum: 2}}},
				BreakGlass: &engine.BreakGlassSpec{Approvers: []string{"oncall"}, RatifyWithin: engine.Duration(24 * time.Hour)}})},
		{"a break-glass ratified within seconds in dev mode", nil, "approval:\n  breakGlass: {approvers: [oncall], ratifyWithin: 30s}\n  default: [{name: d}]\n",
			func(c Config) any { return *c.File.Approvals.BreakGlass() }, engine.BreakGlass{Approvers: []string{"oncall"}, RatifyWithin: 30 * time.Second}},
		{"an approval rule with a wait timer", nil, "approval:\n  tools:\n    wire:\n      - {name: cooling, notBefore: 24h, grant: 48h}\n",
			func(c Config) any { return c.File.Approvals.Hash }, compiled(t, engine.PolicySpec{Default: engine.DefaultPolicy.Default,
				Tools: map[string][]engine.RuleSpec{"wire": {{Name: "cooling", NotBefore: engine.Duration(24 * time.Hour), Grant: engine.Duration(48 * time.Hour)}}}})},
		{"conditions over the requester's claims and the time in Paris", nil,
			"approval:\n  claims: [department, employee_type]\n  timeZone: Europe/Paris\n  tools:\n    wire:\n" +
				"      - {name: night, when: 'now.getHours(tz) < 8', quorum: 2}\n      - {name: team, when: 'sameGroup(who, payload.team)'}\n",
			func(c Config) any {
				return []any{c.File.Approvals.Hash, c.File.Approvals.Claims(), c.File.Approvals.UsesContext()}
			}, []any{compiled(t, engine.PolicySpec{Default: engine.DefaultPolicy.Default, Claims: []string{"department", "employee_type"}, TimeZone: "Europe/Paris",
				Tools: map[string][]engine.RuleSpec{"wire": {{Name: "night", When: "now.getHours(tz) < 8", Quorum: 2}, {Name: "team", When: "sameGroup(who, payload.team)"}}}}),
				[]string{"department", "employee_type"}, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{}
			for k, v := range tt.vars {
				vars[k] = v
			}
			if tt.yaml != "" {
				vars["SAGACITY_CONFIG"] = writeConfig(t, tt.yaml)
			}
			c, err := Load(env(vars))
			if err != nil {
				t.Fatalf("Load(%v) with file %q: %v", vars, tt.yaml, err)
			}
			if diff := cmp.Diff(tt.want, tt.got(c)); diff != "" {
				t.Errorf("Load(%v) with file %q mismatch (-want +got):\n%s", vars, tt.yaml, diff)
			}
		})
	}
}

func TestLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.1.2.3:8080", true},
		{"localhost:8080", true},
		{"LOCALHOST:8080", true},
		{"[::1]:8080", true},
		{":8080", false},
		{"0.0.0.0:8080", false},
		{"[::]:8080", false},
		{"192.168.1.10:8080", false},
		{"sagacity.example.com:8080", false},
		{"localhost.example.com:8080", false},
		{"nonsense", false},
	}
	for _, tt := range tests {
		if got := (Config{Addr: tt.addr}).Loopback(); got != tt.want {
			t.Errorf("Config{Addr: %q}.Loopback() = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

// errorCase is a setting Load must refuse. Its vars go on top of
// secretVars, where "" unsets a variable. A yaml file, when given, is
// written to a fresh directory and named by SAGACITY_CONFIG; {dir} and
// {path} in vars and want stand for that directory and file.
type errorCase struct {
	name    string
	vars    map[string]string
	yaml    string
	want    string   // a substring of the error
	secrets []string // values besides secretVars' that must not be printed
}

// secretVars is a valid dev environment holding every secret.
var secretVars = map[string]string{
	"SAGACITY_SIGNING_KEY":         receiptKey,
	"SAGACITY_CHECKPOINT_DIR":      "checkpoints",
	"SAGACITY_DATABASE_URL":        databaseURL,
	"SAGACITY_SESSION_KEY":         sessionKey,
	"SAGACITY_TOOL_SIGNING_SECRET": signingSecret,
	"SAGACITY_OIDC_CLIENT_SECRET":  clientSecret,
}

// secretNames are the variables whose values must never be printed.
var secretNames = []string{"SAGACITY_DATABASE_URL", "SAGACITY_SESSION_KEY", "SAGACITY_TOOL_SIGNING_SECRET", "SAGACITY_OIDC_CLIENT_SECRET", "SAGACITY_SIGNING_KEY"}

const wireTool = `
  - name: sendWireTransfer
    reversibility: IRREVERSIBLE
    execute: {url: "http://127.0.0.1:9000/wire"}
`

const reserve = `
  - name: reserveInventory
    execute: {url: "http://127.0.0.1:9000/reserve"}
    compensate: {url: "http://127.0.0.1:9000/release"}
`

const hashA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func errorCases() []errorCase {
	oidc := map[string]string{
		"SAGACITY_AUTH": "oidc", "SAGACITY_OIDC_ISSUER": "https://idp.example", "SAGACITY_OIDC_CLIENT_ID": "c",
		"SAGACITY_PUBLIC_URL": "https://s.example", "SAGACITY_SESSION_KEY": sessionKey,
	}
	without := func(m map[string]string, key string) map[string]string {
		c := map[string]string{}
		for k, v := range m {
			c[k] = v
		}
		c[key] = ""
		return c
	}
	const f = "SAGACITY_CONFIG ({path}): "
	return []errorCase{
		// Variables.
		{name: "addr not host:port", vars: map[string]string{"SAGACITY_ADDR": "nonsense"}, want: `SAGACITY_ADDR: "nonsense" is not host:port (missing port in address)`},
		{name: "addr too many colons", vars: map[string]string{"SAGACITY_ADDR": "::1:8080"}, want: `SAGACITY_ADDR: "::1:8080" is not host:port`},
		{name: "database scheme", vars: map[string]string{"SAGACITY_DATABASE_URL": "mysql://root:" + dbPassword + "@db/x"},
			want: "SAGACITY_DATABASE_URL: must start with postgres://, postgresql:// or sqlite:", secrets: []string{dbPassword}},
		{name: "database bare path", vars: map[string]string{"SAGACITY_DATABASE_URL": "sagacity.db"}, want: "SAGACITY_DATABASE_URL: must start with"},
		{name: "public url relative", vars: map[string]string{"SAGACITY_PUBLIC_URL": "s.example/app"}, want: "SAGACITY_PUBLIC_URL: s.example/app is not an http or https URL"},
		{name: "public url scheme", vars: map[string]string{"SAGACITY_PUBLIC_URL": "ftp://s.example"}, want: "SAGACITY_PUBLIC_URL: ftp://s.example is not an http or https URL"},
		{name: "public url no host", vars: map[string]string{"SAGACITY_PUBLIC_URL": "https:///app"}, want: "SAGACITY_PUBLIC_URL: https:///app has no host"},
		{name: "public url query", vars: map[string]string{"SAGACITY_PUBLIC_URL": "https://s.example/?a=1"}, want: "SAGACITY_PUBLIC_URL: https://s.example/?a=1 must not have a query"},
		{name: "public url fragment", vars: map[string]string{"SAGACITY_PUBLIC_URL": "https://s.example/#top"}, want: "SAGACITY_PUBLIC_URL: https://s.example/#top must not have a fragment"},
		{name: "public url user info", vars: map[string]string{"SAGACITY_PUBLIC_URL": "https://u:pw-in-url@s.example"},
			want: "SAGACITY_PUBLIC_URL: https://u:xxxxx@s.example must not contain user information", secrets: []string{"pw-in-url"}},
		{name: "public url unparsable", vars: map[string]string{"SAGACITY_PUBLIC_URL": "https://s.example/%zz"}, want: "SAGACITY_PUBLIC_URL: not a valid URL"},
		{name: "issuer http elsewhere", vars: map[string]string{"SAGACITY_OIDC_ISSUER": "http://idp.example"},
			want: "SAGACITY_OIDC_ISSUER: http://idp.example must use https (http is allowed only on 127.0.0.1, ::1 or localhost)"},
		{name: "issuer not a url", vars: map[string]string{"SAGACITY_OIDC_ISSUER": "idp.example"}, want: "SAGACITY_OIDC_ISSUER: idp.example is not an http or https URL"},
		{name: "issuer query", vars: map[string]string{"SAGACITY_OIDC_ISSUER": "https://idp.example?realm=x"}, want: "SAGACITY_OIDC_ISSUER: https://idp.example?realm=x must not have a query"},
		{name: "session key short", vars: map[string]string{"SAGACITY_SESSION_KEY": "short-session-key"}, want: "SAGACITY_SESSION_KEY: must be at least 32 bytes"},
		{name: "signing secret short", vars: map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": "short-signing-secret"}, want: "SAGACITY_TOOL_SIGNING_SECRET: must be at least 32 bytes"},
		{name: "approval endpoints not a bool", vars: map[string]string{"SAGACITY_APPROVAL_ENDPOINTS_ENABLED": "yes"}, want: `SAGACITY_APPROVAL_ENDPOINTS_ENABLED: "yes" is not a boolean`},
		{name: "demo not a bool", vars: map[string]string{"SAGACITY_DEMO": "maybe"}, want: `SAGACITY_DEMO: "maybe" is not a boolean`},
		{name: "auth unknown", vars: map[string]string{"SAGACITY_AUTH": "basic"}, want: `SAGACITY_AUTH: "basic" is not one of oidc, tokens, dev`},
		{name: "auth upper case", vars: map[string]string{"SAGACITY_AUTH": "OIDC"}, want: `SAGACITY_AUTH: "OIDC" is not one of oidc, tokens, dev`},

		// Auth mode.
		{name: "auth unset on every interface", vars: map[string]string{"SAGACITY_ADDR": "0.0.0.0:8080"},
			want: "SAGACITY_AUTH: not set; set oidc (console and API) or tokens (API only); dev is only for a loopback address without an issuer"},
		{name: "auth unset with an issuer", vars: map[string]string{"SAGACITY_OIDC_ISSUER": "https://idp.example"}, want: "SAGACITY_AUTH: not set;"},
		{name: "dev on 0.0.0.0", vars: map[string]string{"SAGACITY_AUTH": "dev", "SAGACITY_ADDR": "0.0.0.0:8080"},
			want: "SAGACITY_AUTH: dev mode refuses to listen on 0.0.0.0:8080: it accepts anyone; bind to 127.0.0.1 or use oidc or tokens"},
		{name: "dev on empty host", vars: map[string]string{"SAGACITY_AUTH": "dev", "SAGACITY_ADDR": ":8080"}, want: "SAGACITY_AUTH: dev mode refuses to listen on :8080:"},
		{name: "dev on a lan address", vars: map[string]string{"SAGACITY_AUTH": "dev", "SAGACITY_ADDR": "192.168.1.10:8080"}, want: "SAGACITY_AUTH: dev mode refuses to listen on 192.168.1.10:8080:"},
		{name: "no host names beyond loopback", vars: map[string]string{"SAGACITY_AUTH": "tokens", "SAGACITY_ADDR": "0.0.0.0:8080", "SAGACITY_CONFIG": "testdata/full.yaml"},
			want: "SAGACITY_PUBLIC_URL: required when listening on 0.0.0.0:8080: the server answers only to the host names it is configured for (list more in SAGACITY_ALLOWED_HOSTS)"},
		{name: "no checkpoint directory beyond dev", vars: map[string]string{"SAGACITY_AUTH": "tokens", "SAGACITY_CONFIG": "testdata/full.yaml", "SAGACITY_CHECKPOINT_DIR": ""},
			want: "SAGACITY_CHECKPOINT_DIR: required unless SAGACITY_AUTH=dev"},
		{name: "checkpoints never", yaml: "log: {checkpointEvery: 0}\n", want: `log.checkpointEvery: "0" is not a number of entries, at least 1`},
		{name: "checkpoints too often", yaml: "log: {checkpointInterval: 1ms}\n", want: "log.checkpointInterval: 1ms must be at least 100ms and at most 1h0m0s"},
		{name: "checkpoint interval not a duration", yaml: "log: {checkpointInterval: soon}\n", want: `log.checkpointInterval: "soon" is not a duration like 10s or 1m`},
		{name: "checks too often", yaml: "log: {checkEvery: 10ms}\n", want: "log.checkEvery: 10ms must be at least 100ms and at most 1h0m0s"},
		{name: "an approval condition that does not compile", yaml: "approval:\n  tools:\n    sendWireTransfer:\n      - name: big\n        when: payload.amount >\n",
			want: "approval: tool sendWireTransfer, rule 1 (big): condition, column"},
		{name: "an approval condition naming an unknown variable", yaml: "approval:\n  default:\n    - when: amount > 5\n",
			want: "approval: default, rule 1 (default#1): condition, column 1: undeclared reference to 'amount'"},
		{name: "an approval rule of an unknown key", yaml: "approval:\n  default:\n    - if: true\n", want: `unknown key "if"`},
		{name: "a quorum too large", yaml: "approval:\n  default:\n    - quorum: 51\n", want: "approval: default, rule 1 (default#1): quorum must be from 1 to 50"},
		{name: "a quorum that is no number", yaml: "approval:\n  default:\n    - quorum: two\n", want: `line 3: "two" is not a number (quorum is a number,`},
		{name: "a requirement of an unknown key", yaml: "approval:\n  default:\n    - quorum: [{group: finance, count: 1}]\n",
			want: "line 3: a requirement has from and count, not group"},
		{name: "a requirement without a count", yaml: "approval:\n  default:\n    - quorum: [{from: finance}]\n",
			want: "line 3: a requirement says how many: count"},
		{name: "alternatives under another key", yaml: "approval:\n  default:\n    - quorum: {oneOf: [1, 2]}\n",
			want: "line 3: a quorum that is a map has one key, anyOf, a list of alternatives"},
		{name: "a requirement from a group the rule does not name", yaml: "approval:\n  default:\n    - {approvers: [finance], quorum: [{from: security, count: 1}]}\n",
			want: "approval: default, rule 1 (default#1): quorum, requirement 1: security is none of the rule's approvers (finance)"},
		{name: "an expiry that is no duration", yaml: "approval:\n  default:\n    - expires: soon\n",
			want: `approval: default, rule 1: expires: "soon" is not a duration like 30m or 2h`},
		{name: "a token's group listed twice", yaml: "tokens:\n  - {name: a, sha256: " + hashA + ", roles: [approver], groups: [x, x]}\n",
			want: f + `tokens[0] "a": groups: "x" is listed twice`},
		// Windows of seconds are for dev mode; under a second, for none.
		{name: "a step-up too short", vars: oidc, yaml: "approval:\n  tools:\n    sendWireTransfer:\n      - stepUp: 10s\n",
			want: "SAGACITY_CONFIG ({path}): approval: tool sendWireTransfer, rule 1 (sendWireTransfer#1): stepUp must be from 1m0s to 12h0m0s (got 10s); " +
				"windows shorter than 1m0s are for trying the clocks in dev mode (SAGACITY_AUTH=dev), down to 1s"},
		{name: "an expiry of seconds outside dev mode", vars: map[string]string{"SAGACITY_AUTH": "tokens"},
			yaml: approverTokens + "approval:\n  default:\n    - {expires: 30s}\n",
			want: "SAGACITY_CONFIG ({path}): approval: default, rule 1 (default#1): expires must be from 1m0s to 8784h0m0s (got 30s); " +
				"windows shorter than 1m0s are for trying the clocks in dev mode (SAGACITY_AUTH=dev), down to 1s"},
		{name: "an escalation of seconds outside dev mode", vars: oidc,
			yaml: "approval:\n  default:\n    - {expires: 5m, grant: 30s}\n",
			want: "approval: default, rule 1 (default#1): grant must be from 1m0s to 8784h0m0s (got 30s); windows shorter than 1m0s are for"},
		{name: "an expiry under a second in dev mode", yaml: "approval:\n  default:\n    - {expires: 500ms}\n",
			want: f + "approval: default, rule 1 (default#1): expires must be from 1s to 8784h0m0s (got 500ms)"},
		// approval: without default: covers every IRREVERSIBLE tool, or says
		// what their requests need.
		{name: "approval without default, a tool without rules", yaml: "tools:" + wireTool + reserve + "approval:\n  tools:\n    reserveInventory: [{name: r}]\n",
			want: f + "approval: default: is missing, and these IRREVERSIBLE tools have no rules of their own: sendWireTransfer; " +
				"say what their requests need: default: [{name: default}] (one approver, as without an approval: section) or default: [] (refuse them)"},
		{name: "approval without default, an upstream's tools",
			yaml: "upstreams:\n  - {name: pay, url: \"https://mcp.example/mcp\", prefix: pay_, tools: {refund: {reversibility: IRREVERSIBLE}, lookup: {readOnly: true}, " +
				"void: {reversibility: IRREVERSIBLE}}}\napproval:\n  tools:\n    pay_void: [{name: v}]\n",
			want: f + `approval: default: is missing, and these IRREVERSIBLE tools have no rules of their own: pay_refund, every tool of upstream "pay" ` +
				`its tools: does not name (its default is IRREVERSIBLE); say what`},
		{name: "approval without default, the demo's tools", vars: map[string]string{"SAGACITY_DEMO": "true"}, yaml: "approval:\n  tools:\n    other: [{name: o}]\n",
			want: f + "approval: default: is missing, and these IRREVERSIBLE tools have no rules of their own: sendWireTransfer; say what"},
		{name: "a break-glass that names nobody", yaml: "approval:\n  breakGlass: {ratifyWithin: 24h}\n  default: []\n",
			want: "approval: breakGlass: approvers names nobody: name the roles or groups who may break the glass"},
		{name: "a break-glass without a window", yaml: "approval:\n  breakGlass: {approvers: [oncall]}\n  default: []\n",
			want: `approval: breakGlass: ratifyWithin: "" is not a duration like 30m or 24h (how long the rule's quorum has to ratify a use)`},
		{name: "a break-glass window of seconds outside dev mode", vars: oidc, yaml: "approval:\n  breakGlass: {approvers: [oncall], ratifyWithin: 30s}\n  default: []\n",
			want: "approval: breakGlass: ratifyWithin must be from 1m0s to 8784h0m0s (got 30s); windows shorter than 1m0s are for"},
		{name: "a break-glass without rules", yaml: "approval:\n  breakGlass: {approvers: [oncall], ratifyWithin: 1h}\n",
			want: "approval: breakGlass: bypasses rules' quorums, and the section has no rules (default: or tools:)"},
		{name: "a wait timer no shorter than the grant", yaml: "approval:\n  default:\n    - {notBefore: 2h, grant: 1h}\n",
			want: "approval: default, rule 1 (default#1): notBefore (2h0m0s) must be shorter than grant (1h0m0s): the request could never be executed"},
		{name: "a time zone that is none", yaml: "approval:\n  timeZone: Paris\n  default: []\n",
			want: `approval: timeZone: "Paris" is not a time zone of the IANA database, such as Europe/Paris`},
		{name: "a claim listed twice", yaml: "approval:\n  claims: [department, department]\n  default: []\n",
			want: `approval: claims, claim 2: "department" is listed already`},
		{name: "claims without rules", yaml: "approval:\n  claims: [department]\n",
			want: "approval: claims: and timeZone: are for rules' conditions, and the section has no rules"},
		{name: "a condition reading a field who has not", yaml: "approval:\n  default:\n    - {when: 'who.department == \"x\"'}\n",
			want: "approval: default, rule 1 (default#1): condition, column 4: undefined field 'department'"},
		{name: "a wait timer that is no duration", yaml: "approval:\n  default:\n    - notBefore: tomorrow\n",
			want: `approval: default, rule 1: notBefore: "tomorrow" is not a duration like 30m or 2h`},
		{name: "a reason that is neither required nor absent", yaml: "approval:\n  default:\n    - reason: optional\n",
			want: `approval: default, rule 1 (default#1): reason must be "required" or absent (got "optional")`},
		{name: "an onError that is neither refuse nor skip", yaml: "approval:\n  default:\n    - {when: \"true\", onError: ignore}\n",
			want: `approval: default, rule 1 (default#1): onError must be "refuse" or "skip" (got "ignore")`},
		{name: "an execute that is not on-approval", yaml: "approval:\n  default:\n    - execute: always\n",
			want: `approval: default, rule 1 (default#1): execute must be "on-approval" or absent (got "always")`},
		{name: "a passkey that is neither required nor absent", yaml: "approval:\n  default:\n    - passkey: preferred\n",
			want: `approval: default, rule 1 (default#1): passkey must be "required" or absent (got "preferred")`},
		{name: "a wait too long", yaml: "policy: {maxWait: 2h}\n", want: "policy.maxWait: 2h must be at least 0s and at most 1h0m0s"},
		{name: "no executions", yaml: "policy: {executionsPerMinute: 0}\n", want: "policy.executionsPerMinute: 0 must be from 1 to 1000000"},
		{name: "a hold too long", yaml: "mcp: {holdFor: 6m}\n", want: "mcp.holdFor: 6m0s is longer than policy.maxWait (5m0s), the longest a call is held"},
		{name: "full checks too rarely", yaml: "log: {fullCheckEvery: 48h}\n", want: "log.fullCheckEvery: 48h must be at least 1s and at most 24h0m0s"},
		{name: "checkpoint every not a number", yaml: "log: {checkpointEvery: many}\n", want: `log.checkpointEvery: "many" is not a number of entries, at least 1`},
		{name: "an input schema of a string", yaml: "tools:" + strings.Replace(wireTool, "execute:", "inputSchema: {type: string}\n    execute:", 1),
			want: `tools[0] "sendWireTransfer": inputSchema: its type must be "object": a tool's input is a JSON object`},
		{name: "an input schema that is no schema", yaml: "tools:" + strings.Replace(wireTool, "execute:", "inputSchema: {type: object, required: 5}\n    execute:", 1),
			want: `tools[0] "sendWireTransfer": inputSchema is not a JSON Schema`},
		{name: "an input schema as a list", yaml: "tools:" + strings.Replace(wireTool, "execute:", "inputSchema: [1]\n    execute:", 1),
			want: `line 4: expected a mapping, found a list`},
		{name: "no signing key beyond dev", vars: map[string]string{"SAGACITY_AUTH": "tokens", "SAGACITY_CONFIG": "testdata/full.yaml", "SAGACITY_SIGNING_KEY": ""},
			want: "SAGACITY_SIGNING_KEY: required unless SAGACITY_AUTH=dev"},
		{name: "a verifier key given as the signing key", vars: map[string]string{"SAGACITY_SIGNING_KEY": "sagacity.test+0ac935d1+AdKiK3O/PLawPqlsHMQqYEF4kxMdCZBsYA/WsTU00r1J"},
			want: "SAGACITY_SIGNING_KEY: not a signing key: want PRIVATE+KEY+<name>+<hash>+<key>, as sagacity keygen prints"},
		{name: "signing key and file", vars: map[string]string{"SAGACITY_SIGNING_KEY_FILE": "{dir}/key"},
			want: "SAGACITY_SIGNING_KEY: set it or SAGACITY_SIGNING_KEY_FILE, not both"},
		{name: "signing key file missing", vars: map[string]string{"SAGACITY_SIGNING_KEY": "", "SAGACITY_SIGNING_KEY_FILE": "{dir}/nope"},
			want: "SAGACITY_SIGNING_KEY_FILE: cannot read {dir}/nope: no such file or directory"},
		{name: "allowed host with a port", vars: map[string]string{"SAGACITY_ALLOWED_HOSTS": "a.example,b.example:8080"},
			want: `SAGACITY_ALLOWED_HOSTS: "b.example:8080" is not a host name; list names such as sagacity.internal, without scheme or port`},
		{name: "oidc without issuer", vars: without(oidc, "SAGACITY_OIDC_ISSUER"), want: "SAGACITY_OIDC_ISSUER: required when SAGACITY_AUTH=oidc"},
		{name: "oidc without client id", vars: without(oidc, "SAGACITY_OIDC_CLIENT_ID"), want: "SAGACITY_OIDC_CLIENT_ID: required when SAGACITY_AUTH=oidc"},
		{name: "oidc without public url", vars: without(oidc, "SAGACITY_PUBLIC_URL"), want: "SAGACITY_PUBLIC_URL: required when SAGACITY_AUTH=oidc"},
		{name: "oidc without session key", vars: without(oidc, "SAGACITY_SESSION_KEY"), want: "SAGACITY_SESSION_KEY: required when SAGACITY_AUTH=oidc (at least 32 bytes)"},
		{name: "oidc missing several names the first", vars: without(without(oidc, "SAGACITY_OIDC_CLIENT_ID"), "SAGACITY_SESSION_KEY"), want: "SAGACITY_OIDC_CLIENT_ID: required"},
		{name: "tokens without a file", vars: map[string]string{"SAGACITY_AUTH": "tokens"},
			want: "SAGACITY_AUTH: tokens mode needs at least one entry under tokens: in SAGACITY_CONFIG"},
		{name: "tokens with none in the file", vars: map[string]string{"SAGACITY_AUTH": "tokens"}, yaml: "tokens: []\n", want: "SAGACITY_AUTH: tokens mode needs at least one entry"},
		{name: "tokens and thresholds they cannot meet", vars: map[string]string{"SAGACITY_AUTH": "tokens"},
			yaml: approverTokens + "approval:\n  default:\n    - quorum: [{from: auditor, count: 1}, {count: 2}]\n",
			want: "approval: default, rule default#1: its quorum can never be met here: the 2 configured token(s) that hold the approver role " +
				"and one of approver, auditor cannot meet every requirement of any alternative, one requirement each"},
		{name: "tokens and a quorum they cannot meet", vars: map[string]string{"SAGACITY_AUTH": "tokens"},
			yaml: approverTokens + "approval:\n  default:\n    - quorum: 3\n",
			want: "approval: default, rule default#1: a quorum of 3 can never be met here: only 2 configured token(s) hold the approver role " +
				"and one of approver (SAGACITY_AUTH=tokens)"},
		{name: "tokens and a group no token is in", vars: map[string]string{"SAGACITY_AUTH": "tokens"},
			yaml: approverTokens + "approval:\n  tools:\n    sendWireTransfer:\n      - {name: large, approvers: [finance-leads]}\n",
			want: "approval: tool sendWireTransfer, rule large: a quorum of 1 can never be met here: only 0 configured token(s)"},
		{name: "tokens and a step-up", vars: map[string]string{"SAGACITY_AUTH": "tokens"},
			yaml: approverTokens + "approval:\n  default:\n    - {stepUp: 15m}\n",
			want: "approval: default, rule default#1: stepUp can never be met here: a vote counts only from a recent sign-in, and a static token has none"},
		{name: "tokens and passkeys", vars: map[string]string{"SAGACITY_AUTH": "tokens"},
			yaml: approverTokens + "approval:\n  default:\n    - {passkey: required}\n",
			want: "approval: default, rule default#1: passkey can never be met here: a vote needs the voter's passkey"},

		// Reading the file.
		{name: "file missing", vars: map[string]string{"SAGACITY_CONFIG": "{dir}/missing.yaml"}, want: "SAGACITY_CONFIG ({dir}/missing.yaml): cannot read: no such file or directory"},
		{name: "file is a directory", vars: map[string]string{"SAGACITY_CONFIG": "{dir}"}, want: "SAGACITY_CONFIG ({dir}): cannot read:"},
		{name: "yaml syntax", yaml: "tools:\n  - name: a\n    execute: url: x\n", want: f + "line 3: mapping values are not allowed in this context"},
		{name: "yaml duplicate key", yaml: "policy:\n  maxBody: 1MiB\n  maxBody: 2MiB\n", want: f + `line 3: mapping key "maxBody" already defined at line 2`},
		{name: "unknown top-level key", yaml: "tools: []\nretries: 3\n", want: f + `line 2: unknown key "retries"`},
		{name: "unknown key in a tool", yaml: "tools:\n  - name: reserveInventory\n    execute: {url: \"http://x/reserve\"}\n    compensate: {url: \"http://x/release\"}\n" +
			"  - name: sendWireTransfer\n    reversibility: IRREVERSIBLE\n    retries: 3\n", want: f + `line 7: unknown key "retries"`},
		{name: "unknown key in an endpoint", yaml: "tools:\n  - name: a\n    execute: {url: \"http://x\", method: POST}\n", want: f + `line 3: unknown key "method"`},
		{name: "unknown key in a token", yaml: "tokens:\n  - name: a\n    token: hunter2\n", want: f + `line 3: unknown key "token"`},
		{name: "unknown key in roles", yaml: "roles:\n  claims: groups\n", want: f + `line 2: unknown key "claims"`},
		{name: "unknown key in policy", yaml: "policy:\n  maxBodyBytes: 1024\n", want: f + `line 2: unknown key "maxBodyBytes"`},
		{name: "two unknown keys on one line", yaml: "a: 1\nb: 2\n", want: f + `line 1: unknown key "a"; line 2: unknown key "b"`},
		{name: "tools not a list", yaml: "tools: reserveInventory\n", want: f + "line 1: expected a list, found a single value"},
		{name: "tool not a mapping", yaml: "tools:\n  - reserveInventory\n", want: f + "line 2: expected a mapping, found a single value"},
		{name: "roles map value not a list", yaml: "roles:\n  map:\n    ops: approver\n", want: f + "line 3: expected a list, found a single value"},
		{name: "two documents", yaml: "tools: []\n---\ntokens: []\n", want: f + "holds more than one YAML document"},

		// Tools.
		{name: "tool without name", yaml: "tools:" + reserve + "  - execute: {url: \"http://x\"}\n", want: f + "tools[1]: name is missing"},
		{name: "tool name too long", yaml: "tools:\n  - name: " + strings.Repeat("n", 201) + "\n", want: f + "tools[0]: name is longer than 200 bytes"},
		{name: "tool name control character", yaml: "tools:\n  - name: \"bad\\tname\"\n", want: f + "tools[0]: name contains control characters"},
		{name: "tool name reserved", yaml: "tools:\n  - name: approval-gate\n", want: f + `tools[0] "approval-gate": name is reserved`},
		{name: "tool name twice", yaml: "tools:" + reserve + wireTool + reserve, want: f + `tools[2] "reserveInventory": name is already used by tools[0]`},
		{name: "reversibility unknown", yaml: "tools:\n  - name: a\n    reversibility: irreversible\n",
			want: f + `tools[0] "a": reversibility "irreversible" is not one of REVERSIBLE, COMPENSATABLE, IRREVERSIBLE`},
		{name: "execute url missing", yaml: "tools:" + reserve + "  - name: sendWireTransfer\n    reversibility: IRREVERSIBLE\n",
			want: f + `tools[1] "sendWireTransfer": execute.url is missing`},
		{name: "hook unknown", yaml: "tools:\n  - name: a\n    hook: cursor\n", want: f + `tools[0] "a": hook "cursor" is not one of claude-code`},
		{name: "hook reversible", yaml: "tools:\n  - name: a\n    hook: claude-code\n    reversibility: COMPENSATABLE\n",
			want: f + `tools[0] "a": a hook's tool is IRREVERSIBLE (a tool use that ran cannot be undone), not COMPENSATABLE`},
		{name: "hook with endpoint", yaml: "tools:\n  - name: a\n    hook: claude-code\n    execute: {url: \"http://x\"}\n",
			want: f + `tools[0] "a": a hook's tool has no execute or compensate block`},
		{name: "hook with schema", yaml: "tools:\n  - name: a\n    hook: claude-code\n    inputSchema: {type: object}\n",
			want: f + `tools[0] "a": a hook's tool has no inputSchema`},
		{name: "execute block without url", yaml: "tools:\n  - name: a\n    execute: {timeout: 5s}\n", want: f + `tools[0] "a": execute.url is missing`},
		{name: "execute url scheme", yaml: "tools:\n  - name: a\n    execute: {url: \"ftp://x/a\"}\n", want: f + `tools[0] "a": execute.url: ftp://x/a is not an http or https URL`},
		{name: "execute url relative", yaml: "tools:\n  - name: a\n    execute: {url: /reserve}\n", want: f + `tools[0] "a": execute.url: /reserve is not an http or https URL`},
		{name: "execute url no host", yaml: "tools:\n  - name: a\n    execute: {url: \"http:///a\"}\n", want: f + `tools[0] "a": execute.url: http:///a has no host`},
		{name: "execute url unparsable", yaml: "tools:\n  - name: a\n    execute: {url: \"http://x/%zz\"}\n", want: f + `tools[0] "a": execute.url: not a valid URL`},
		{name: "timeout without unit", yaml: "tools:\n  - name: a\n    execute: {url: \"http://x\", timeout: 10}\n",
			want: f + `tools[0] "a": execute.timeout: "10" is not a duration like 10s`},
		{name: "timeout zero", yaml: "tools:\n  - name: a\n    execute: {url: \"http://x\", timeout: 0s}\n",
			want: f + `tools[0] "a": execute.timeout: 0s must be more than 0 and at most 5m0s`},
		{name: "timeout negative", yaml: "tools:\n  - name: a\n    execute: {url: \"http://x\", timeout: -1s}\n", want: f + `tools[0] "a": execute.timeout: -1s must be more than 0`},
		{name: "timeout too long", yaml: "tools:\n  - name: a\n    execute: {url: \"http://x\", timeout: 5m1s}\n", want: f + `tools[0] "a": execute.timeout: 5m1s must be more than 0 and at most 5m0s`},
		{name: "compensate url bad", yaml: "tools:\n  - name: a\n    execute: {url: \"http://x\"}\n    compensate: {url: \"x/undo\"}\n",
			want: f + `tools[0] "a": compensate.url: x/undo is not an http or https URL`},
		{name: "compensate timeout bad", yaml: "tools:\n  - name: a\n    execute: {url: \"http://x\"}\n    compensate: {url: \"http://x/undo\", timeout: 1h}\n",
			want: f + `tools[0] "a": compensate.timeout: 1h must be more than 0 and at most 5m0s`},
		{name: "compensatable without compensate", yaml: "tools:\n  - name: a\n    reversibility: COMPENSATABLE\n    execute: {url: \"http://x\"}\n",
			want: f + `tools[0] "a": compensate.url is missing: a COMPENSATABLE tool is undone by calling it`},
		{name: "reversible without compensate", yaml: "tools:\n  - name: a\n    reversibility: REVERSIBLE\n    execute: {url: \"http://x\"}\n",
			want: f + `tools[0] "a": compensate.url is missing: a REVERSIBLE tool`},
		{name: "default reversibility without compensate", yaml: "tools:\n  - name: a\n    execute: {url: \"http://x\"}\n",
			want: f + `tools[0] "a": compensate.url is missing: a COMPENSATABLE tool`},
		{name: "compensate block without url", yaml: "tools:\n  - name: a\n    execute: {url: \"http://x\"}\n    compensate: {timeout: 5s}\n",
			want: f + `tools[0] "a": compensate.url is missing`},
		{name: "irreversible with compensate", yaml: "tools:" + wireTool + "    compensate: {url: \"http://127.0.0.1:9000/unwire\"}\n",
			want: f + `tools[0] "sendWireTransfer": an IRREVERSIBLE tool has no undo, so it cannot have a compensate block`},
		{name: "irreversible with empty compensate", yaml: "tools:" + wireTool + "    compensate: {}\n", want: f + `tools[0] "sendWireTransfer": an IRREVERSIBLE tool has no undo`},
		{name: "upstream without a name", yaml: "upstreams: [{url: \"http://x/mcp\"}]\n", want: f + `upstreams[0]: name is missing`},
		{name: "upstream twice", yaml: "upstreams: [{name: a, url: \"http://x/mcp\"}, {name: a, url: \"http://y/mcp\"}]\n",
			want: f + `upstreams[1] "a": name is already used by upstreams[0]`},
		{name: "upstream with url and command", yaml: "upstreams: [{name: a, url: \"http://x/mcp\", command: [srv]}]\n",
			want: f + `upstreams[0] "a": give either url (an MCP server's streamable HTTP endpoint) or command`},
		{name: "upstream with neither", yaml: "upstreams: [{name: a}]\n", want: f + `upstreams[0] "a": give either url`},
		{name: "upstream url not http", yaml: "upstreams: [{name: a, url: \"ftp://x/mcp\"}]\n", want: f + `upstreams[0] "a": url: ftp://x/mcp is not an http or https URL`},
		{name: "upstream command empty", yaml: "upstreams: [{name: a, command: [\"\"]}]\n", want: f + `upstreams[0] "a": command: the program's name is empty`},
		{name: "upstream env bad", yaml: "upstreams: [{name: a, command: [srv], env: {\"A=B\": c}}]\n", want: f + `upstreams[0] "a": env: "A=B" is not a variable name`},
		{name: "upstream timeout bad", yaml: "upstreams: [{name: a, command: [srv], timeout: 6m}]\n", want: f + `upstreams[0] "a": timeout: "6m" must be a duration`},
		{name: "upstream default bad", yaml: "upstreams: [{name: a, command: [srv], default: MAYBE}]\n", want: f + `upstreams[0] "a": default: reversibility "MAYBE" is not one of`},
		{name: "upstream tool readOnly and reversibility", yaml: "upstreams: [{name: a, command: [srv], tools: {t: {readOnly: true, reversibility: REVERSIBLE}}}]\n",
			want: f + `upstreams[0] "a": tools["t"]: a readOnly tool runs at once and has nothing to undo; remove its reversibility`},
		{name: "upstream tool readOnly with undo", yaml: "upstreams: [{name: a, command: [srv], tools: {t: {readOnly: true, compensate: {tool: u}}}}]\n",
			want: f + `upstreams[0] "a": tools["t"]: a readOnly tool has nothing to undo`},
		{name: "upstream irreversible with undo", yaml: "upstreams: [{name: a, command: [srv], tools: {t: {reversibility: IRREVERSIBLE, compensate: {tool: u}}}}]\n",
			want: f + `upstreams[0] "a": tools["t"]: an IRREVERSIBLE tool has no undo`},
		{name: "upstream undo without tool", yaml: "upstreams: [{name: a, command: [srv], tools: {t: {reversibility: COMPENSATABLE, compensate: {arguments: input}}}}]\n",
			want: f + `upstreams[0] "a": tools["t"]: compensate.tool is missing`},
		{name: "upstream undo arguments bad", yaml: "upstreams: [{name: a, command: [srv], tools: {t: {reversibility: COMPENSATABLE, compensate: {tool: u, arguments: both}}}}]\n",
			want: f + `upstreams[0] "a": tools["t"]: compensate.arguments: "both" is not input`},
		{name: "upstream key unknown", yaml: "upstreams: [{name: a, command: [srv], headers: {}}]\n", want: f + `line 1: unknown key "headers"`},
		{name: "tools without signing secret", vars: map[string]string{"SAGACITY_TOOL_SIGNING_SECRET": ""}, yaml: "tools:" + wireTool,
			want: "SAGACITY_TOOL_SIGNING_SECRET: required when SAGACITY_CONFIG declares HTTP tools (at least 32 bytes)"},

		// Tokens.
		{name: "token without name", yaml: "tokens:\n  - sha256: " + hashA + "\n    roles: [agent]\n", want: f + "tokens[0]: name is missing"},
		{name: "token name control character", yaml: "tokens:\n  - name: \"a\\nb\"\n", want: f + "tokens[0]: name contains control characters"},
		{name: "token name twice", yaml: "tokens:\n  - {name: a, sha256: " + hashA + ", roles: [agent]}\n  - {name: a, sha256: " + strings.Repeat("0", 64) + ", roles: [agent]}\n",
			want: f + `tokens[1] "a": name is already used by tokens[0]`},
		{name: "token without sha256", yaml: "tokens:\n  - {name: a, roles: [agent]}\n", want: f + `tokens[0] "a": sha256 is missing`},
		{name: "token sha256 short", yaml: "tokens:\n  - {name: a, sha256: " + hashA[:63] + ", roles: [agent]}\n",
			want: f + `tokens[0] "a": sha256 must be 64 hex characters, the SHA-256 of the token (not the token itself)`},
		{name: "token sha256 not hex", yaml: "tokens:\n  - {name: a, sha256: " + strings.Repeat("g", 64) + ", roles: [agent]}\n", want: f + `tokens[0] "a": sha256 must be 64 hex characters`},
		{name: "token itself in sha256", yaml: "tokens:\n  - {name: a, sha256: raw-api-token-pasted, roles: [agent]}\n",
			want: f + `tokens[0] "a": sha256 must be 64 hex characters`, secrets: []string{"raw-api-token-pasted"}},
		{name: "token sha256 twice", yaml: "tokens:\n  - {name: a, sha256: " + hashA + ", roles: [agent]}\n  - {name: b, sha256: " + strings.ToUpper(hashA) + ", roles: [agent]}\n",
			want: f + `tokens[1] "b": sha256 is the same as tokens[0] "a"'s`},
		{name: "token without roles", yaml: "tokens:\n  - {name: a, sha256: " + hashA + "}\n", want: f + `tokens[0] "a": roles is missing; give at least one of agent, approver, auditor`},
		{name: "token empty roles", yaml: "tokens:\n  - {name: a, sha256: " + hashA + ", roles: []}\n", want: f + `tokens[0] "a": roles is missing`},
		{name: "token unknown role", yaml: "tokens:\n  - {name: a, sha256: " + hashA + ", roles: [agent, admin]}\n",
			want: f + `tokens[0] "a": role "admin" is not one of agent, approver, auditor`},

		// Roles.
		{name: "roles map unknown role", yaml: "roles:\n  map:\n    auditors: [auditor]\n    ops: [superuser]\n",
			want: f + `roles.map["ops"]: role "superuser" is not one of agent, approver, auditor`},
		{name: "roles map no roles", yaml: "roles:\n  map:\n    ops: []\n", want: f + `roles.map["ops"]: roles is missing`},
		{name: "roles map empty claim value", yaml: "roles:\n  map:\n    \"\": [agent]\n", want: f + "roles.map: a claim value is empty"},

		// Policy.
		{name: "max body too small", yaml: "policy: {maxBody: 1023}\n", want: f + "policy.maxBody: 1023 is out of range: must be between 1KiB and 64MiB"},
		{name: "max body too big", yaml: "policy: {maxBody: 65MiB}\n", want: f + "policy.maxBody: 65MiB is out of range"},
		{name: "max body zero", yaml: "policy: {maxBody: 0}\n", want: f + "policy.maxBody: 0 is out of range"},
		{name: "max body negative", yaml: "policy: {maxBody: -1KiB}\n", want: f + "policy.maxBody: -1KiB is out of range"},
		{name: "max body would overflow", yaml: "policy: {maxBody: 9223372036854775807MiB}\n", want: f + "policy.maxBody: 9223372036854775807MiB is out of range"},
		{name: "max body decimal unit", yaml: "policy: {maxBody: 2MB}\n",
			want: f + `policy.maxBody: "2MB" is not a size; give a number of bytes, or a number with KiB or MiB like 512KiB`},
		{name: "max body fraction", yaml: "policy: {maxBody: 1.5MiB}\n", want: f + `policy.maxBody: "1.5MiB" is not a size`},
		{name: "max result unparsable", yaml: "policy: {maxResult: lots}\n", want: f + `policy.maxResult: "lots" is not a size`},
		{name: "max result too big", yaml: "policy: {maxResult: 67108865}\n", want: f + "policy.maxResult: 67108865 is out of range"},
	}
}

// loadCase runs Load for tc and returns, with {dir} and {path}
// expanded, the want, the environment it used and Load's error.
func loadCase(t *testing.T, tc errorCase) (want string, vars map[string]string, err error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "sagacity.yaml")
	expand := strings.NewReplacer("{dir}", dir, "{path}", path).Replace
	vars = map[string]string{}
	for k, v := range secretVars {
		vars[k] = v
	}
	if tc.yaml != "" {
		if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		vars["SAGACITY_CONFIG"] = path
	}
	for k, v := range tc.vars {
		vars[k] = expand(v)
	}
	c, err := Load(env(vars))
	if err == nil {
		t.Fatalf("Load(%v) with file %q = %+v, nil; want an error containing %q", vars, tc.yaml, c, expand(tc.want))
	}
	if diff := cmp.Diff(Config{}, c); diff != "" {
		t.Errorf("Load(%v) with file %q returned a Config with its error (-want +got):\n%s", vars, tc.yaml, diff)
	}
	return expand(tc.want), vars, err
}

// approverTokens declares an agent and two approvers, with the tools they
// call (for tokens mode).
const approverTokens = "tools:" + wireTool + `tokens:
  - {name: bot, sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, roles: [agent]}
  - {name: alice, sha256: 60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752, roles: [approver]}
  - {name: bob, sha256: fd61a03af4f77d870fc21e05e7e80678095c92d808cfb3b5c279ee04c74aca13, roles: [approver, auditor]}
`

func TestLoadErrors(t *testing.T) {
	for _, tc := range errorCases() {
		t.Run(tc.name, func(t *testing.T) {
			want, vars, err := loadCase(t, tc)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Load(%v) with file %q:\n got error %q\nwant it to contain %q", vars, tc.yaml, err, want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("Load(%v) with file %q: error %q has more than one line", vars, tc.yaml, err)
			}
		})
	}
}

func TestLoadErrorsHideSecrets(t *testing.T) {
	for _, tc := range errorCases() {
		t.Run(tc.name, func(t *testing.T) {
			_, vars, err := loadCase(t, tc)
			secrets := append([]string{dbPassword}, tc.secrets...)
			for _, name := range secretNames {
				if v := vars[name]; v != "" {
					secrets = append(secrets, v)
				}
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("Load(%v) with file %q: error %q contains the secret %q", vars, tc.yaml, err, s)
				}
			}
		})
	}
}

// TestSigningKeyFile: SAGACITY_SIGNING_KEY_FILE takes a file holding the
// signing key alone, as sagacity keygen -out writes it, and refuses any
// other (what keygen prints without -out among them), naming the
// variable and the file and saying how to make one, never quoting it.
func TestSigningKeyFile(t *testing.T) {
	const publicKey = "sagacity.test+0ac935d1+AdKiK3O/PLawPqlsHMQqYEF4kxMdCZBsYA/WsTU00r1J"
	const keygen = "PRIVATE+KEY+sagacity.test+0ac935d1+AU3NVAlT3pyzHaFV+snyiE6Quwj1snkIcuvyA9StxjF2\n\n" +
		"# The line above is the signing key: …\n" + publicKey + "\n"
	const fix = "it must hold the PRIVATE+KEY+… line alone, as sagacity keygen -out FILE writes it"
	for _, tc := range []struct {
		name, content string
		want          string // the error; "" for the key
	}{
		{"the key", receiptKey + "\n", ""},
		{"the key with blank lines and spaces around", "\n  " + receiptKey + " \r\n\n", ""},
		{"keygen's output without -out", keygen, "SAGACITY_SIGNING_KEY_FILE ({path}): holds 4 lines, not a signing key alone; " + fix},
		{"the key and a comment", "# production key\n" + receiptKey + "\n", "SAGACITY_SIGNING_KEY_FILE ({path}): holds 2 lines, not a signing key alone; " + fix},
		{"the public key", publicKey + "\n", "SAGACITY_SIGNING_KEY_FILE ({path}): not a signing key: want PRIVATE+KEY+<name>+<hash>+<key>, as sagacity keygen prints"},
		{"a key cut short", receiptKey[:len(receiptKey)-4] + "\n", "SAGACITY_SIGNING_KEY_FILE ({path}): not a signing key"},
		{"empty", "\n", "SAGACITY_SIGNING_KEY_FILE: {path} is empty; " + fix},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "signing.key")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tc.want, "{path}", path)
			c, err := Load(env(map[string]string{"SAGACITY_SIGNING_KEY_FILE": path}))
			switch {
			case want == "" && (err != nil || c.SigningKey != receiptKey):
				t.Errorf("Load(SAGACITY_SIGNING_KEY_FILE=%s holding %q) = %q, %v; want the key", path, tc.content, c.SigningKey, err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("Load(SAGACITY_SIGNING_KEY_FILE=%s holding %q) = %v; want an error containing %q", path, tc.content, err, want)
			case err != nil && strings.Contains(err.Error(), "AU3NVAlT3pyzHaFV"):
				t.Errorf("Load(SAGACITY_SIGNING_KEY_FILE=%s) = %v: the error quotes the key", path, err)
			}
		})
	}
	// The same output pasted into SAGACITY_SIGNING_KEY is refused too,
	// naming that variable.
	_, err := Load(env(map[string]string{"SAGACITY_SIGNING_KEY": keygen}))
	if want := "SAGACITY_SIGNING_KEY: holds 4 lines, not a signing key alone; give the PRIVATE+KEY+… line alone"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load(SAGACITY_SIGNING_KEY=keygen's whole output) = %v; want an error containing %q", err, want)
	}
}

// compiled is the hash of the approval policy spec compiles to.
func compiled(t *testing.T, spec engine.PolicySpec) string {
	a, err := engine.CompilePolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	return a.Hash
}
