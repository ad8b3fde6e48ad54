package notify

import (
	"fmt"
	"strings"
	"time"

	"github.com/sagacity-go/sagacity/internal/payload"
	"github.com/sagacity-go/sagacity/wire"
)

// What the channels people read (Slack, email) share: an event's facts
// in words, every value shown on one line with what a reader cannot see
// made visible.

// requestOpen reports whether t leaves its request open: waiting for
// votes, or approved and waiting to run.
func requestOpen(t wire.EventType) bool {
	switch t {
	case wire.EventWaiting, wire.EventVoted, wire.EventEscalated, wire.EventApproved:
		return true
	}
	return false
}

// shownMax is the most characters of a name, a reason or an id shown.
const shownMax = 200

// shown is s as revealed shows it, cut to shownMax characters (… marks
// the cut).
func shown(s string) string {
	s = revealed(s)
	if r := []rune(s); len(r) > shownMax {
		return string(r[:shownMax-1]) + "…"
	}
	return s
}

// revealed is s for a person to read, on one line: line breaks show as ⏎
// and tabs as spaces, and every character payload.Reveal points out
// (bidi, invisible and control characters) as its code point,
// "[U+202E]", so that nothing in s can start a line or a header, or hide
// or reorder what is around it.
func revealed(s string) string {
	var b strings.Builder
	for _, seg := range payload.Reveal(s) {
		if seg.Flag != "" {
			b.WriteString("[" + seg.Text + "]")
		} else {
			b.WriteString(lineBreaks.Replace(seg.Text))
		}
	}
	return b.String()
}

var lineBreaks = strings.NewReplacer("\r\n", "⏎", "\n", "⏎", "\r", "⏎", "\t", " ")

// names is a list of people, as shown.
func names(ns []string) string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = shown(n)
	}
	return strings.Join(out, ", ")
}

// votes is a request's approvals against its quorum: "1 of 2: alice";
// "" when it has no quorum.
func votes(e wire.Event) string {
	if e.Quorum == 0 {
		return ""
	}
	v := fmt.Sprintf("%d of %d", len(e.ApprovedBy), e.Quorum)
	if len(e.ApprovedBy) > 0 {
		v += ": " + names(e.ApprovedBy)
	}
	return v
}

// expires is the time left to decide: "in 3h59m (2026-12-02 16:00 UTC)";
// "" when the request has no deadline.
func expires(e wire.Event, now time.Time) string {
	if e.ExpiresAt == "" {
		return ""
	}
	t, err := time.Parse(time.RFC3339, e.ExpiresAt)
	if err != nil {
		return shown(e.ExpiresAt)
	}
	at := t.UTC().Format("2006-01-02 15:04 UTC")
	left := t.Sub(now)
	switch h, m := int(left.Hours()), int(left.Minutes())%60; {
	case left <= 0:
		return "passed (" + at + ")"
	case left < time.Minute:
		return "in less than a minute (" + at + ")"
	case h >= 24:
		return fmt.Sprintf("in %dd%dh (%s)", h/24, h%24, at)
	case h > 0:
		return fmt.Sprintf("in %dh%dm (%s)", h, m, at)
	default:
		return fmt.Sprintf("in %dm (%s)", m, at)
	}
}

// fieldLines are a payload summary's lines, "key: value", as shown; what
// the summary leaves out is counted, never hidden.
func fieldLines(fields []payload.Field, more int) []string {
	var lines []string
	for _, f := range fields {
		line := shown(f.Value) + cutBytes(f.Cut)
		if f.Key != "" {
			line = shown(f.Key) + cutBytes(f.KeyCut) + ": " + line
		}
		lines = append(lines, line)
	}
	switch {
	case more > 0 && len(fields) > 0 && fields[0].Key == "":
		lines = append(lines, fmt.Sprintf("+%d more bytes", more))
	case more > 0:
		lines = append(lines, fmt.Sprintf("+%d more", more))
	}
	return lines
}

func cutBytes(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("… (%d more bytes)", n)
}

// requestEvent reports whether t is one of a request's events.
func requestEvent(t wire.EventType) bool { return strings.HasPrefix(string(t), "request.") }
