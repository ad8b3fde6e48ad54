package api

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API's OpenAPI 3.1 document, written by hand. The server
// serves these bytes, and the server's tests hold every response they see
// to them.
//
//go:embed openapi.json
var OpenAPI []byte

// Document serves the OpenAPI document: GET /sagacity/openapi.json.
func Document(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(OpenAPI)
	return err
}
