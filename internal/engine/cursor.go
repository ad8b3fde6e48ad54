package engine

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Listing positions travel to clients as opaque strings: the fields
// joined by newlines, base64url. The id is last, so it may hold anything.

func encodeCursor(fields ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(fields, "\n")))
}

func decodeCursor(s string, n int) ([]string, time.Time, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	parts := strings.SplitN(string(b), "\n", n)
	if err != nil || len(parts) != n {
		return nil, time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, parts[0])
	return parts, t, err == nil
}

var errCursor = Errorf(Invalid, "cursor is not one this server returned")

// String writes the cursor for a client to send back.
func (c SagaCursor) String() string {
	return encodeCursor(c.CreatedAt.UTC().Format(time.RFC3339Nano), c.ID)
}

// ParseSagaCursor reads what SagaCursor.String wrote; Invalid otherwise.
func ParseSagaCursor(s string) (SagaCursor, error) {
	parts, t, ok := decodeCursor(s, 2)
	if !ok {
		return SagaCursor{}, errCursor
	}
	return SagaCursor{CreatedAt: t, ID: parts[1]}, nil
}

// String writes the cursor for a client to send back.
func (c PendingCursor) String() string {
	return encodeCursor(c.CreatedAt.UTC().Format(time.RFC3339Nano), strconv.FormatInt(c.JournalSeq, 10), c.SagaID)
}

// ParsePendingCursor reads what PendingCursor.String wrote; Invalid
// otherwise.
func ParsePendingCursor(s string) (PendingCursor, error) {
	parts, t, ok := decodeCursor(s, 3)
	if !ok {
		return PendingCursor{}, errCursor
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return PendingCursor{}, errCursor
	}
	return PendingCursor{CreatedAt: t, JournalSeq: seq, SagaID: parts[2]}, nil
}
