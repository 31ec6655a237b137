-- StateStore records (server/state/records.py): JSON values by namespace and key.
CREATE TABLE IF NOT EXISTS records (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated REAL NOT NULL,
    expires REAL,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX IF NOT EXISTS records_expires ON records (expires) WHERE expires IS NOT NULL;
