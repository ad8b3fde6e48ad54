// Package edge is the HTTP edge the server, the console and the JSON API
// share: the refusals of the HTTP layer itself (Error), the status and
// wire kind every error answers (Classify, Refusal), strict request
// bodies (Decode), JSON answers (WriteJSON) and downloads (Attachment). It owns no route; the
// server's one error adapter writes what it classifies.
package edge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/sagacity-go/sagacity/internal/engine"
	"github.com/sagacity-go/sagacity/wire"
)

// kinds maps each engine kind to its status and wire kind: one table for
// the API, the MCP gateway's structured content and the server's error
// adapter.
var kinds = map[engine.Kind]struct {
	status int
	kind   wire.Kind
}{
	engine.Invalid:         {http.StatusBadRequest, wire.KindInvalid},
	engine.Unauthenticated: {http.StatusUnauthorized, wire.KindUnauthenticated},
	engine.Forbidden:       {http.StatusForbidden, wire.KindForbidden},
	engine.NotFound:        {http.StatusNotFound, wire.KindNotFound},
	engine.Conflict:        {http.StatusConflict, wire.KindConflict},
	engine.Unprocessable:   {http.StatusUnprocessableEntity, wire.KindUnprocessable},
	engine.Unavailable:     {http.StatusServiceUnavailable, wire.KindUnavailable},
	engine.Internal:        {http.StatusInternalServerError, wire.KindInternal},
}

// Error is a refusal of the HTTP layer itself (a method, a body, a host,
// a rate), not of the engine: it says its status and kind.
type Error struct {
	Status int
	Kind   wire.Kind
	Msg    string
	Err    error // the cause, for logs only
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// ErrMediaType is the refusal of a body that is not application/json.
var ErrMediaType = &Error{Status: http.StatusUnsupportedMediaType, Kind: wire.KindMediaType, Msg: "Content-Type must be application/json"}

// Classify says what status an error answers and its kind: an Error
// says; an engine error by its kind; anything else is internal.
func Classify(err error) (int, wire.Kind) {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Status, e.Kind
	}
	k := kinds[engine.KindOf(err)]
	return k.status, k.kind
}

// Refusal is the body of an error whose message msg the server chose
// (the engine's for a refusal, a request id for an internal error).
func Refusal(err error, msg string) wire.Error {
	_, kind := Classify(err)
	out := wire.Error{Problem: wire.Problem{Error: msg, Kind: kind}}
	if e, ok := errors.AsType[*engine.Error](err); ok {
		out.SagaID, out.JournalSeq, out.Code = e.SagaID, e.Seq, e.Code
	}
	return out
}

// Decode reads one JSON object into v, strictly: the body must be
// application/json and valid UTF-8 JSON, and its keys must be v's field
// names exactly, each once (a duplicate or case-variant key could make the
// engine and a reviewer read different values), with nothing after the
// object. The server caps the body's size. Errors: Invalid, ErrMediaType,
// or as BodyError.
func Decode(r *http.Request, v any) error { return decode(r, v, false) }

// DecodeOptional is Decode for a body that may be empty, which leaves v
// as it is.
func DecodeOptional(r *http.Request, v any) error { return decode(r, v, true) }

func decode(r *http.Request, v any, allowEmpty bool) error {
	body, err := io.ReadAll(r.Body)
	if err := BodyError(err); err != nil {
		return err
	}
	if len(body) == 0 {
		if allowEmpty {
			return nil
		}
		return engine.Errorf(engine.Invalid, "request body is empty; send a JSON object")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return ErrMediaType
	}
	if err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		// The problem in words, never the body echoed.
		return engine.Errorf(engine.Invalid, "invalid JSON body: %s", jsonProblem(err))
	}
	return nil
}

// BodyError classifies an error reading a request body (or parsing a form
// from it): a body over the server's cap is 413; one that cannot be read,
// as from a client that stalls or hangs up, is Invalid: the client's
// problem, not the server's.
func BodyError(err error) error {
	if tooBig, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &Error{Status: http.StatusRequestEntityTooLarge, Kind: wire.KindTooLarge,
			Msg: fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit), Err: err}
	}
	if err != nil {
		return &engine.Error{Kind: engine.Invalid, Msg: "the request body could not be read", Err: err}
	}
	return nil
}

// jsonProblem describes a decoding error: where, and what, in words.
func jsonProblem(err error) string {
	if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		// The cause may quote the offending bytes between backquotes.
		what, _, _ := strings.Cut(strings.TrimPrefix(se.Err.Error(), "jsontext: "), " `")
		return fmt.Sprintf("%s at byte %d", what, se.ByteOffset)
	}
	se, ok := errors.AsType[*jsonv2.SemanticError](err)
	switch {
	case ok && errors.Is(err, jsonv2.ErrUnknownName):
		return fmt.Sprintf("unknown field %s", strconv.Quote(string(se.JSONPointer.LastToken())))
	case ok && se.JSONPointer != "" && se.GoType != nil:
		return fmt.Sprintf("field %s must be %s", strconv.Quote(string(se.JSONPointer.LastToken())), jsonKind(se.GoType.Kind().String()))
	case ok:
		return "the body must be a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated"
	}
	return "not a JSON object"
}

func jsonKind(k string) string {
	switch k {
	case "string", "ptr":
		return "a string"
	case "int", "int64":
		return "an integer"
	case "bool":
		return "true or false"
	}
	return k
}

// Attachment makes a response download as a file named name (ASCII, one
// of the engine's file names).
func Attachment(w http.ResponseWriter, name string) {
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, name, url.PathEscape(name)))
}

// WriteJSON writes v as a JSON response with the given status. The
// server's error adapter writes error bodies with it too.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}
