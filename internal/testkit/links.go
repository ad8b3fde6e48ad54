package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// BrokenLinks returns each relative link of README.md and docs/*.md that
// leads nowhere, as "file:line: (link): why": its file does not exist, or
// its #anchor is made by no heading of that file. Links to other sites are
// not followed.
func BrokenLinks(t testing.TB) []string {
	t.Helper()
	broken, err := brokenLinks(Root(t))
	if err != nil {
		t.Fatal(err)
	}
	return broken
}

var (
	// A link's or an image's target, after its text: ](target) or
	// ](target "title").
	linkTarget = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// A code span, whose text is never a link (it may run over lines).
	codeSpan = regexp.MustCompile("`[^`]*`")
	// An ATX heading.
	headingLine = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// A link in a heading, whose text alone makes the anchor.
	headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	// A URL scheme: a link to another site, or mailto:.
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// brokenLinks checks the links of the documentation pages under root.
func brokenLinks(root string) ([]string, error) {
	pages, err := pagesIn(root)
	if err != nil {
		return nil, err
	}
	texts := map[string]string{}
	for _, p := range pages {
		texts[filepath.Join(root, p.File)] = p.Text
	}
	var broken []string
	for _, p := range pages {
		text := strings.Join(prose(p.Text), "\n")
		text = codeSpan.ReplaceAllStringFunc(text, func(s string) string {
			return strings.Map(func(r rune) rune {
				if r == '\n' {
					return r
				}
				return ' '
			}, s)
		})
		for _, m := range linkTarget.FindAllStringSubmatchIndex(text, -1) {
			link := text[m[2]:m[3]]
			if scheme.MatchString(link) {
				continue
			}
			why, err := leadsNowhere(root, filepath.Join(root, p.File), link, texts)
			if err != nil {
				return nil, err
			}
			if why != "" {
				broken = append(broken, fmt.Sprintf("%s:%d: (%s): %s", p.File, strings.Count(text[:m[0]], "\n")+1, link, why))
			}
		}
	}
	return broken, nil
}

// leadsNowhere says why link, in the page at path, leads nowhere ("" when
// it leads somewhere). texts holds the pages already read.
func leadsNowhere(root, path, link string, texts map[string]string) (string, error) {
	file, frag, _ := strings.Cut(link, "#")
	target := path
	if file != "" {
		target = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
	}
	rel, err := filepath.Rel(root, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "it leads out of the repository", nil
	}
	if _, err := os.Stat(target); err != nil {
		return fmt.Sprintf("there is no %s", filepath.ToSlash(rel)), nil
	}
	if frag == "" {
		return "", nil
	}
	if !strings.HasSuffix(target, ".md") {
		return fmt.Sprintf("%s is no Markdown page, whose headings make anchors", filepath.ToSlash(rel)), nil
	}
	text, ok := texts[target]
	if !ok {
		b, err := os.ReadFile(target)
		if err != nil {
			return "", err
		}
		text = string(b)
	}
	for _, a := range anchors(text) {
		if a == frag {
			return "", nil
		}
	}
	return fmt.Sprintf("no heading of %s makes the anchor #%s", filepath.ToSlash(rel), frag), nil
}

// anchors are the anchors a Markdown page's headings make, as GitHub
// makes them: the heading's text in lower case, each space a hyphen, every
// other character but letters, digits, hyphens and underscores dropped; a
// heading whose anchor an earlier one made gets -1, -2, ….
func anchors(text string) []string {
	var out []string
	seen := map[string]int{}
	for _, l := range prose(text) {
		m := headingLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var a strings.Builder
		for _, r := range strings.ToLower(headingLink.ReplaceAllString(m[1], "$1")) {
			switch {
			case r == ' ':
				a.WriteByte('-')
			case r == '-', r == '_', unicode.IsLetter(r), unicode.IsNumber(r), unicode.IsMark(r):
				a.WriteRune(r)
			}
		}
		s := a.String()
		if n := seen[s]; n > 0 {
			seen[s]++
			s = fmt.Sprintf("%s-%d", s, n)
		} else {
			seen[s] = 1
		}
		out = append(out, s)
	}
	return out
}

// prose is the lines of a Markdown page's text, each line of a fenced
// code block (its fences too) made empty, as parseBlocks reads fences.
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		indent, _, ok := strings.Cut(lines[i], "```")
		if !ok || strings.TrimSpace(indent) != "" {
			continue
		}
		for lines[i] = ""; i+1 < len(lines); {
			i++
			closing := strings.TrimSpace(lines[i]) == "```"
			lines[i] = ""
			if closing {
				break
			}
		}
	}
	return lines
}
