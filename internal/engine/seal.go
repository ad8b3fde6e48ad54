package engine

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
)

// Notifications cross the database: the engine writes an event and its
// deliveries, and the relay reads them back to send them, signed for
// their receivers. Whoever can write the database (the application's own
// role) could otherwise insert or edit a row that goes out as a correctly
// signed webhook. So every outbox row that says what is sent or where
// carries a seal: an HMAC-SHA256, under a key derived from the server's
// signing key (which the database never holds), over each of its columns
// that matter, every kind of row under a label of its own. The engine
// opens the seals of a delivery when it is claimed, before anything is
// sent: one whose rows do not hold is never sent; it is refused
// (DeliveryRefused), logged and counted (CheckedNotification).

// outboxLabel separates the outbox's key from any other use of the seed.
const outboxLabel = "sagacity outbox seal v1"

// outboxKey is the key that seals the outbox's rows, derived from a
// signing key's seed.
func outboxKey(seed []byte) []byte {
	k, err := hkdf.Key(sha256.New, seed, nil, outboxLabel, sha256.Size)
	if err != nil {
		panic(err) // only for a length HKDF cannot make
	}
	return k
}

// The kinds of sealed rows.
const (
	sealEvent    = "event"    // an event: every column
	sealDelivery = "delivery" // a delivery: its event, endpoint and thread
	sealMember   = "member"   // an endpoint told of a thread
	sealHandle   = "handle"   // what an endpoint answered a thread's first message with
)

// Seal is the HMAC-SHA256, hex, under key, of label and parts, each
// length prefixed, so that no two lists of parts read alike: what the
// server keeps beside a row of the database to know, later, that it wrote
// it (the outbox's rows here, auth's sessions), with a key the database
// never sees and a label for each kind of row.
func Seal(key []byte, label string, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for _, p := range append([]string{label}, parts...) {
		m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p))))
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// seal is the seal of an outbox row of kind over parts.
func (k *Keys) seal(kind string, parts ...string) string { return Seal(k.outbox, kind, parts...) }

// opens reports whether seal is the seal of a row of kind over parts.
func (k *Keys) opens(seal, kind string, parts ...string) bool {
	return hmac.Equal([]byte(seal), []byte(k.seal(kind, parts...)))
}

// eventParts are what an event's seal covers: every column of its row.
func eventParts(ev OutboxEvent) []string {
	return []string{ev.ID, ev.Key, string(ev.Type), ev.SagaID, strconv.FormatInt(ev.JournalSeq, 10), ev.Thread,
		strconv.FormatInt(ev.ReceiptSeq, 10), ev.Body, strconv.FormatInt(ev.At.UnixMicro(), 10)}
}

// forged says why delivery d's rows are not as this server wrote them
// (its event, the delivery, its thread's handle); "" when they are.
func (e *Engine) forged(d Delivery) string {
	ev := d.Event
	switch {
	case !e.keys.opens(ev.Seal, sealEvent, eventParts(ev)...):
		return "its event is not one this server wrote (an outbox_events row written or changed by another hand)"
	case !e.keys.opens(d.Seal, sealDelivery, ev.ID, d.Endpoint, d.RowThread):
		return "its delivery is not one this server wrote (an outbox_deliveries row written or changed by another hand)"
	case !d.First && !e.keys.opens(d.HandleSeal, sealHandle, d.RowThread, d.Endpoint, d.Thread):
		return "the message it would update is not one the endpoint answered (an outbox_threads row written or changed by another hand)"
	}
	return ""
}
