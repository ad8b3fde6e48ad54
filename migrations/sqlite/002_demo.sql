-- State of the built-in demo tools (SAGACITY_DEMO): an inventory and a bank
-- ledger. Each effect is keyed by the call's Idempotency-Key (<saga>/<seq>).
CREATE TABLE demo_inventory (
    sku     TEXT PRIMARY KEY,
    name    TEXT NOT NULL,
    on_hand INTEGER NOT NULL CHECK (on_hand >= 0)
);

CREATE TABLE demo_reservations (
    idempotency_key TEXT PRIMARY KEY,
    sku             TEXT NOT NULL REFERENCES demo_inventory (sku),
    qty             INTEGER NOT NULL CHECK (qty > 0),
    released        INTEGER NOT NULL DEFAULT 0,
    created_at      TIMESTAMP NOT NULL
);

CREATE TABLE demo_ledger (
    idempotency_key TEXT PRIMARY KEY,
    beneficiary     TEXT NOT NULL,
    amount          TEXT NOT NULL,
    created_at      TIMESTAMP NOT NULL
);
