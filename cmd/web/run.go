package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sagacity-go/sagacity/internal/config"
)

// exitError sets the process's exit status. Without err, whatever needed
// saying was already printed.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// command is one of the binary's commands.
type command struct {
	name  string
	args  string // after the name, in the usage line
	help  string // what it does, its flags and exit status
	run   func(ctx context.Context, args []string, environ []string, stdout io.Writer) error
	env   bool   // whether it reads all the SAGACITY_* variables (its help lists them)
	short string // one line for the list of commands
	// flags declares its flags, as it parses them, for its help to list;
	// nil when it has none.
	flags func(*flag.FlagSet)
}

// newFlags is the flag set a command parses its arguments with, its flags
// declared by declare: it prints nothing (the command's help lists them,
// see printCommand).
func newFlags(name string, declare func(*flag.FlagSet)) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	declare(fs)
	return fs
}

// commands are the binary's commands, in the order help lists them.
var commands = []command{
	{name: "serve", short: "serve the console, the JSON API, the agent gateway and /mcp (the default)", env: true,
		help: "Serves until SIGINT or SIGTERM, then lets requests in flight finish (30s at most).\n" +
			"It is configured by the environment variables below; an unknown SAGACITY_* variable is refused.",
		run: func(ctx context.Context, args []string, environ []string, stdout io.Writer) error {
			if len(args) > 0 {
				return exitError{2, fmt.Errorf("serve takes no arguments (got %s); it is configured by SAGACITY_* variables: sagacity help serve", strings.Join(args, " "))}
			}
			return serve(ctx, environ, stdout)
		}},
	{name: "migrate", short: "apply the pending schema migrations, as the schema's owner",
		help: "Applies the pending migrations of the database SAGACITY_DATABASE_URL names (the one serve would open)\n" +
			"and prints each it applied, then the schema's version, or that the schema is current. Run it as the\n" +
			"schema's owner at each upgrade, before the servers, which may then connect as a role that cannot\n" +
			"change the schema. Replicas running it at once apply each migration once.\n" +
			"Exit status 0: the schema is current, 1: it is not (one line naming SAGACITY_DATABASE_URL says why),\n" +
			"2: arguments were given.",
		run: migrate},
	{name: "verify", args: verifyArgs, short: "verify a journal export offline",
		help: "Verifies a journal export (NDJSON, as GET /sagacity/audit/{sagaId} serves it; - reads standard input):\n" +
			"its hash chain; with -key, every decision's receipt (refusing one made in dev mode unless -allow-dev)\n" +
			"and, in an export with proofs, every request's votes and execution against the approval rule of the\n" +
			"policy it pinned (the export's policy lines, signed by the key) and every passkey vote against its\n" +
			"passkey's enrolment (the export's passkey lines); with -checkpoint, the export's signed head and every\n" +
			"entry's, policy line's and passkey line's proof of inclusion in the log the checkpoint signed\n" +
			"(entries newer than it only with -allow-unproved). Prints the result as JSON, naming the rule, the\n" +
			"policy (its whole SHA-256) and who approved each executed request.\n" +
			"Exit status 0: valid, 1: broken, 2: unreadable.",
		run: offline(verify), flags: func(fs *flag.FlagSet) { new(verifyFlags).declare(fs) }},
	{name: "verify-receipt", args: verifyReceiptArgs, short: "check a decision's receipt offline",
		help: "Checks a decision's receipt (GET /sagacity/receipts/{sagaId}/{seq}) against the public key, that it\n" +
			"is about the bytes in PAYLOAD, and that it was not made in dev mode (unless -allow-dev); a vote signed\n" +
			"with a passkey, against the passkey's enrolment in an export with proofs (-passkeys), which it\n" +
			"refuses without one, proved in the log the checkpoint signed (-checkpoint).\n" +
			"Exit status 0: valid, 1: not, 2: unreadable.",
		run: offline(verifyReceipt), flags: func(fs *flag.FlagSet) { new(verifyReceiptFlags).declare(fs) }},
	{name: "verify-log", args: verifyLogArgs, short: "check that a newer checkpoint extends an older one",
		help: "Checks that the log the newer checkpoint signed extends the older one's, with the consistency\n" +
			"proof between them (GET /sagacity/checkpoints/consistency?from=OLD&to=NEW).\n" +
			"Exit status 0: consistent, 1: not, 2: unreadable.",
		run: offline(verifyLog), flags: func(fs *flag.FlagSet) { new(verifyLogFlags).declare(fs) }},
	{name: "token", args: tokenArgs, short: "make new API tokens",
		help: "Makes a new API token for each NAME=ROLES argument (roles: agent, approver, auditor, comma-separated),\n" +
			"or one named by -name (default automation) with -roles (default agent). Prints each token once, beside\n" +
			"its name, and one tokens: block that declares them all in SAGACITY_CONFIG by their SHA-256 alone.\n" +
			"With -config, adds them to that file's tokens: list instead, in place (the file's other lines and\n" +
			"comments stay as they are; a name the file declares already is refused; the file is made if there is\n" +
			"none), and prints the tokens. -groups puts every token made in those groups, for approval rules whose\n" +
			"approvers name them (as an OIDC user's groups); flags go before the NAME=ROLES arguments.\n" +
			"Exit status 0: made, 2: refused (nothing was written).",
		run: offline(token), flags: func(fs *flag.FlagSet) { new(tokenFlags).declare(fs) }},
	{name: "policy", args: policyArgs, short: "print the approval policy a configuration file puts in force, and its hash",
		help: "Prints the approval policy of the configuration FILE (the default without one) as requests record it:\n" +
			"its SHA-256, which every request's policy= line carries, and its document, indented. The hash is of\n" +
			"the canonical document, one line of JSON, which -canonical prints alone, byte for byte:\n" +
			"sagacity policy -canonical FILE | sha256sum prints the same hash.\n" +
			"A condition that does not compile is refused, naming the tool, the rule and the column.\n" +
			"Exit status 0: printed, 2: the file is unreadable or refused.",
		run: offline(policy), flags: func(fs *flag.FlagSet) { new(policyFlags).declare(fs) }},
	{name: "keygen", args: keygenArgs, short: "make a new signing key",
		help: "Prints a new signing key (for SAGACITY_SIGNING_KEY) and its public key. With -out, writes the signing\n" +
			"key alone to FILE, a new file of mode 0600 (for SAGACITY_SIGNING_KEY_FILE; an existing file is never\n" +
			"overwritten), and prints the public key. -name is the key's name, the origin of the log it signs\n" +
			"(default sagacity): your server's host name.",
		run: offline(keygen), flags: func(fs *flag.FlagSet) { new(keygenFlags).declare(fs) }},
	{name: "hook", args: hookArgs, short: "decide a Claude Code tool use with the gate (a PreToolUse command hook)",
		help: "Reads a Claude Code PreToolUse hook's JSON from standard input, sends the tool use to the server as a\n" +
			"call of the gated tool -tool names (its input {\"tool_name\",\"tool_input\",\"cwd\"}, in the saga\n" +
			"claude-code/<session_id>, under the tool use's id as its idempotency key), waits up to -wait for people to\n" +
			"decide it, and prints the hook's permission decision: allow once the server executed the approved request,\n" +
			"deny with why otherwise (rejected, sent back, not decided in time, the server unreachable, other bytes,\n" +
			"anything unexpected). It reads SAGACITY_URL and SAGACITY_TOKEN (an agent's token) alone.\n" +
			"Claude Code's timeout of the hook must be longer than -wait and 20s, or it kills the hook and the tool runs.\n" +
			"Exit status 0: a decision is printed, 2: none could be (Claude Code blocks the tool use).",
		run: hookCommand, flags: func(fs *flag.FlagSet) { new(hookFlags).declare(fs) }},
	{name: "healthcheck", args: "[URL]", short: "exit 0 when the server is ready (for container health checks)",
		help: "Asks the server's /readyz (default: the one SAGACITY_ADDR names, on loopback) and exits 0 when it\n" +
			"answers ok, 1 otherwise. The container image has no curl; this is its HEALTHCHECK.\n" +
			"Of the environment it reads SAGACITY_ADDR alone.",
		run: healthcheck},
	{name: "version", short: "print the version", help: "Prints the version: the module's, or the commit it was built from.",
		run: func(_ context.Context, args []string, _ []string, stdout io.Writer) error {
			if len(args) > 0 {
				return exitError{2, fmt.Errorf("version takes no arguments")}
			}
			_, err := fmt.Fprintln(stdout, "sagacity", version())
			return err
		}},
	{name: "help", args: "[COMMAND]", short: "this help, or a command's", help: "Prints the help of the binary, or of a command."},
}

// offline runs a command that reads neither the context nor the
// environment.
func offline(f func(args []string, stdout io.Writer) error) func(context.Context, []string, []string, io.Writer) error {
	return func(_ context.Context, args []string, _ []string, stdout io.Writer) error { return f(args, stdout) }
}

func find(name string) (command, bool) {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		return command{}, false
	}
	return commands[i], true
}

// isHelp reports whether an argument asks for help.
func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// run is the whole program; main only calls it, with the process's
// environment (as os.Environ gives it). Tests call it too.
func run(ctx context.Context, args []string, environ []string, stdout io.Writer) error {
	name := "serve"
	if len(args) > 0 {
		name, args = args[0], args[1:]
	}
	if isHelp(name) {
		name = "help"
	}
	if name == "help" {
		switch {
		case len(args) == 0:
			return printHelp(stdout)
		case slices.ContainsFunc(args, isHelp):
			c, _ := find("help")
			return printCommand(stdout, c)
		case len(args) > 1:
			return exitError{2, fmt.Errorf("help takes one command at most (usage: sagacity help [COMMAND])")}
		}
		c, ok := find(args[0])
		if !ok {
			return exitError{2, fmt.Errorf("no command %q: sagacity help lists them", args[0])}
		}
		return printCommand(stdout, c)
	}
	c, ok := find(name)
	if !ok {
		return exitError{2, fmt.Errorf("unknown command %q: sagacity help lists them", name)}
	}
	// Help wins wherever it is asked for: "verify --help" is not a file.
	if slices.ContainsFunc(args, isHelp) {
		return printCommand(stdout, c)
	}
	return c.run(ctx, args, environ, stdout)
}

func printHelp(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "usage: sagacity [COMMAND] [ARGUMENTS]   (sagacity COMMAND --help for one command)")
	fmt.Fprintln(tw, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.short)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nserve is configured by these environment variables (and SAGACITY_CONFIG's YAML file):")
	return printVars(w)
}

func printCommand(w io.Writer, c command) error {
	fmt.Fprintf(w, "usage: sagacity %s %s\n\n%s\n", c.name, c.args, c.help)
	if c.flags != nil {
		fmt.Fprintln(w, "\nflags:")
		fs := newFlags(c.name, c.flags)
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if !c.env {
		return nil
	}
	fmt.Fprintln(w, "\nenvironment:")
	return printVars(w)
}

func printVars(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  variable\tdefault\texample\tmeaning")
	for _, v := range config.Vars {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", v.Name, v.Default, v.Example, v.Meaning)
	}
	return tw.Flush()
}

// healthcheck asks a server's /readyz: the URL given, or the server
// SAGACITY_ADDR names, on loopback when it listens everywhere.
func healthcheck(ctx context.Context, args []string, environ []string, stdout io.Writer) error {
	var url string
	switch len(args) {
	case 0:
		addr := lookup(environ)("SAGACITY_ADDR")
		if addr == "" {
			addr = config.DefaultAddr
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return exitError{2, fmt.Errorf("healthcheck: SAGACITY_ADDR: %q is not host:port", addr)}
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		url = "http://" + net.JoinHostPort(host, port) + "/readyz"
	case 1:
		url = args[0]
	default:
		return exitError{2, fmt.Errorf("healthcheck takes at most one argument, the URL of /readyz")}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return exitError{2, fmt.Errorf("healthcheck: %w", err)}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return exitError{1, fmt.Errorf("healthcheck: %w", err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK {
		return exitError{1, fmt.Errorf("healthcheck: %s answered %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))}
	}
	_, err = fmt.Fprintln(stdout, "ok")
	return err
}

// lookup is getenv over an environment as os.Environ gives it; the last
// of a name wins, as in the process's own.
func lookup(environ []string) func(string) string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}
