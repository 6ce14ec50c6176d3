-- Sessions: a named workspace and the turns run in it.
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    workspace  TEXT NOT NULL,
    created_at INTEGER NOT NULL, -- unix milliseconds
    updated_at INTEGER NOT NULL
);

-- Turns: one task given to the agent. status is running until the turn ends;
-- a turn left running by a killed process is reported as interrupted.
CREATE TABLE turns (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL,
    task          TEXT NOT NULL,
    status        TEXT NOT NULL,
    code          TEXT NOT NULL DEFAULT '',
    output        TEXT NOT NULL DEFAULT '',
    attempts      INTEGER NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    model_ms      INTEGER NOT NULL DEFAULT 0,
    sandbox_ms    INTEGER NOT NULL DEFAULT 0,
    started_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    UNIQUE (session_id, seq)
);

-- Attempts: each program the model wrote in a turn and what became of it.
CREATE TABLE attempts (
    turn_id     TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    n           INTEGER NOT NULL,
    code        TEXT NOT NULL,
    findings    TEXT NOT NULL DEFAULT '[]', -- JSON array of checker findings
    status      TEXT NOT NULL DEFAULT '',   -- sandbox status, '' when not run
    exit_code   INTEGER NOT NULL DEFAULT 0,
    wall_ms     INTEGER NOT NULL DEFAULT 0,
    cpu_ms      INTEGER NOT NULL DEFAULT 0,
    peak_memory INTEGER NOT NULL DEFAULT 0,
    error_class TEXT NOT NULL DEFAULT '',
    verdict     TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (turn_id, n)
);

CREATE TABLE artifacts (
    turn_id TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    path    TEXT NOT NULL,
    size    INTEGER NOT NULL,
    sha256  TEXT NOT NULL,
    PRIMARY KEY (turn_id, path)
);

-- The audit log: append-only, each record chained to the one before by hash.
CREATE TABLE audit (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    ts        INTEGER NOT NULL,
    session   TEXT NOT NULL DEFAULT '',
    run_id    TEXT NOT NULL DEFAULT '',
    kind      TEXT NOT NULL,
    data      TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
);
CREATE INDEX audit_session ON audit (session, seq);
