// Package authtest runs OpenID Connect providers and a headless browser inside
// a test process, so that tests of the relying party exercise real protocol
// exchanges instead of mocks.
//
// Provider is a real OpenID provider (zitadel/oidc's example OP) with a login
// form; LoginHTTP signs a user in through that form with net/http, and Browser
// drives Chromium through it. Rogue is a deliberately minimal provider whose ID
// tokens can be made wrong on purpose, for negative tests.
//
// The package is imported only by tests, never by the server.
package authtest
