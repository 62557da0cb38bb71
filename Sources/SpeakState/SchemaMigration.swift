internal import GRDB

/// One version of the database schema: an identifier recorded in `grdb_migrations` and the SQL that gets there.
struct SchemaMigration: Sendable {
    let identifier: String
    let sql: String
}

extension SchemaMigration {
    /// Every version, oldest first. A change appends a migration; one that has shipped is never
    /// edited, since files in the field already record it as applied.
    static let all: [SchemaMigration] = [v1, v2]

    /// The first schema: audit log, schedules, fleet request ids. Times are milliseconds since 1970 UTC.
    static let v1 = SchemaMigration(
        identifier: "v1",
        sql: """
            -- AUTOINCREMENT: a pruned seq is never handed out again, so a reader's cursor never skips rows.
            CREATE TABLE audit (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT,
                front TEXT NOT NULL,
                origin TEXT NOT NULL,
                output TEXT,
                priority TEXT,
                queued INTEGER NOT NULL,
                started INTEGER,
                finished INTEGER,
                reason TEXT,
                detail TEXT,
                error TEXT,
                repeats INTEGER NOT NULL DEFAULT 0,
                schedule TEXT,
                text TEXT,
                private INTEGER NOT NULL DEFAULT 0
            );
            -- started/finished/repeated find the newest row of an announcement.
            CREATE INDEX audit_id ON audit(id);
            -- Time filters and pruning by age.
            CREATE INDEX audit_queued ON audit(queued);
            -- Rows left open by a killed daemon, found at start without a scan.
            CREATE INDEX audit_open ON audit(seq) WHERE reason IS NULL AND error IS NULL;

            CREATE TABLE schedule (
                id TEXT PRIMARY KEY NOT NULL,
                definition BLOB NOT NULL,
                created INTEGER NOT NULL,
                updated INTEGER NOT NULL,
                lastSlot INTEGER
            );

            -- seq orders claims, so the oldest are pruned first.
            CREATE TABLE fleet_request (
                seq INTEGER PRIMARY KEY,
                requestId TEXT NOT NULL UNIQUE,
                announcement TEXT,
                report BLOB,
                seen INTEGER NOT NULL
            );
            """)

    /// The audit log's index of announcement ids holds the open rows only: `started` and
    /// `finished` look for the newest open row of an id, and a row leaves the index when it is
    /// closed (a row inserted closed never enters it). Ids are random, so an index of every row
    /// took a page at a random place in it at every insert and every prune: most of what a batch
    /// wrote to the WAL once the log held many rows. A `repeat` (the newest row of an id, open or
    /// not) reads the table back from its newest row; the log's filter by id reads it in `seq`
    /// order from the page's cursor.
    static let v2 = SchemaMigration(
        identifier: "v2",
        sql: """
            DROP INDEX audit_id;
            -- started/finished find the newest open row of an announcement.
            CREATE INDEX audit_open_id ON audit(id) WHERE reason IS NULL AND error IS NULL;
            """)

    /// A migrator that applies `migrations` in order.
    static func migrator(_ migrations: [SchemaMigration]) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for migration in migrations {
            migrator.registerMigration(migration.identifier) { db in try db.execute(sql: migration.sql) }
        }
        return migrator
    }
}
