package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/tlog"
)

// File is what the YAML file named by SAGACITY_CONFIG declares.
type File struct {
	Tools     []Tool     // HTTP tools, in file order
	Upstreams []Upstream // MCP servers whose tools are served behind the gate
	Tokens    []Token    // API bearer tokens
	Roles     Roles      // how OIDC claims map to roles
	Policy    Policy     // size limits
	Log       Log        // when checkpoints of the global log are signed
	// Approvals is the approval policy: which rule applies to each
	// request of an IRREVERSIBLE tool (engine.DefaultPolicy without an
	// approval: section).
	Approvals *engine.Approvals
}

// Log says when the server signs a checkpoint of the global log: after
// Every new entries or Interval, whichever comes first; and how often it
// checks the database against the newest checkpoint, from the tree's
// nodes (CheckEvery) and from every entry (FullCheckEvery).
type Log struct {
	Every          int64         // default 1000, at least 1
	Interval       time.Duration // default 10s, at least 100ms, at most 1h
	CheckEvery     time.Duration // default 30s, at least 100ms, at most 1h
	FullCheckEvery time.Duration // default 10m, at least 1s, at most 24h
}

// Tool is an HTTP tool: Execute runs it, Compensate undoes it.
type Tool struct {
	Name          string
	Reversibility engine.Reversibility // COMPENSATABLE when the file says nothing
	Execute       Endpoint
	Compensate    *Endpoint // nil for an IRREVERSIBLE tool, set for every other
	// Description and InputSchema tell agents what the tool does and
	// what input it takes (a JSON Schema of an object, as JSON; none when
	// empty); every input is checked against the schema.
	Description string
	InputSchema json.RawMessage
}

// Upstream is an MCP server whose tools Sagacity lists as its own and runs
// through the engine: journaled, gated and compensated. Exactly one of URL
// and Command is set.
type Upstream struct {
	Name    string            // unique; names the upstream in messages
	URL     string            // a streamable HTTP endpoint, or
	Command []string          // a program and its arguments, spoken to over stdio
	Env     map[string]string // the program's environment besides PATH
	Timeout time.Duration     // for each call, default 30s, at most 5m
	Prefix  string            // put before each tool's name, to keep names apart
	// Default is the reversibility of every tool Tools does not name:
	// IRREVERSIBLE when the file says nothing, so a tool the upstream
	// adds later waits for a person.
	Default engine.Reversibility
	Tools   map[string]UpstreamTool // by the upstream's tool name
}

// UpstreamTool is how one upstream tool runs.
type UpstreamTool struct {
	// Reversibility is the tool's; the upstream's default when empty.
	Reversibility engine.Reversibility
	// ReadOnly marks a tool with no effect: it runs at once, and undoing
	// it does nothing.
	ReadOnly bool
	// Compensate undoes the tool; every tool that runs at once and is not
	// read-only has one.
	Compensate *UpstreamUndo
}

// UpstreamUndo is the upstream tool that undoes another, and what it is
// given: the call's own arguments ("input") or its result, a JSON object
// ("result").
type UpstreamUndo struct {
	Tool      string
	Arguments string // "input" (the default) or "result"
}

// Endpoint is where an HTTP tool is called.
type Endpoint struct {
	URL     string        // absolute http or https URL with a host
	Timeout time.Duration // default 10s, at most 5m
}

// Token is an API bearer token. Only its hash is configured, so the file
// holds nothing that would let its reader call the API.
type Token struct {
	Name   string        // unique; names the principal
	SHA256 string        // hex SHA-256 of the token, lowercase
	Roles  []engine.Role // at least one
}

// Roles maps the values of an OIDC claim to roles.
type Roles struct {
	Claim string                   // the claim holding group names, default "groups"
	Map   map[string][]engine.Role // claim value → roles
}

// Policy holds size limits, in bytes, and who may act on whose sagas.
type Policy struct {
	MaxBodyBytes   int64 // largest request body accepted, default 1 MiB
	MaxResultBytes int64 // largest HTTP tool response body read, default 1 MiB
	// ShareSagas lets every agent call tools in, end, abort and resume
	// every saga; by default only the saga's initiator may.
	ShareSagas bool
}

// Limits for the file's values.
const (
	defaultTimeout = 10 * time.Second
	// defaultUpstreamTimeout is longer: an MCP tool is often slower
	// than a plain HTTP endpoint.
	defaultUpstreamTimeout = 30 * time.Second
	maxTimeout             = 5 * time.Minute
	defaultSize            = 1 << 20
	minSize                = 1 << 10
	maxSize                = 64 << 20
	defaultClaim           = "groups"

	defaultCheckpointEvery    = 1000
	defaultCheckpointInterval = 10 * time.Second
	minCheckpointInterval     = 100 * time.Millisecond
	maxCheckpointInterval     = time.Hour
)

func defaultFile() File {
	return File{
		Roles:  Roles{Claim: defaultClaim},
		Policy: Policy{MaxBodyBytes: defaultSize, MaxResultBytes: defaultSize},
		Log: Log{Every: defaultCheckpointEvery, Interval: defaultCheckpointInterval, CheckEvery: tlog.CheckEvery,
			FullCheckEvery: tlog.FullCheckEvery},
	}
}

// The file's shape. Durations and sizes are read as text and parsed here,
// so that 0s can be told from an absent value and a bad value is reported
// with its place in the file.
type yamlFile struct {
	Tools     []yamlTool     `yaml:"tools"`
	Upstreams []yamlUpstream `yaml:"upstreams"`
	Tokens    []yamlToken    `yaml:"tokens"`
	Roles     yamlRoles      `yaml:"roles"`
	Policy    yamlPolicy     `yaml:"policy"`
	Log       yamlLog        `yaml:"log"`
	Approval  yamlApproval   `yaml:"approval"`
}

// yamlApproval is the approval policy. Without default, tools without
// rules of their own go by engine.DefaultPolicy's; default: [] refuses
// their requests.
type yamlApproval struct {
	Default *[]yamlRule           `yaml:"default"`
	Tools   map[string][]yamlRule `yaml:"tools"`
}

type yamlRule struct {
	Name      string   `yaml:"name"`
	When      string   `yaml:"when"`
	Approvers []string `yaml:"approvers"`
	Quorum    int      `yaml:"quorum"`
}

type yamlUpstream struct {
	Name    string                      `yaml:"name"`
	URL     string                      `yaml:"url"`
	Command []string                    `yaml:"command"`
	Env     map[string]string           `yaml:"env"`
	Timeout string                      `yaml:"timeout"`
	Prefix  string                      `yaml:"prefix"`
	Default string                      `yaml:"default"`
	Tools   map[string]yamlUpstreamTool `yaml:"tools"`
}

type yamlUpstreamTool struct {
	Reversibility string `yaml:"reversibility"`
	ReadOnly      bool   `yaml:"readOnly"`
	Compensate    *struct {
		Tool      string `yaml:"tool"`
		Arguments string `yaml:"arguments"`
	} `yaml:"compensate"`
}

type yamlLog struct {
	CheckpointEvery    string `yaml:"checkpointEvery"`
	CheckpointInterval string `yaml:"checkpointInterval"`
	CheckEvery         string `yaml:"checkEvery"`
	FullCheckEvery     string `yaml:"fullCheckEvery"`
}

type yamlTool struct {
	Name          string         `yaml:"name"`
	Reversibility string         `yaml:"reversibility"`
	Description   string         `yaml:"description"`
	InputSchema   map[string]any `yaml:"inputSchema"`
	Execute       yamlEndpoint   `yaml:"execute"`
	Compensate    *yamlEndpoint  `yaml:"compensate"`
}

type yamlEndpoint struct {
	URL     string `yaml:"url"`
	Timeout string `yaml:"timeout"`
}

type yamlToken struct {
	Name   string   `yaml:"name"`
	SHA256 string   `yaml:"sha256"`
	Roles  []string `yaml:"roles"`
}

type yamlRoles struct {
	Claim string              `yaml:"claim"`
	Map   map[string][]string `yaml:"map"`
}

type yamlPolicy struct {
	MaxBody    string `yaml:"maxBody"`
	MaxResult  string `yaml:"maxResult"`
	ShareSagas bool   `yaml:"shareSagas"`
}

// ReadFile reads and checks the configuration file at path. Every error starts with
// "SAGACITY_CONFIG (<path>): ".
func ReadFile(path string) (File, error) {
	prefix := "SAGACITY_CONFIG (" + path + "): "
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the prefix already
		}
		return File{}, fmt.Errorf("%scannot read: %w", prefix, err)
	}
	return parseFile(prefix, data)
}

// parseFile reads and checks a file's contents; every error starts with
// prefix.
func parseFile(prefix string, data []byte) (File, error) {
	var y yamlFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&y); err != nil && err != io.EOF {
		return File{}, errors.New(prefix + yamlProblem(err))
	}
	// A second document would be silently ignored; say so instead.
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return File{}, errors.New(prefix + "holds more than one YAML document; remove the second ---")
	}
	f, err := y.check()
	if err != nil {
		return File{}, errors.New(prefix + err.Error())
	}
	return f, nil
}

var (
	unknownField = regexp.MustCompile(`^line (\d+): field (.+) not found in type \S+$`)
	wrongType    = regexp.MustCompile(`(?s)^line (\d+): cannot unmarshal !!(\w+)(?: .*)? into (.+)$`)
)

// yamlProblem rewrites yaml's errors, which name Go types, in the file's
// terms, on one line.
func yamlProblem(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return oneLine(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if s := unknownField.FindStringSubmatch(m); s != nil {
			m = fmt.Sprintf("line %s: unknown key %q", s[1], s[2])
		} else if s := wrongType.FindStringSubmatch(m); s != nil {
			m = fmt.Sprintf("line %s: expected %s, found %s", s[1], goKind(s[3]), yamlKind(s[2]))
		}
		msgs[i] = oneLine(m)
	}
	return strings.Join(msgs, "; ")
}

// oneLine keeps a message on one line: the file's text it may quote can
// hold line breaks.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", `\n`) }

func goKind(typ string) string {
	switch {
	case strings.HasPrefix(typ, "[]"):
		return "a list"
	case strings.HasPrefix(typ, "map["), strings.HasPrefix(typ, "config."), strings.HasPrefix(typ, "*config."):
		return "a mapping"
	}
	return "a single value"
}

func yamlKind(tag string) string {
	switch tag {
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	}
	return "a single value"
}

func (y yamlFile) check() (File, error) {
	f := defaultFile()
	var err error
	if f.Tools, err = checkTools(y.Tools); err != nil {
		return File{}, err
	}
	if f.Upstreams, err = checkUpstreams(y.Upstreams); err != nil {
		return File{}, err
	}
	if f.Tokens, err = checkTokens(y.Tokens); err != nil {
		return File{}, err
	}
	if f.Roles, err = checkRoles(y.Roles); err != nil {
		return File{}, err
	}
	if f.Policy.MaxBodyBytes, err = size("policy.maxBody", y.Policy.MaxBody); err != nil {
		return File{}, err
	}
	if f.Policy.MaxResultBytes, err = size("policy.maxResult", y.Policy.MaxResult); err != nil {
		return File{}, err
	}
	f.Policy.ShareSagas = y.Policy.ShareSagas
	if f.Approvals, err = checkApproval(y.Approval); err != nil {
		return File{}, err
	}
	if v := y.Log.CheckpointEvery; v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return File{}, fmt.Errorf("log.checkpointEvery: %q is not a number of entries, at least 1", v)
		}
		f.Log.Every = n
	}
	for _, d := range []struct {
		key    string
		v      string
		lo, hi time.Duration
		into   *time.Duration
	}{
		{"log.checkpointInterval", y.Log.CheckpointInterval, minCheckpointInterval, maxCheckpointInterval, &f.Log.Interval},
		{"log.checkEvery", y.Log.CheckEvery, 100 * time.Millisecond, time.Hour, &f.Log.CheckEvery},
		{"log.fullCheckEvery", y.Log.FullCheckEvery, time.Second, 24 * time.Hour, &f.Log.FullCheckEvery},
	} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil {
			return File{}, fmt.Errorf("%s: %q is not a duration like 10s or 1m", d.key, d.v)
		}
		if v < d.lo || v > d.hi {
			return File{}, fmt.Errorf("%s: %s must be at least %s and at most %s", d.key, d.v, d.lo, d.hi)
		}
		*d.into = v
	}
	return f, nil
}

func checkTools(ys []yamlTool) ([]Tool, error) {
	var tools []Tool
	seen := map[string]int{}
	for i, y := range ys {
		where := fmt.Sprintf("tools[%d]", i)
		if err := checkName(y.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		where += fmt.Sprintf(" %q", y.Name)
		if y.Name == engine.GateTool {
			return nil, fmt.Errorf("%s: name is reserved for approval decisions in the journal", where)
		}
		if j, dup := seen[y.Name]; dup {
			return nil, fmt.Errorf("%s: name is already used by tools[%d]", where, j)
		}
		seen[y.Name] = i
		r, err := engine.ParseReversibility(y.Reversibility)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		t := Tool{Name: y.Name, Reversibility: r, Description: y.Description}
		if t.InputSchema, err = checkSchema(y.Name, y.InputSchema); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if t.Execute, err = checkEndpoint("execute", y.Execute); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		switch {
		case r == engine.Irreversible && y.Compensate != nil:
			return nil, fmt.Errorf("%s: an IRREVERSIBLE tool has no undo, so it cannot have a compensate block; remove it or change the reversibility", where)
		case r != engine.Irreversible && (y.Compensate == nil || y.Compensate.URL == ""):
			return nil, fmt.Errorf("%s: compensate.url is missing: a %s tool is undone by calling it when the saga fails", where, r)
		case y.Compensate != nil:
			c, err := checkEndpoint("compensate", *y.Compensate)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			t.Compensate = &c
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// checkSchema turns a tool's inputSchema into JSON and checks it as the
// engine will: a JSON Schema of an object (a tool's input, as an MCP
// client sends it, is one).
func checkSchema(tool string, y map[string]any) (json.RawMessage, error) {
	if y == nil {
		return nil, nil
	}
	if y["type"] != "object" {
		return nil, errors.New(`inputSchema: its type must be "object": a tool's input is a JSON object`)
	}
	raw, err := json.Marshal(y)
	if err != nil {
		return nil, fmt.Errorf("inputSchema: %v", err)
	}
	if err := engine.CheckInputSchema(tool, raw); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("tool %q: ", tool)))
	}
	return raw, nil
}

func checkUpstreams(ys []yamlUpstream) ([]Upstream, error) {
	var ups []Upstream
	seen := map[string]int{}
	for i, y := range ys {
		where := fmt.Sprintf("upstreams[%d]", i)
		if err := checkName(y.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		where += fmt.Sprintf(" %q", y.Name)
		if j, dup := seen[y.Name]; dup {
			return nil, fmt.Errorf("%s: name is already used by upstreams[%d]", where, j)
		}
		seen[y.Name] = i
		u, err := checkUpstream(y)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		ups = append(ups, u)
	}
	return ups, nil
}

func checkUpstream(y yamlUpstream) (Upstream, error) {
	u := Upstream{Name: y.Name, URL: y.URL, Command: y.Command, Env: y.Env, Timeout: defaultUpstreamTimeout,
		Prefix: y.Prefix, Default: engine.Irreversible, Tools: map[string]UpstreamTool{}}
	switch {
	case (y.URL == "") == (len(y.Command) == 0):
		return Upstream{}, errors.New("give either url (an MCP server's streamable HTTP endpoint) or command (a program spoken to over stdio), not both")
	case y.URL != "":
		if _, err := parseHTTPURL(y.URL); err != nil {
			return Upstream{}, fmt.Errorf("url: %w", err)
		}
	case y.Command[0] == "":
		return Upstream{}, errors.New("command: the program's name is empty")
	}
	for k := range y.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return Upstream{}, fmt.Errorf("env: %q is not a variable name", k)
		}
	}
	if y.Timeout != "" {
		d, err := time.ParseDuration(y.Timeout)
		if err != nil || d <= 0 || d > maxTimeout {
			return Upstream{}, fmt.Errorf("timeout: %q must be a duration like 30s, more than 0 and at most %s", y.Timeout, maxTimeout)
		}
		u.Timeout = d
	}
	if y.Prefix != "" {
		if err := checkName(y.Prefix); err != nil {
			return Upstream{}, fmt.Errorf("prefix: %w", err)
		}
	}
	if y.Default != "" {
		r, err := engine.ParseReversibility(y.Default)
		if err != nil {
			return Upstream{}, fmt.Errorf("default: %w", err)
		}
		u.Default = r
	}
	// Sorted, so that the same file always reports the same problem.
	for _, name := range slices.Sorted(maps.Keys(y.Tools)) {
		t, err := checkUpstreamTool(y.Tools[name])
		if err != nil {
			return Upstream{}, fmt.Errorf("tools[%q]: %w", name, err)
		}
		u.Tools[name] = t
	}
	return u, nil
}

func checkUpstreamTool(y yamlUpstreamTool) (UpstreamTool, error) {
	var t UpstreamTool
	if y.Reversibility != "" {
		r, err := engine.ParseReversibility(y.Reversibility)
		if err != nil {
			return t, err
		}
		t.Reversibility = r
	}
	t.ReadOnly = y.ReadOnly
	switch {
	case y.ReadOnly && y.Reversibility != "":
		return t, errors.New("a readOnly tool runs at once and has nothing to undo; remove its reversibility")
	case y.ReadOnly && y.Compensate != nil:
		return t, errors.New("a readOnly tool has nothing to undo; remove its compensate block")
	case t.Reversibility == engine.Irreversible && y.Compensate != nil:
		return t, errors.New("an IRREVERSIBLE tool has no undo, so it cannot have a compensate block; remove it or change the reversibility")
	case y.Compensate == nil:
		return t, nil
	}
	t.Compensate = &UpstreamUndo{Tool: y.Compensate.Tool, Arguments: or(y.Compensate.Arguments, "input")}
	if t.Compensate.Tool == "" {
		return t, errors.New("compensate.tool is missing: the upstream tool that undoes this one")
	}
	if a := t.Compensate.Arguments; a != "input" && a != "result" {
		return t, fmt.Errorf("compensate.arguments: %q is not input (the call's own arguments) or result (its result, a JSON object)", a)
	}
	return t, nil
}

// Resolve is how the upstream's tool name runs: its reversibility, and
// whether it is read-only (which runs at once with nothing to undo).
// Whether a tool that runs at once has its undo is the caller's to check,
// once the upstream's tools are known.
func (u Upstream) Resolve(name string) (engine.Reversibility, UpstreamTool) {
	t, ok := u.Tools[name]
	switch {
	case !ok:
		return u.Default, UpstreamTool{Reversibility: u.Default}
	case t.ReadOnly:
		return engine.Reversible, t
	case t.Reversibility == "":
		return u.Default, t
	}
	return t.Reversibility, t
}

func checkEndpoint(field string, y yamlEndpoint) (Endpoint, error) {
	if y.URL == "" {
		return Endpoint{}, fmt.Errorf("%s.url is missing", field)
	}
	if _, err := parseHTTPURL(y.URL); err != nil {
		return Endpoint{}, fmt.Errorf("%s.url: %w", field, err)
	}
	e := Endpoint{URL: y.URL, Timeout: defaultTimeout}
	if y.Timeout != "" {
		d, err := time.ParseDuration(y.Timeout)
		if err != nil {
			return Endpoint{}, fmt.Errorf("%s.timeout: %q is not a duration like 10s or 1m30s", field, y.Timeout)
		}
		if d <= 0 || d > maxTimeout {
			return Endpoint{}, fmt.Errorf("%s.timeout: %s must be more than 0 and at most %s", field, y.Timeout, maxTimeout)
		}
		e.Timeout = d
	}
	return e, nil
}

func checkTokens(ys []yamlToken) ([]Token, error) {
	var tokens []Token
	names, hashes := map[string]int{}, map[string]int{}
	for i, y := range ys {
		where := fmt.Sprintf("tokens[%d]", i)
		if err := checkName(y.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		where += fmt.Sprintf(" %q", y.Name)
		if j, dup := names[y.Name]; dup {
			return nil, fmt.Errorf("%s: name is already used by tokens[%d]", where, j)
		}
		names[y.Name] = i
		// The value is not repeated: it may be a token pasted in by mistake.
		h := strings.ToLower(y.SHA256)
		switch {
		case h == "":
			return nil, fmt.Errorf("%s: sha256 is missing", where)
		case !isHex(h, 64):
			return nil, fmt.Errorf("%s: sha256 must be 64 hex characters, the SHA-256 of the token (not the token itself)", where)
		}
		if j, dup := hashes[h]; dup {
			return nil, fmt.Errorf("%s: sha256 is the same as tokens[%d] %q's", where, j, ys[j].Name)
		}
		hashes[h] = i
		roles, err := checkRoleList(y.Roles)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		tokens = append(tokens, Token{Name: y.Name, SHA256: h, Roles: roles})
	}
	return tokens, nil
}

func checkRoles(y yamlRoles) (Roles, error) {
	r := Roles{Claim: or(y.Claim, defaultClaim)}
	if y.Map == nil {
		return r, nil
	}
	r.Map = make(map[string][]engine.Role, len(y.Map))
	// Sorted, so that the same file always reports the same problem.
	for _, k := range slices.Sorted(maps.Keys(y.Map)) {
		if k == "" {
			return Roles{}, errors.New(`roles.map: a claim value is empty`)
		}
		roles, err := checkRoleList(y.Map[k])
		if err != nil {
			return Roles{}, fmt.Errorf("roles.map[%q]: %w", k, err)
		}
		r.Map[k] = roles
	}
	return r, nil
}

func checkRoleList(ss []string) ([]engine.Role, error) {
	if len(ss) == 0 {
		return nil, fmt.Errorf("roles is missing; give at least one of %s", roleNames())
	}
	roles := make([]engine.Role, len(ss))
	for i, s := range ss {
		if !slices.Contains(engine.Roles, engine.Role(s)) {
			return nil, fmt.Errorf("role %q is not one of %s", s, roleNames())
		}
		roles[i] = engine.Role(s)
	}
	return roles, nil
}

func roleNames() string {
	names := make([]string, len(engine.Roles))
	for i, r := range engine.Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// checkName applies the engine's rules for tool names and principal ids,
// so that a file the config accepts does not fail later at start-up.
func checkName(s string) error {
	switch {
	case s == "":
		return errors.New("name is missing")
	case len(s) > engine.MaxIDLen:
		return fmt.Errorf("name is longer than %d bytes", engine.MaxIDLen)
	case !utf8.ValidString(s):
		return errors.New("name is not valid UTF-8")
	case strings.ContainsFunc(s, unicode.IsControl):
		return errors.New("name contains control characters")
	}
	return nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// size reads a byte count: a plain number of bytes, or a number followed by
// KiB or MiB. "" gives the default.
func size(field, s string) (int64, error) {
	if s == "" {
		return defaultSize, nil
	}
	num, unit := s, int64(1)
	for suffix, u := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			num, unit = strings.TrimSpace(n), u
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a size; give a number of bytes, or a number with KiB or MiB like 512KiB", field, s)
	}
	// Compare before multiplying, so a huge number cannot wrap around.
	if n < 1 || n > maxSize/unit || n*unit < minSize {
		return 0, fmt.Errorf("%s: %s is out of range: must be between 1KiB and 64MiB", field, s)
	}
	return n * unit, nil
}

// checkApproval compiles the approval policy; nil, the engine's default,
// without an approval: section.
func checkApproval(y yamlApproval) (*engine.Approvals, error) {
	if y.Default == nil && len(y.Tools) == 0 {
		return nil, nil
	}
	rules := func(ys []yamlRule) []engine.RuleSpec {
		out := []engine.RuleSpec{}
		for _, r := range ys {
			out = append(out, engine.RuleSpec{Name: r.Name, When: r.When, Approvers: r.Approvers, Quorum: r.Quorum})
		}
		return out
	}
	spec := engine.PolicySpec{Default: engine.DefaultPolicy.Default, Tools: map[string][]engine.RuleSpec{}}
	if y.Default != nil {
		spec.Default = rules(*y.Default)
	}
	for tool, rs := range y.Tools {
		spec.Tools[tool] = rules(rs)
	}
	a, err := engine.CompilePolicy(spec)
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	return a, nil
}
