-- Owners of sessions made through the HTTP API: each API key sees only its
-- own sessions, under labels unique per key. CLI sessions have no row here.
CREATE TABLE session_owners (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    owner      TEXT NOT NULL,
    label      TEXT NOT NULL,
    UNIQUE (owner, label)
);
