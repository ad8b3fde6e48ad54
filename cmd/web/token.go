package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/sagacity-go/sagacity/internal/config"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// newToken is a token token makes: its name, roles, value and the
// SHA-256 the configuration declares it by.
type newToken struct {
	name, value, sum string
	roles, groups    []string
}

// tokenArgs is what token takes.
const tokenArgs = "[-config FILE] [-groups GROUP,…] NAME=ROLE[,ROLE]… | [-config FILE] [-groups GROUP,…] [-name NAME] [-roles ROLE,…]"

// tokenFlags are token's flags, declared once for parsing and help.
type tokenFlags struct{ name, roles, groups, config string }

func (f *tokenFlags) declare(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "name", "automation", "the token's name: what decisions are journaled under (token:<name>)")
	fs.StringVar(&f.roles, "roles", "agent", "comma-separated roles: agent, approver, auditor")
	fs.StringVar(&f.groups, "groups", "", "comma-separated groups every token made here is in: approval rules whose approvers name one count its holder's vote, as an OIDC user's groups")
	fs.StringVar(&f.config, "config", "", "the configuration file to add the tokens to")
}

// token makes new random API tokens, one per NAME=ROLES argument (or one
// from -name and -roles), and prints each once with one tokens: block
// declaring them all, or, with -config, adds them to that file's tokens:
// list in place and prints the tokens alone. Only a token's SHA-256 goes
// into the configuration.
func token(args []string, stdout io.Writer) error {
	const usage = "usage: sagacity token " + tokenArgs
	var f tokenFlags
	set := newFlags("token", f.declare)
	if err := set.Parse(args); err != nil {
		return exitError{2, fmt.Errorf("token: %w (%s)", err, usage)}
	}
	specs := [][2]string{{f.name, f.roles}}
	if set.NArg() > 0 {
		named := false
		set.Visit(func(f *flag.Flag) { named = named || f.Name == "name" || f.Name == "roles" })
		if named {
			return exitError{2, fmt.Errorf("token: give NAME=ROLES arguments or -name and -roles, not both (%s)", usage)}
		}
		specs = nil
		for _, a := range set.Args() {
			if strings.HasPrefix(a, "-") {
				return exitError{2, fmt.Errorf("token: %s: flags go before the NAME=ROLES arguments (%s)", a, usage)}
			}
			// Roles hold no '=', so a name may.
			i := strings.LastIndex(a, "=")
			if i <= 0 {
				return exitError{2, fmt.Errorf("token: %q is not NAME=ROLES, such as ci-bot=agent or release=agent,approver (%s)", a, usage)}
			}
			specs = append(specs, [2]string{a[:i], a[i+1:]})
		}
	}
	var groups []string
	if f.groups != "" {
		for g := range strings.SplitSeq(f.groups, ",") {
			groups = append(groups, strings.TrimSpace(g))
		}
	}
	var toks []newToken
	for _, s := range specs {
		if slices.ContainsFunc(toks, func(t newToken) bool { return t.name == s[0] }) {
			return exitError{2, fmt.Errorf("token: the name %q is given twice", s[0])}
		}
		t := newToken{name: s[0], value: "sgc_" + rand.Text() + rand.Text(), groups: groups}
		for r := range strings.SplitSeq(s[1], ",") {
			r = strings.TrimSpace(r)
			if !slices.Contains(engine.Roles, engine.Role(r)) {
				return exitError{2, fmt.Errorf("token: %s: unknown role %q (roles are agent, approver, auditor)", s[0], r)}
			}
			t.roles = append(t.roles, r)
		}
		sum := sha256.Sum256([]byte(t.value))
		t.sum = hex.EncodeToString(sum[:])
		toks = append(toks, t)
	}
	items, err := tokenItems(toks)
	if err != nil {
		return err
	}
	if f.config != "" {
		if err := addTokens(f.config, toks, items); err != nil {
			return exitError{2, fmt.Errorf("token: %w", err)}
		}
		var names []string
		for _, t := range toks {
			n := fmt.Sprintf("%s (%s)", t.name, strings.Join(t.roles, ", "))
			if len(t.groups) > 0 {
				n = fmt.Sprintf("%s (%s; groups %s)", t.name, strings.Join(t.roles, ", "), strings.Join(t.groups, ", "))
			}
			names = append(names, n)
		}
		fmt.Fprintf(stdout, "# Added to %s's tokens: %s; restart the server to take them.\n", f.config, strings.Join(names, ", "))
		return printTokens(stdout, toks)
	}
	block := "tokens:\n" + indent(items, "  ")
	// The same rules as the server's, so that what is printed loads.
	if _, err := config.ParseFile("the tokens: block", []byte(block)); err != nil {
		return exitError{2, fmt.Errorf("token: %w", err)}
	}
	if err := printTokens(stdout, toks); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "\n# Add this to SAGACITY_CONFIG (it holds only each token's SHA-256), or let sagacity token -config FILE add it:\n%s", block)
	return err
}

// printTokens prints each token once, beside its name.
func printTokens(w io.Writer, toks []newToken) error {
	fmt.Fprintln(w, "# Give each token to its user alone; it is stored nowhere:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range toks {
		fmt.Fprintf(tw, "%s\t%s\n", t.name, t.value)
	}
	return tw.Flush()
}

// tokenItems is the YAML list of toks' entries, at column 1, each
// "- name: …" with its sha256, its roles and its groups (if any) in
// brackets; yaml quotes whatever a name needs quoted.
func tokenItems(toks []newToken) (string, error) {
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	list := &yaml.Node{Kind: yaml.SequenceNode}
	for _, t := range toks {
		flow := func(vs []string) *yaml.Node {
			n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, v := range vs {
				n.Content = append(n.Content, str(v))
			}
			return n
		}
		item := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			str("name"), str(t.name), str("sha256"), str(t.sum), str("roles"), flow(t.roles)}}
		if len(t.groups) > 0 {
			item.Content = append(item.Content, str("groups"), flow(t.groups))
		}
		list.Content = append(list.Content, item)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(list); err != nil {
		return "", err
	}
	return b.String(), enc.Close()
}

// indent puts prefix before every line of text.
func indent(text, prefix string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

// addTokens adds toks, whose entries are items, to the tokens: list of
// the configuration file at path (made when there is none), refusing a
// name the file declares already. The entries are inserted as lines
// after the list's last, so every other byte of the file, its comments
// and layout, stays as it was; the result must load, with the file's
// tokens and toks and nothing else changed, or nothing is written. The
// file is replaced at once (a new file renamed over it), with its mode.
func addTokens(path string, toks []newToken, items string) error {
	target, err := filepath.EvalSymlinks(path) // a link stays a link; its target changes
	if errors.Is(err, fs.ErrNotExist) {
		target = path
	} else if err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	data, err := os.ReadFile(target)
	switch {
	case err == nil:
		fi, err := os.Stat(target)
		if err != nil {
			return err
		}
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	before, err := config.ParseFile(path, data)
	if err != nil {
		return err
	}
	for _, t := range toks {
		if slices.ContainsFunc(before.Tokens, func(c config.Token) bool { return c.Name == t.name }) {
			return fmt.Errorf("%s declares a token named %q already; choose another name, or remove that entry first", path, t.name)
		}
	}
	edited, err := insertTokens(data, items)
	if err == nil {
		err = sameBut(path, data, edited, before, toks)
	}
	if err != nil {
		return fmt.Errorf("cannot add to %s in place: %w; nothing was changed: run sagacity token without -config and add its tokens: block by hand", path, err)
	}
	return replaceFile(target, edited, mode)
}

// insertTokens returns data with items added to its top-level tokens:
// list: after the list's last line, under a "tokens:" with no value, or
// at the end in a new tokens: key. Other forms (a flow list, a document
// that is no block mapping) are refused.
func insertTokens(data []byte, items string) ([]byte, error) {
	nl := "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		nl = "\r\n"
	}
	items = strings.ReplaceAll(items, "\n", nl)
	lines := strings.SplitAfter(string(data), "\n")
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		lines[len(lines)-1] += nl
	}
	// after returns the file with text inserted after its line n (1-based).
	after := func(n int, text string) []byte {
		return []byte(strings.Join(lines[:n], "") + text + strings.Join(lines[n:], ""))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 { // empty, or comments alone
		return after(len(lines), "tokens:"+nl+indent(items, "  ")), nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode || top.Style&yaml.FlowStyle != 0 {
		return nil, errors.New("its top level is not a block mapping")
	}
	for i := 0; i < len(top.Content); i += 2 {
		key, val := top.Content[i], top.Content[i+1]
		if key.Value != "tokens" {
			continue
		}
		switch {
		case val.Kind == yaml.SequenceNode && val.Style&yaml.FlowStyle == 0:
			return after(lastLine(val), indent(items, strings.Repeat(" ", val.Column-1))), nil
		case val.Kind == yaml.ScalarNode && val.Tag == "!!null" && val.Value == "":
			return after(key.Line, indent(items, strings.Repeat(" ", key.Column+1))), nil
		default:
			return nil, fmt.Errorf("its tokens: (line %d) is not a list of - name: … entries, one a line", key.Line)
		}
	}
	col := top.Content[0].Column
	return after(len(lines), strings.Repeat(" ", col-1)+"tokens:"+nl+indent(items, strings.Repeat(" ", col+1))), nil
}

// lastLine is the last line a node's content is on.
func lastLine(n *yaml.Node) int {
	last := n.Line + strings.Count(n.Value, "\n")
	for _, c := range n.Content {
		last = max(last, lastLine(c))
	}
	return last
}

// sameBut checks that edited loads and declares the tokens data declared
// and toks after them, and that nothing else in it changed.
func sameBut(path string, data, edited []byte, before config.File, toks []newToken) error {
	after, err := config.ParseFile(path, edited)
	if err != nil {
		return fmt.Errorf("the result would not load (%w)", err)
	}
	want := slices.Clone(before.Tokens)
	for _, t := range toks {
		c := config.Token{Name: t.name, SHA256: t.sum, Groups: t.groups}
		for _, r := range t.roles {
			c.Roles = append(c.Roles, engine.Role(r))
		}
		want = append(want, c)
	}
	var was, is map[string]any
	if err := yaml.Unmarshal(data, &was); err != nil {
		return err
	}
	if err := yaml.Unmarshal(edited, &is); err != nil {
		return err
	}
	delete(was, "tokens")
	delete(is, "tokens")
	if len(was) == 0 {
		was = nil // an empty file and one with tokens alone have nothing else
	}
	if len(is) == 0 {
		is = nil
	}
	if !reflect.DeepEqual(after.Tokens, want) || !reflect.DeepEqual(was, is) {
		return errors.New("the result would change more than its tokens")
	}
	return nil
}

// replaceFile writes data to a new file beside path with mode and renames
// it over path, so that a reader sees the old file or the new one, whole.
func replaceFile(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	if err = tmp.Chmod(mode); err == nil {
		if _, err = tmp.Write(data); err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
