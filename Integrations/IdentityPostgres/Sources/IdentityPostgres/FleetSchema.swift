import Logging
import NIOCore
import PostgresNIO

/// The fleet's tables, as numbered migrations. ``PostgresFleet`` applies the missing ones on its first
/// connection, in one transaction under an advisory lock, so that instances starting together apply each
/// migration exactly once and an instance never sees half a schema.
enum FleetSchema {
    struct Migration: Sendable {
        let version: Int
        let name: String
        let statements: [String]
    }

    /// The advisory lock taken while migrating (an arbitrary constant: "identity" in ASCII, truncated).
    static let advisoryLock: Int64 = 0x6964_656e_7469_7479

    static let migrations: [Migration] = [
        Migration(version: 1, name: "keys and policies", statements: [
            """
            CREATE TABLE identity_key_accounts (
                account text PRIMARY KEY,
                current_key_id bytea NOT NULL CHECK (octet_length(current_key_id) = 16),
                generation bigint NOT NULL DEFAULT 1,
                updated_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            """
            CREATE TABLE identity_keys (
                account text NOT NULL
                    REFERENCES identity_key_accounts (account) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
                key_id bytea NOT NULL CHECK (octet_length(key_id) = 16),
                kek_id text NOT NULL,
                wrapped_key bytea NOT NULL CHECK (octet_length(wrapped_key) = 60),
                created_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (account, key_id)
            )
            """,
            """
            ALTER TABLE identity_key_accounts ADD CONSTRAINT identity_key_accounts_current_key
                FOREIGN KEY (account, current_key_id) REFERENCES identity_keys (account, key_id)
                DEFERRABLE INITIALLY DEFERRED
            """,
            """
            CREATE FUNCTION identity_keys_notify() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP = 'DELETE' THEN
                    PERFORM pg_notify('identity_keys', OLD.account);
                    RETURN OLD;
                END IF;
                PERFORM pg_notify('identity_keys', NEW.account);
                IF TG_OP = 'UPDATE' AND NEW.account <> OLD.account THEN
                    PERFORM pg_notify('identity_keys', OLD.account);
                END IF;
                RETURN NEW;
            END
            $$
            """,
            """
            CREATE TRIGGER identity_key_accounts_notify AFTER INSERT OR UPDATE OR DELETE ON identity_key_accounts
                FOR EACH ROW EXECUTE FUNCTION identity_keys_notify()
            """,
            """
            CREATE TRIGGER identity_keys_notify AFTER UPDATE OR DELETE ON identity_keys
                FOR EACH ROW EXECUTE FUNCTION identity_keys_notify()
            """,
            """
            CREATE TABLE identity_policies (
                name text PRIMARY KEY,
                document text NOT NULL,
                updated_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            """
            CREATE FUNCTION identity_policies_notify() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_notify('identity_policies', CASE WHEN TG_OP = 'DELETE' THEN OLD.name ELSE NEW.name END);
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER identity_policies_notify AFTER INSERT OR UPDATE OR DELETE ON identity_policies
                FOR EACH ROW EXECUTE FUNCTION identity_policies_notify()
            """,
            """
            CREATE FUNCTION identity_policies_notify_all() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_notify('identity_policies', '');
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER identity_policies_truncate AFTER TRUNCATE ON identity_policies
                FOR EACH STATEMENT EXECUTE FUNCTION identity_policies_notify_all()
            """,
        ]),
    ]

    /// The newest schema version this build knows.
    static var latestVersion: Int { migrations.map(\.version).max() ?? 0 }

    /// Applies every missing migration on `connection`, all in one transaction.
    static func migrate(on connection: PostgresConnection, logger: Logger) -> EventLoopFuture<Void> {
        let eventLoop = connection.eventLoop
        @Sendable func run(_ sql: String) -> EventLoopFuture<PostgresQueryResult> {
            connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        }
        let applied = run("BEGIN")
            .flatMap { _ in run("SELECT pg_advisory_xact_lock(\(advisoryLock))") }
            .flatMap { _ in
                run("""
                    CREATE TABLE IF NOT EXISTS identity_schema_migrations (
                        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                    """)
            }
            .flatMap { _ in run("SELECT version FROM identity_schema_migrations") }
            .flatMapThrowing { result -> [Migration] in
                var done: Set<Int> = []
                for row in result.rows { done.insert(try row.decode(Int.self)) }
                return migrations.filter { !done.contains($0.version) }.sorted { $0.version < $1.version }
            }
            .flatMap { missing -> EventLoopFuture<Void> in
                var chain = eventLoop.makeSucceededVoidFuture()
                for migration in missing {
                    for statement in migration.statements {
                        chain = chain.flatMap { run(statement).map { _ in () } }
                    }
                    chain = chain.flatMap {
                        connection.query(
                            "INSERT INTO identity_schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))",
                            logger: logger
                        ).map { _ in () }
                    }
                }
                return chain
            }
            .flatMap { run("COMMIT").map { _ in () } }
        return applied.flatMapError { error in
            run("ROLLBACK").flatMapThrowing { _ in throw error }.flatMapErrorThrowing { _ in throw error }
        }
    }
}
