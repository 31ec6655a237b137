-- StateStore records (server/state/records.py): JSON values by namespace and key, times
-- on the database's clock (seconds since the epoch), shared by every replica.
CREATE TABLE IF NOT EXISTS records (
    namespace text NOT NULL,
    key text NOT NULL,
    value jsonb NOT NULL,
    version bigint NOT NULL,
    updated double precision NOT NULL,
    expires double precision,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX IF NOT EXISTS records_expires ON records (expires) WHERE expires IS NOT NULL;
