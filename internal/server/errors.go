package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sagacity-go/sagacity/internal/api"
	"github.com/sagacity-go/sagacity/internal/engine"
)

// status is the one place an error becomes an HTTP status.
func status(err error) int {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, api.ErrMediaType):
		return http.StatusUnsupportedMediaType
	}
	switch engine.KindOf(err) {
	case engine.NotFound:
		return http.StatusNotFound
	case engine.Invalid:
		return http.StatusBadRequest
	case engine.Conflict:
		return http.StatusConflict
	case engine.Forbidden:
		return http.StatusForbidden
	case engine.Unauthenticated:
		return http.StatusUnauthorized
	case engine.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// message is what the caller is told: the kind's message, never the
// cause. Internal errors say only "internal error" and the request id.
func message(err error, code int, reqID string) string {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Sprintf("request body is larger than %d bytes", tooBig.Limit)
	}
	if e, ok := errors.AsType[*engine.Error](err); ok && code < 500 {
		return e.Msg
	}
	if code == http.StatusServiceUnavailable {
		return "service unavailable, try again (request " + reqID + ")"
	}
	return "internal error (request " + reqID + ")"
}

type errorJSON struct {
	Error      string `json:"error"`
	SagaID     string `json:"sagaId,omitempty"`
	JournalSeq int64  `json:"journalSeq,omitempty"`
}

// handler is how every route is written: it returns an error instead of
// writing one, and this adapter writes it.
type handler func(w http.ResponseWriter, r *http.Request) error

// jsonErrors adapts h for the JSON API: errors are {"error": ...} plus
// sagaId and journalSeq when known.
func (s *server) jsonErrors(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		code := status(err)
		s.logError(r, err, code)
		body := errorJSON{Error: message(err, code, requestID(r.Context()))}
		if e, ok := errors.AsType[*engine.Error](err); ok {
			body.SagaID, body.JournalSeq = e.SagaID, e.Seq
		}
		writeJSON(w, code, body)
	}
}

func (s *server) logError(r *http.Request, err error, code int) {
	level := slog.LevelInfo
	if code >= 500 {
		level = slog.LevelError
	}
	s.Log.Log(r.Context(), level, "request failed", "request", requestID(r.Context()),
		"method", r.Method, "path", r.URL.Path, "status", code, "err", err)
}
