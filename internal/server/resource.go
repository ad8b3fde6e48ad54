package server

import (
	"net/http"
	"strconv"

	"github.com/sagacity-go/sagacity/internal/edge"
	"github.com/sagacity-go/sagacity/wire"
)

// resourceMetadataPath is where the server describes itself as an OAuth
// protected resource (RFC 9728).
const resourceMetadataPath = "/.well-known/oauth-protected-resource"

// base is the server's URL as clients reach it.
func (s *server) base(r *http.Request) string {
	if s.PublicURL != "" {
		return s.PublicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// resourceMetadata answers the metadata of the resource at path ("" for
// the whole server).
func (s *server) resourceMetadata(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		base := s.base(r)
		w.Header().Set("Cache-Control", "max-age=300")
		_ = edge.WriteJSON(w, http.StatusOK, wire.ResourceMetadata{Resource: base + path, AuthorizationServers: s.TokenIssuers,
			BearerMethodsSupported: []string{"header"}, ResourceName: "Sagacity",
			ResourceDocumentation: base + "/sagacity/openapi.json"})
	}
}

// challenge is the WWW-Authenticate of a 401: the bearer scheme, and
// where the metadata of the resource asked for is.
func (s *server) challenge(r *http.Request) string {
	meta := s.base(r) + resourceMetadataPath
	if r.URL.Path == "/mcp" {
		meta += "/mcp"
	}
	return `Bearer realm="sagacity", resource_metadata=` + strconv.Quote(meta)
}
