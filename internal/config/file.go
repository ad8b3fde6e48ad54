package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
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
	// Notifications are the endpoints people are told through.
	Notifications []Notify
	MCP           MCP
}

// MCP says how the MCP gateway answers a gated call of a client that
// asked for no task: held up to HoldFor for its decision (default 0: not
// held, answered at once; at most policy.maxWait, the longest any call is
// held).
type MCP struct {
	HoldFor time.Duration
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

// Policy holds size limits, in bytes, and who may act on whose sagas.
type Policy struct {
	MaxBodyBytes   int64 // largest request body accepted, default 1 MiB
	MaxResultBytes int64 // largest HTTP tool response body read, default 1 MiB
	// ShareSagas lets every agent call tools in, end, abort and resume
	// every saga; by default only the saga's initiator may.
	ShareSagas bool
	// MaxWait bounds how long a call is held for its decision (HTTP
	// Prefer: wait, a gated MCP call without tasks): default 5m, 0 (0s)
	// holds none, at most 1h.
	MaxWait time.Duration
	// ExecutionsPerMinute is how many resumes one principal, and one
	// client address, may send a minute (default 1200): executions are
	// automation's, not a person's decisions (60 a minute).
	ExecutionsPerMinute int
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

	defaultMaxWait    = 5 * time.Minute
	maxMaxWait        = time.Hour
	defaultExecutions = 1200
	maxExecutions     = 1_000_000

	defaultCheckpointEvery    = 1000
	defaultCheckpointInterval = 10 * time.Second
	minCheckpointInterval     = 100 * time.Millisecond
	maxCheckpointInterval     = time.Hour
)

func defaultFile() File {
	return File{
		Roles:  Roles{Claim: defaultClaim},
		Policy: Policy{MaxBodyBytes: defaultSize, MaxResultBytes: defaultSize, MaxWait: defaultMaxWait, ExecutionsPerMinute: defaultExecutions},
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
	// Notifications is a list of endpoints.
	Notifications []yamlNotify `yaml:"notifications"`
	MCP           yamlMCP      `yaml:"mcp"`
}

type yamlMCP struct {
	HoldFor string `yaml:"holdFor"`
}

type yamlLog struct {
	CheckpointEvery    string `yaml:"checkpointEvery"`
	CheckpointInterval string `yaml:"checkpointInterval"`
	CheckEvery         string `yaml:"checkEvery"`
	FullCheckEvery     string `yaml:"fullCheckEvery"`
}

type yamlPolicy struct {
	MaxBody             string `yaml:"maxBody"`
	MaxResult           string `yaml:"maxResult"`
	ShareSagas          bool   `yaml:"shareSagas"`
	MaxWait             string `yaml:"maxWait"`
	ExecutionsPerMinute *int   `yaml:"executionsPerMinute"`
}

// ReadFile reads and checks the configuration file at path. Every error starts with
// "SAGACITY_CONFIG (<path>): ".
func ReadFile(path string) (File, error) { return readFile(path, nil) }

// readFile is ReadFile for a server that serves demoTools besides the
// file's (SAGACITY_DEMO), which its approval: section covers too.
func readFile(path string, demoTools []engine.Tool) (File, error) {
	prefix := "SAGACITY_CONFIG (" + path + "): "
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the prefix already
		}
		return File{}, fmt.Errorf("%scannot read: %w", prefix, err)
	}
	return parseFile(prefix, data, demoTools)
}

// ParseFile checks data as ReadFile checks the contents of the file at
// path, for a tool about to write that file. Every error starts with
// "SAGACITY_CONFIG (<path>): ".
func ParseFile(path string, data []byte) (File, error) {
	return parseFile("SAGACITY_CONFIG ("+path+"): ", data, nil)
}

// parseFile reads and checks a file's contents, for a server serving
// demoTools too; every error starts with prefix.
func parseFile(prefix string, data []byte, demoTools []engine.Tool) (File, error) {
	var y yamlFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&y); err != nil && !errors.Is(err, io.EOF) {
		return File{}, errors.New(prefix + yamlProblem(err))
	}
	// A second document would be silently ignored; say so instead.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return File{}, errors.New(prefix + "holds more than one YAML document; remove the second ---")
	}
	f, err := y.check(demoTools)
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

func (y yamlFile) check(demoTools []engine.Tool) (File, error) {
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
	if n := y.Policy.ExecutionsPerMinute; n != nil {
		if *n < 1 || *n > maxExecutions {
			return File{}, fmt.Errorf("policy.executionsPerMinute: %d must be from 1 to %d", *n, maxExecutions)
		}
		f.Policy.ExecutionsPerMinute = *n
	}
	if f.Approvals, err = checkApproval(y.Approval, gatedTools(f.Tools, f.Upstreams, demoTools)); err != nil {
		return File{}, err
	}
	if f.Notifications, err = checkNotify(y.Notifications); err != nil {
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
		{"policy.maxWait", y.Policy.MaxWait, 0, maxMaxWait, &f.Policy.MaxWait},
		{"mcp.holdFor", y.MCP.HoldFor, 0, maxMaxWait, &f.MCP.HoldFor},
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
	if f.MCP.HoldFor > f.Policy.MaxWait {
		return File{}, fmt.Errorf("mcp.holdFor: %s is longer than policy.maxWait (%s), the longest a call is held", f.MCP.HoldFor, f.Policy.MaxWait)
	}
	return f, nil
}

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
		return 0, fmt.Errorf("%s: %s is out of range: must be between 1KiB and 64MiB", field, oneLine(s))
	}
	return n * unit, nil
}
