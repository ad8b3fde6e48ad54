// Package config reads the server's settings: SAGACITY_* environment
// variables and, when SAGACITY_CONFIG names one, a YAML file declaring tools,
// API tokens, role mapping and size limits. A wrong setting stops start-up
// with a one-line error naming it; secret values never appear in errors.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sagacity-go/sagacity/internal/auth"
	"github.com/sagacity-go/sagacity/internal/demo"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/internal/notify"
)

// Config is the server's settings.
type Config struct {
	Addr              string // SAGACITY_ADDR, host:port to listen on
	DatabaseURL       string // SAGACITY_DATABASE_URL, postgres://… or sqlite:<path>
	ConfigPath        string // SAGACITY_CONFIG, the YAML file, if any
	PublicURL         string // SAGACITY_PUBLIC_URL, absolute http(s) URL without a trailing slash
	OIDCIssuer        string // SAGACITY_OIDC_ISSUER, https (http only on loopback)
	OIDCClientID      string // SAGACITY_OIDC_CLIENT_ID
	OIDCClientSecret  string // SAGACITY_OIDC_CLIENT_SECRET: a confidential client's; empty for a public client (PKCE alone)
	APIAudience       string // SAGACITY_API_AUDIENCE
	SessionKey        []byte // SAGACITY_SESSION_KEY, at least 32 bytes when set
	ToolSigningSecret []byte // SAGACITY_TOOL_SIGNING_SECRET, at least 32 bytes; required when File declares tools
	// SigningKey signs decision receipts and checkpoints: SAGACITY_SIGNING_KEY,
	// or the file SAGACITY_SIGNING_KEY_FILE names ("" in dev mode without
	// either: the server makes one).
	SigningKey string
	// CheckpointDir is where signed checkpoints of the global log are
	// kept, outside the database: SAGACITY_CHECKPOINT_DIR ("" in dev mode
	// without it: beside the database).
	CheckpointDir     string
	Auth              auth.Mode // resolved from SAGACITY_AUTH
	ApprovalEndpoints bool      // SAGACITY_APPROVAL_ENDPOINTS_ENABLED, default true
	Demo              bool      // SAGACITY_DEMO, default false
	File              File      // the YAML file; defaults only when SAGACITY_CONFIG is unset
	// Hosts are the host names requests may be addressed to, besides the
	// loopback names: SAGACITY_PUBLIC_URL's, then SAGACITY_ALLOWED_HOSTS.
	Hosts []string
	// LogLevel is SAGACITY_LOG_LEVEL: the least severe lines logged.
	LogLevel slog.Level
	// Endpoints and Targets are the notifications' endpoints, as the
	// engine routes events to them and the relay sends to them, with
	// their secrets from the environment variables the file names.
	Endpoints []engine.Endpoint
	Targets   []notify.Target
}

// Defaults for a local run: loopback, the embedded store.
const (
	DefaultAddr        = "127.0.0.1:8080"
	DefaultDatabaseURL = "sqlite:sagacity.db"
)

// minKeyLen is the shortest session key or tool signing secret, in bytes.
const minKeyLen = 32

// Load reads the SAGACITY_* variables through getenv and, when
// SAGACITY_CONFIG names a file, that file (read with os.ReadFile). It
// returns the first problem found as a one-line error that starts with the
// variable's name, or with "SAGACITY_CONFIG (<path>): " and the place in the
// file. The errors are start-up errors, not engine kinds, and never contain
// the session key, the signing secret, the client secret or the database URL.
func Load(getenv func(string) string) (Config, error) {
	c, err := load(getenv)
	if err != nil {
		return Config{}, err
	}
	return c, nil
}

func load(getenv func(string) string) (Config, error) {
	c := Config{
		Addr:             or(getenv("SAGACITY_ADDR"), DefaultAddr),
		DatabaseURL:      or(getenv("SAGACITY_DATABASE_URL"), DefaultDatabaseURL),
		ConfigPath:       getenv("SAGACITY_CONFIG"),
		OIDCIssuer:       getenv("SAGACITY_OIDC_ISSUER"),
		OIDCClientID:     getenv("SAGACITY_OIDC_CLIENT_ID"),
		OIDCClientSecret: getenv("SAGACITY_OIDC_CLIENT_SECRET"),
		APIAudience:      getenv("SAGACITY_API_AUDIENCE"),
		CheckpointDir:    getenv("SAGACITY_CHECKPOINT_DIR"),
	}
	if v := getenv("SAGACITY_LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil || strings.ContainsAny(v, "+-") {
			return c, fmt.Errorf("SAGACITY_LOG_LEVEL: %q is not one of debug, info, warn, error", v)
		}
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return c, fmt.Errorf("SAGACITY_ADDR: %q is not host:port (%s)", c.Addr, addrProblem(err))
	}
	if !hasAnyPrefix(c.DatabaseURL, "postgres://", "postgresql://", "sqlite:") {
		// The URL may hold a password, so it is not repeated.
		return c, errors.New("SAGACITY_DATABASE_URL: must start with postgres://, postgresql:// or sqlite:")
	}
	if v := getenv("SAGACITY_PUBLIC_URL"); v != "" {
		if _, err := parseBaseURL(v); err != nil {
			return c, fmt.Errorf("SAGACITY_PUBLIC_URL: %w", err)
		}
		// Paths are appended to it, so "https://x/" must not give "https://x//login".
		c.PublicURL = strings.TrimRight(v, "/")
		u, _ := url.Parse(c.PublicURL)
		c.Hosts = append(c.Hosts, strings.ToLower(u.Hostname()))
	}
	for h := range strings.SplitSeq(getenv("SAGACITY_ALLOWED_HOSTS"), ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h == "" {
			continue
		}
		if strings.ContainsAny(h, ":/ ") {
			return c, fmt.Errorf("SAGACITY_ALLOWED_HOSTS: %q is not a host name; list names such as sagacity.internal, without scheme or port", h)
		}
		c.Hosts = append(c.Hosts, h)
	}

	if c.OIDCIssuer != "" {
		if err := checkIssuer(c.OIDCIssuer); err != nil {
			return c, fmt.Errorf("SAGACITY_OIDC_ISSUER: %w", err)
		}
	}
	var err error
	if c.SessionKey, err = key(getenv, "SAGACITY_SESSION_KEY"); err != nil {
		return c, err
	}
	if c.ToolSigningSecret, err = key(getenv, "SAGACITY_TOOL_SIGNING_SECRET"); err != nil {
		return c, err
	}
	if c.SigningKey, err = signingKey(getenv); err != nil {
		return c, err
	}
	if c.ApprovalEndpoints, err = boolVar(getenv, "SAGACITY_APPROVAL_ENDPOINTS_ENABLED", true); err != nil {
		return c, err
	}
	if c.Demo, err = boolVar(getenv, "SAGACITY_DEMO", false); err != nil {
		return c, err
	}
	mode := auth.Mode(getenv("SAGACITY_AUTH"))
	switch mode {
	case "", auth.ModeOIDC, auth.ModeTokens, auth.ModeDev:
	default:
		return c, fmt.Errorf("SAGACITY_AUTH: %q is not one of oidc, tokens, dev", mode)
	}

	c.File = defaultFile()
	if c.ConfigPath != "" {
		var demoTools []engine.Tool
		if c.Demo {
			demoTools = demo.Tools(nil, nil) // their names and kinds, never run
		}
		if c.File, err = readFile(c.ConfigPath, demoTools); err != nil {
			return c, err
		}
	}
	host := "localhost"
	if u, err := url.Parse(c.PublicURL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	if c.Endpoints, c.Targets, err = Notifications(c.File.Notifications, getenv, host); err != nil {
		return c, fmt.Errorf("SAGACITY_CONFIG (%s): %w", c.ConfigPath, err)
	}
	if slices.ContainsFunc(c.File.Tools, func(t Tool) bool { return t.Hook == "" }) && c.ToolSigningSecret == nil {
		return c, fmt.Errorf("SAGACITY_TOOL_SIGNING_SECRET: required when SAGACITY_CONFIG declares HTTP tools (at least %d bytes)", minKeyLen)
	}
	if c.Auth, err = c.resolveAuth(mode); err != nil {
		return c, err
	}
	if a := c.File.Approvals; a != nil && c.Auth != auth.ModeDev {
		if err := engine.RequireMinWindow(a); err != nil {
			return c, fmt.Errorf("SAGACITY_CONFIG (%s): approval: %w; windows shorter than %s are for trying the clocks in dev mode "+
				"(SAGACITY_AUTH=dev), down to %s", c.ConfigPath, err, engine.MinWindow, engine.MinDevWindow)
		}
	}
	if c.SigningKey == "" && c.Auth != auth.ModeDev {
		return c, errors.New("SAGACITY_SIGNING_KEY: required unless SAGACITY_AUTH=dev: it signs the receipt of every decision and the log's checkpoints (sagacity keygen makes one; or set SAGACITY_SIGNING_KEY_FILE)")
	}
	if c.CheckpointDir == "" && c.Auth != auth.ModeDev {
		return c, errors.New("SAGACITY_CHECKPOINT_DIR: required unless SAGACITY_AUTH=dev: the log's signed checkpoints are kept there, outside the database, and the server checks the database against them (ship the directory to another machine)")
	}
	if len(c.Hosts) == 0 && !c.Loopback() {
		// Requests for any other host name are refused (DNS rebinding).
		return c, fmt.Errorf("SAGACITY_PUBLIC_URL: required when listening on %s: the server answers only to the host names it is configured for (list more in SAGACITY_ALLOWED_HOSTS)", c.Addr)
	}
	return c, nil
}

// resolveAuth applies the auth mode rules once everything else has parsed.
// An unset mode defaults to dev only where dev cannot expose anything.
func (c Config) resolveAuth(mode auth.Mode) (auth.Mode, error) {
	switch mode {
	case "":
		if c.Loopback() && c.OIDCIssuer == "" {
			return auth.ModeDev, nil
		}
		return "", errors.New("SAGACITY_AUTH: not set; set oidc (console and API) or tokens (API only); dev is only for a loopback address without an issuer")
	case auth.ModeDev:
		if !c.Loopback() {
			return "", fmt.Errorf("SAGACITY_AUTH: dev mode refuses to listen on %s: it accepts anyone; bind to 127.0.0.1 or use oidc or tokens", c.Addr)
		}
	case auth.ModeOIDC:
		for _, req := range []struct {
			name string
			set  bool
			hint string
		}{
			{"SAGACITY_OIDC_ISSUER", c.OIDCIssuer != "", ""},
			{"SAGACITY_OIDC_CLIENT_ID", c.OIDCClientID != "", ""},
			{"SAGACITY_PUBLIC_URL", c.PublicURL != "", " (where browsers reach this server, for the login redirect)"},
			{"SAGACITY_SESSION_KEY", c.SessionKey != nil, fmt.Sprintf(" (at least %d bytes)", minKeyLen)},
		} {
			if !req.set {
				return "", fmt.Errorf("%s: required when SAGACITY_AUTH=oidc%s", req.name, req.hint)
			}
		}
	case auth.ModeTokens:
		if len(c.File.Tokens) == 0 {
			return "", errors.New("SAGACITY_AUTH: tokens mode needs at least one entry under tokens: in SAGACITY_CONFIG")
		}
		if a := c.File.Approvals; a != nil {
			// Only the tokens vote here: a rule they cannot meet would
			// leave its requests to expire, or wait for ever.
			var voters []engine.Principal
			for _, t := range c.File.Tokens {
				voters = append(voters, engine.Principal{ID: t.Name, Roles: t.Roles, Groups: t.Groups})
			}
			if err := engine.Unmeetable(a, voters); err != nil {
				msg := err.Error()
				if e, ok := errors.AsType[*engine.Error](err); ok {
					msg = e.Msg
				}
				return "", fmt.Errorf("approval: %s (SAGACITY_AUTH=tokens)", msg)
			}
		}
	}
	return mode, nil
}

// Loopback reports whether Addr's host is a loopback address (any 127.x,
// ::1) or localhost. An empty host listens on every interface.
func (c Config) Loopback() bool {
	host, _, err := net.SplitHostPort(c.Addr)
	return err == nil && loopbackHost(host)
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// addrProblem is net.SplitHostPort's complaint without the address, which
// the caller already quotes.
func addrProblem(err error) string {
	var ae *net.AddrError
	if errors.As(err, &ae) {
		return ae.Err
	}
	return err.Error()
}

// key reads a secret. Its value never goes into an error.
func key(getenv func(string) string, name string) ([]byte, error) {
	v := getenv(name)
	if v == "" {
		return nil, nil
	}
	if len(v) < minKeyLen {
		return nil, fmt.Errorf("%s: must be at least %d bytes (got %d)", name, minKeyLen, len(v))
	}
	return []byte(v), nil
}

// signingKey reads the signing key from SAGACITY_SIGNING_KEY or the file
// SAGACITY_SIGNING_KEY_FILE names, and checks that it is one: the
// PRIVATE+KEY+… line alone, with spaces and line ends around it. Anything
// more is refused, not searched for a key: what sagacity keygen prints
// without -out (the key, comments and the public key) is not a key file,
// and a file that holds more than it should is better fixed than guessed
// at. Its value never goes into an error.
func signingKey(getenv func(string) string) (string, error) {
	v, path := strings.TrimSpace(getenv("SAGACITY_SIGNING_KEY")), getenv("SAGACITY_SIGNING_KEY_FILE")
	name, fix := "SAGACITY_SIGNING_KEY", "give the PRIVATE+KEY+… line alone (the first line sagacity keygen prints)"
	switch {
	case v != "" && path != "":
		return "", errors.New("SAGACITY_SIGNING_KEY: set it or SAGACITY_SIGNING_KEY_FILE, not both")
	case path != "":
		name, fix = "SAGACITY_SIGNING_KEY_FILE", "it must hold the PRIVATE+KEY+… line alone, as sagacity keygen -out FILE writes it"
		b, err := os.ReadFile(path)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("SAGACITY_SIGNING_KEY_FILE: cannot read %s: %w (sagacity keygen -out FILE makes one)", path, err)
		}
		if v = strings.TrimSpace(string(b)); v == "" {
			return "", fmt.Errorf("SAGACITY_SIGNING_KEY_FILE: %s is empty; %s", path, fix)
		}
		name += " (" + path + ")"
	}
	if v == "" {
		return "", nil
	}
	if n := strings.Count(v, "\n") + 1; n > 1 {
		return "", fmt.Errorf("%s: holds %d lines, not a signing key alone; %s", name, n, fix)
	}
	if _, err := engine.NewKeys(v); err != nil {
		return "", fmt.Errorf("%s: not a signing key: want PRIVATE+KEY+<name>+<hash>+<key>, as sagacity keygen prints", name)
	}
	return v, nil
}

func boolVar(getenv func(string) string, name string, def bool) (bool, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: %q is not a boolean; use true or false", name, v)
	}
	return b, nil
}

// parseBaseURL checks a URL that other URLs are built on: absolute http or
// https with a host, and nothing that would not survive appending a path.
func parseBaseURL(s string) (*url.URL, error) {
	u, err := parseHTTPURL(s)
	if err != nil {
		return nil, err
	}
	switch {
	case u.User != nil:
		return nil, fmt.Errorf("%s must not contain user information", u.Redacted())
	case u.RawQuery != "" || u.ForceQuery:
		return nil, fmt.Errorf("%s must not have a query", u.Redacted())
	case u.Fragment != "" || strings.Contains(s, "#"):
		return nil, fmt.Errorf("%s must not have a fragment", u.Redacted())
	}
	return u, nil
}

// parseHTTPURL checks for an absolute http or https URL with a host.
func parseHTTPURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Error quotes the whole value; its cause is enough.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("not a valid URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%s is not an http or https URL", u.Redacted())
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%s has no host", u.Redacted())
	}
	return u, nil
}

// checkIssuer accepts http only on loopback, where a test or local provider
// runs; anywhere else the discovery document and keys must come over TLS.
func checkIssuer(s string) error {
	u, err := parseBaseURL(s)
	if err != nil {
		return err
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return fmt.Errorf("%s must use https (http is allowed only on 127.0.0.1, ::1 or localhost)", u.Redacted())
	}
	return nil
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
