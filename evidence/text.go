package evidence

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// EncodedPrefix starts a journaled text that stands for bytes a store could
// not keep as they are: a tool's result or error, or the bytes a refused
// resume presented, holding NUL or invalid UTF-8. What happened is always
// journaled; these bytes are journaled encoded.
const EncodedPrefix = "sagacity-base64:"

// EncodeText returns s as the journal keeps it: s itself when it is UTF-8
// without NUL and does not start with EncodedPrefix, otherwise
// EncodedPrefix and the standard base64 of s. DecodeText reverses it, so
// the encoding loses nothing and no text is ambiguous.
func EncodeText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && !strings.HasPrefix(s, EncodedPrefix) {
		return s
	}
	return EncodedPrefix + base64.StdEncoding.EncodeToString([]byte(s))
}

// DecodeText returns the bytes a journaled text stands for (see
// EncodeText). It returns an *Error for an encoded text whose
// base64 does not decode.
func DecodeText(s string) (string, error) {
	enc, ok := strings.CutPrefix(s, EncodedPrefix)
	if !ok {
		return s, nil
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", &Error{Msg: "journaled text has a bad " + EncodedPrefix + " encoding", Err: err}
	}
	return string(b), nil
}
