-- Kernel cells: each cell run in a session's kernel through the HTTP API
-- (POST /v1/sessions/{id}/exec with state keep), for the page to draw them
-- again after a reload. n numbers a session's cells from 1 and is never
-- reused; a session keeps its newest cells (store.KeepCells) and loses
-- them with itself. Code and texts come redacted by the caller and are cut
-- here (store.MaxCellText each). display is a JSON array of the cell's
-- MIME bundles without image bytes; images a JSON array of the figures'
-- file names in the workspace.
CREATE TABLE cells (
    session_id       TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    n                INTEGER NOT NULL,
    execution_count  INTEGER NOT NULL DEFAULT 0,
    started_at       INTEGER NOT NULL, -- unix milliseconds
    wall_ms          INTEGER NOT NULL DEFAULT 0,
    code             TEXT NOT NULL,
    stdout           TEXT NOT NULL DEFAULT '',
    stderr           TEXT NOT NULL DEFAULT '',
    display          TEXT NOT NULL DEFAULT '[]',
    images           TEXT NOT NULL DEFAULT '[]',
    status           TEXT NOT NULL DEFAULT '',
    exit_code        INTEGER NOT NULL DEFAULT 0,
    message          TEXT NOT NULL DEFAULT '',
    error_name       TEXT NOT NULL DEFAULT '',
    error_value      TEXT NOT NULL DEFAULT '',
    kernel_died      INTEGER NOT NULL DEFAULT 0,
    kernel_restarted INTEGER NOT NULL DEFAULT 0,
    restart_reason   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (session_id, n)
);
