-- Files from before --state-url (--tools-db, <cache dir>/tools.sqlite3) kept idempotency
-- keys in their own table: they move into records (namespace 'idempotency'), so a key
-- claimed before the upgrade still refuses to run twice after it.
CREATE TABLE IF NOT EXISTS idempotency (
    scope TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, state TEXT NOT NULL,
    outcome TEXT, created REAL NOT NULL, updated REAL NOT NULL);
INSERT OR IGNORE INTO records (namespace, key, value, version, updated, expires)
    SELECT 'idempotency', scope,
           json_object('fingerprint', fingerprint, 'state', state, 'outcome', json(outcome)),
           1, updated, NULL
    FROM idempotency;
DROP TABLE idempotency;
