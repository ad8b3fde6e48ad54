package evidence

import (
	"slices"
	"strings"
)

// The payloads the engine writes itself — on the entry that opens a call,
// on a person's decision, on the entry that drops or refuses a request —
// are lines of "key=value", hashed into the chain and covered by receipts.
// Lines is their one grammar: every writer encodes with it and every
// reader parses with it (golden vectors: testdata/lines.json). A tool's
// own result or error is not lines, and is never read as such.

// Key names a line.
type Key string

// The keys, in the order they are written.
const (
	KeyRequester   Key = "requester"            // who asked for the call, on the entry that opens it
	KeyAuth        Key = "auth"                 // how the person or agent signed in
	KeyClient      Key = "client"               // the MCP client and session that asked, if one did
	KeyIdempotency Key = "key"                  // the agent's idempotency key for the call
	KeyRule        Key = "rule"                 // on a request: the approval rule that applies; on the gate's refusal, the one it could not evaluate
	KeyPolicy      Key = "policy"               // on a request: the SHA-256 of the approval policy in force
	KeyContext     Key = "context"              // on a request under a policy whose conditions read it: what they saw (Context)
	KeyResumes     Key = "resumes"              // on a resume's INTENT: seq=<the request>
	KeyExecutedBy  Key = "executed-by"          // on a resume's INTENT the server made (ExecutedByServer): its rule executes on approval
	KeyApprover    Key = "approver"             // who approved or rejected a request
	KeyOnBehalfOf  Key = "on-behalf-of"         // on a delegate's vote: the delegator it was cast for
	KeyMeets       Key = "meets"                // on an approval under thresholds: the requirement it meets in each alternative (Meets)
	KeyDismissedBy Key = "dismissed-by"         // who dismissed a superseded request
	KeyWithdrawnBy Key = "withdrawn-by"         // who withdrew their approval of a request
	KeyChangesBy   Key = "changes-requested-by" // who sent a request back to the agent for changes
	KeyCancelledBy Key = "cancelled-by"         // the requester who cancelled their own request
	KeyBrokenBy    Key = "break-glass-by"       // who executed a request without its quorum (break-glass)
	KeyRatifiedBy  Key = "ratified-by"          // who ratified a break-glass execution afterwards
	KeyExpired     Key = "expired"              // on the server's REJECTED of a request that expired: when it did
	KeyPasskey     Key = "passkey"              // on a passkey's enrolment, removal or use: its credential id
	KeySignIn      Key = "sign-in"              // on a sign-in's entry: its ID token's SHA-256 (a provider key's: the key's)
	KeyRetiredBy   Key = "retired-by"           // on a runner's retirement: the runner of the process that retired it
	KeyResolvedBy  Key = "resolved-by"          // who recorded what became of a call in doubt
	KeyReason      Key = "reason"               // why, in the person's words (on a request: the requester's)
	KeyReceipt     Key = "receipt"              // the decision's signed receipt, base64
	KeyDropped     Key = "dropped"              // why the saga failed, on the REJECTED that drops a request
	KeyError       Key = "error"                // on the gate's refusal of a request: why its rule's condition failed
	// KeyAttempted and KeyResult run to the end of the payload, line
	// breaks and all: the bytes a refused stale resume presented
	// (EncodeText), and the result a resolution reports.
	KeyAttempted Key = "attempted"
	KeyResult    Key = "result"
)

// ExecutedByServer is KeyExecutedBy's one value: the server executed
// the request itself, once approved, as its rule says (execute:
// on-approval), for the requester the line KeyRequester names.
const ExecutedByServer = "server"

// Line is one line of a payload: a key and its value, or, with no key, a
// line of text (a refused resume's detail). It is a pair, not a type of
// this package's own, so that its writers in every package write it as
// one, {KeyRequester, id}, as go vet asks keyed fields only of the
// struct types a package declares.
type Line = struct {
	Key   Key
	Value string
}

// Lines is a payload the engine writes.
type Lines []Line

// rest reports whether a key's value runs to the end of the payload.
func rest(k Key) bool { return k == KeyAttempted || k == KeyResult }

// ParseLines reads a payload the engine wrote. A line whose start is not
// a key and "=" is text; a value of KeyAttempted or KeyResult is the rest
// of the payload, so nothing in it reads as a line of its own.
func ParseLines(payload string) Lines {
	var ls Lines
	for {
		l, more, cut := strings.Cut(payload, "\n")
		if k, v, ok := strings.Cut(l, "="); ok && validKeyName(k) {
			if rest(Key(k)) {
				_, v, _ = strings.Cut(payload, "=")
				return append(ls, Line{Key: Key(k), Value: v})
			}
			ls = append(ls, Line{Key: Key(k), Value: v})
		} else {
			ls = append(ls, Line{Value: l})
		}
		if !cut {
			return ls
		}
		payload = more
	}
}

// validKeyName reports whether k can be a key: lower-case letters and
// inner hyphens.
func validKeyName(k string) bool {
	if k == "" || k[0] == '-' || k[len(k)-1] == '-' {
		return false
	}
	for _, c := range []byte(k) {
		if (c < 'a' || c > 'z') && c != '-' {
			return false
		}
	}
	return true
}

// String encodes the lines. A value holds no line break unless it runs
// to the end (KeyAttempted, KeyResult, which only the last line may
// have): other values are made one line, so no value can add a line.
func (ls Lines) String() string {
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteByte('\n')
		}
		v := l.Value
		if !rest(l.Key) || i < len(ls)-1 {
			v = oneLine(v)
		}
		if l.Key != "" {
			b.WriteString(string(l.Key) + "=")
		}
		b.WriteString(v)
	}
	return b.String()
}

// Get returns the value of the first line of key k, and whether there is
// one.
func (ls Lines) Get(k Key) (string, bool) {
	for _, l := range ls {
		if l.Key == k && k != "" {
			return l.Value, true
		}
	}
	return "", false
}

// Value is Get's value alone: "" when there is no line of key k.
func (ls Lines) Value(k Key) string {
	v, _ := ls.Get(k)
	return v
}

// With returns the lines with a line of key k and value v added, unless
// v is "".
func (ls Lines) With(k Key, v string) Lines {
	if v == "" {
		return ls
	}
	return append(ls, Line{Key: k, Value: v})
}

// Without returns the lines without those of key k, as a reader shows a
// decision beside its receipt.
func (ls Lines) Without(k Key) Lines {
	return slices.DeleteFunc(slices.Clone(ls), func(l Line) bool { return l.Key == k && k != "" })
}

// Field returns the value of the first line of key k of the entry's
// payload, for the payloads the engine writes (see Lines); "" when there
// is none.
func (e Entry) Field(k Key) string { return ParseLines(e.Payload).Value(k) }

// Refusal reads a refused resume's entry: the refusal in words and, for
// a stale approval, the bytes that were presented (decoded). ok is false
// for any other entry.
func (e Entry) Refusal() (detail, attempted string, ok bool) {
	if e.Phase != PhaseRejected || e.ToolName == GateTool {
		return "", "", false
	}
	ls := ParseLines(e.Payload)
	if len(ls) == 0 || ls[0].Key != "" {
		return "", "", false // a drop: dropped=<why>
	}
	if a, has := ls.Get(KeyAttempted); has {
		bytes, err := DecodeText(a)
		if err != nil {
			bytes = a
		}
		return ls[0].Value, bytes, true
	}
	return ls[0].Value, "", true
}

// Refers returns the seq an entry's input names ("seq=<N>", as the
// approval gate's entries and a refusal's have it), 0 when it names none.
func (e Entry) Refers() int64 { return refSeq(e.Input) }

// Actor is who an entry the engine wrote names: who asked for the call
// it opens, or who decided, dismissed or resolved; "" for the entries
// that carry what a tool answered.
func (e Entry) Actor() string {
	switch {
	case e.ToolName != GateTool && e.Phase != PhaseIntent && e.Phase != PhaseAwaitingApproval:
		return ""
	case e.ToolName != GateTool:
		return e.Field(KeyRequester)
	}
	_, who, _ := e.Decision()
	return who
}
