package testkit

import (
	"testing"

	"github.com/sagacity-go/sagacity/internal/engine"
)

// WantKind fails the test unless err is an engine error of kind k.
func WantKind(t testing.TB, what string, err error, k engine.Kind) {
	t.Helper()
	if !engine.IsKind(err, k) {
		t.Errorf("%s: error = %v (kind %v), want kind %v", what, err, KindName(err), k)
	}
}

// KindName names err's kind for a failure message: "none" for no error.
func KindName(err error) string {
	if err == nil {
		return "none"
	}
	return engine.KindOf(err).String()
}
