// Package migrations holds the numbered SQL files that build the schema,
// one directory a dialect. A file is never edited once it has landed; a
// change is a new file with the next number.
package migrations

import "embed"

// FS holds postgres/NNN_name.sql and sqlite/NNN_name.sql.
//
//go:embed postgres/*.sql sqlite/*.sql
var FS embed.FS
