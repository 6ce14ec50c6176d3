-- Leases: the process running a session now. owner names it (host, boot id,
-- pid and start time, see package procid); token is this holding's own id.
-- A lease whose owner is dead, or that expired, may be taken over.
CREATE TABLE leases (
    session_id  TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    owner       TEXT NOT NULL,
    token       TEXT NOT NULL,
    purpose     TEXT NOT NULL DEFAULT '',
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);

-- Token buckets of the execution rate limits, shared by every process of
-- the data directory: tokens held at updated_at (unix milliseconds).
CREATE TABLE rate_buckets (
    key        TEXT PRIMARY KEY,
    tokens     REAL NOT NULL,
    updated_at INTEGER NOT NULL
);

-- Each record's number within its run (1, 2, ...; 0 for records outside
-- any run's numbering): a missing number is a lost record.
ALTER TABLE audit ADD COLUMN run_seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX audit_run ON audit (run_id, run_seq);

-- Why a turn ended as it did (a cancellation's cause, an error), and, for
-- runs of the server, the agent's result and the events it streamed.
ALTER TABLE turns ADD COLUMN message TEXT NOT NULL DEFAULT '';
ALTER TABLE turns ADD COLUMN result TEXT NOT NULL DEFAULT '';
CREATE TABLE run_events (
    turn_id TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    n       INTEGER NOT NULL,
    data    TEXT NOT NULL,
    PRIMARY KEY (turn_id, n)
);
CREATE INDEX turns_status ON turns (status);
