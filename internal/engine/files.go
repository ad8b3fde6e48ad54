package engine

import (
	"fmt"
	"strings"
)

// The names evidence goes by as a file, whichever shell downloads it and
// wherever the offline commands read it: one name per kind. A saga's id
// is in the name with every character a file name or a header should not
// hold replaced by '_', so the name a page prints is the file saved.

// ExportFile is the file a saga's exported journal is saved as.
func ExportFile(sagaID string) string { return "sagacity-" + fileSafe(sagaID) + ".ndjson" }

// ReceiptFile is the file the receipt of the decision journaled at seq
// is saved as.
func ReceiptFile(sagaID string, seq int64) string {
	return fmt.Sprintf("receipt-%s-%d.note", fileSafe(sagaID), seq)
}

// DecidedFile is the file the exact bytes the decision at seq was made on
// are saved as, the PAYLOAD_FILE verify-receipt checks its receipt
// against.
func DecidedFile(sagaID string, seq int64) string {
	return fmt.Sprintf("decided-%s-%d.bin", fileSafe(sagaID), seq)
}

// CheckpointFile is the file the log's checkpoint of a size is kept as in
// the checkpoint directory and saved as when downloaded: its size in 20
// digits, so that names sort as sizes do.
func CheckpointFile(size int64) string { return fmt.Sprintf("%020d.checkpoint", size) }

func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}
