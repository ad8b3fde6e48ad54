package templates

import (
	"net/url"
	"strconv"
)

// The console's addresses. Saga ids may hold any printable character, so
// they travel in the query, escaped, never in a path or an hx-* attribute.

// RequestHref is the page of the request at seq of saga.
func RequestHref(saga string, seq int64) string {
	return "/request?" + url.Values{"saga": {saga}, "seq": {strconv.FormatInt(seq, 10)}}.Encode()
}

// SagaHref is a saga's timeline.
func SagaHref(saga string) string { return "/saga?" + url.Values{"id": {saga}}.Encode() }

// EntryHref is one entry in a saga's timeline.
func EntryHref(saga string, seq int64) string {
	return "/saga?" + url.Values{"id": {saga}, "at": {strconv.FormatInt(seq, 10)}}.Encode() + "#e" + strconv.FormatInt(seq, 10)
}

// ExportHref downloads a saga's journal as NDJSON.
func ExportHref(saga string) string { return "/audit/export?" + url.Values{"id": {saga}}.Encode() }

// ProvenExportHref downloads a saga's journal with the inclusion proofs of
// its entries in the log at a checkpoint's size.
func ProvenExportHref(saga string, size int64) string {
	return "/audit/export?" + url.Values{"id": {saga}, "size": {strconv.FormatInt(size, 10)}}.Encode()
}

// CheckpointHref downloads the signed checkpoint of a size.
func CheckpointHref(size int64) string {
	return "/audit/checkpoint?size=" + strconv.FormatInt(size, 10)
}

// ReceiptHref downloads the receipt of the decision at seq.
func ReceiptHref(saga string, seq int64) string {
	return "/audit/receipt?" + url.Values{"id": {saga}, "seq": {strconv.FormatInt(seq, 10)}}.Encode()
}

// DecidedHref downloads the exact bytes the decision at seq was made on.
func DecidedHref(saga string, seq int64) string {
	return "/audit/decided?" + url.Values{"id": {saga}, "seq": {strconv.FormatInt(seq, 10)}}.Encode()
}

// PolicyHref is the approval policy page, at the document of a hash.
func PolicyHref(hash string) string { return "/policy#p-" + hash }
