// Package testkit is what the project's tests share: fresh databases of
// both kinds (a PostgreSQL schema or a SQLite file per test), statements
// run straight against them as an attacker with database access would, a
// signing key, the check of an engine error's kind, and a TCP proxy whose
// connections a test can cut, or whose answers it can lose. The stores'
// conformance suite is storetest, the engine's scenarios are enginetest;
// this is only the kit.
package testkit
