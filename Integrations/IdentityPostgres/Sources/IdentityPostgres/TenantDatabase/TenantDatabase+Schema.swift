import Logging
import NIOCore
import PostgresNIO

extension TenantDatabase {
    /// The schema that holds the binding functions and the binding key.
    public static let schemaName = "identity_rls"
    /// The permissive policy ``rowLevelSecurity(table:tenantColumn:accountColumn:)`` creates: it grants the
    /// bound tenant's rows.
    public static let policyName = "identity_tenant"
    /// The restrictive policy ``rowLevelSecurity(table:tenantColumn:accountColumn:)`` creates: it is ANDed with
    /// every other policy on the table, so a policy added later can narrow the view but never widen it to
    /// another tenant.
    public static let guardPolicyName = "identity_tenant_guard"

    /// The statements that set up row-level security on `table`: enable and `FORCE` it (so that the table's
    /// owner is held to it too), and the two policies, for reads (`USING`) and writes (`WITH CHECK`), each
    /// comparing the row's `tenantColumn` with the transaction's bound tenant and, when `accountColumn` is given,
    /// the row's `accountColumn` with the bound account:
    ///
    /// ```sql
    /// ALTER TABLE "documents" ENABLE ROW LEVEL SECURITY
    /// ALTER TABLE "documents" FORCE ROW LEVEL SECURITY
    /// DROP POLICY IF EXISTS "identity_tenant" ON "documents"
    /// CREATE POLICY "identity_tenant" ON "documents" AS PERMISSIVE FOR ALL TO PUBLIC
    ///     USING ("tenant" = (SELECT identity_rls.current_tenant()))
    ///     WITH CHECK ("tenant" = (SELECT identity_rls.current_tenant()))
    /// DROP POLICY IF EXISTS "identity_tenant_guard" ON "documents"
    /// CREATE POLICY "identity_tenant_guard" ON "documents" AS RESTRICTIVE FOR ALL TO PUBLIC ...
    /// ```
    ///
    /// Run them in one transaction as the table's owner (not the service's role), after
    /// ``install(on:serviceRole:secret:logger:)``. The columns hold text: the bound values are the case-folded
    /// account name (`Identity.foldedName`) and the case-folded tenant (`PolicyManager.tenant(for:)`). Let the
    /// database fill them, `DEFAULT identity_rls.current_tenant()` and `DEFAULT identity_rls.current_account()`,
    /// so that the service never writes them itself. Outside a bound transaction both functions return `NULL`,
    /// and a comparison with `NULL` is never true: no row is read or written.
    ///
    /// - Parameters:
    ///   - table: the table, optionally qualified by its schema (`app.documents`); taken exactly (quoted).
    ///   - tenantColumn: the column holding each row's tenant.
    ///   - accountColumn: the column holding each row's account, for rows of one account only; `nil` for rows
    ///     every account of the tenant shares.
    /// - Throws: ``TenantDatabaseError/invalidIdentifier(_:)`` for a name that is not a plain identifier.
    public static func rowLevelSecurity(
        table: String, tenantColumn: String, accountColumn: String? = nil
    ) throws(TenantDatabaseError) -> [String] {
        let table = try SQLTableName(table).quoted
        var condition = "\(try SQLIdentifier(tenantColumn).quoted) = (SELECT \(schemaName).current_tenant())"
        if let accountColumn {
            condition += " AND \(try SQLIdentifier(accountColumn).quoted) = (SELECT \(schemaName).current_account())"
        }
        // The functions are wrapped in a sub-select so that PostgreSQL evaluates them once per statement (an
        // InitPlan), not once per row.
        return [
            "ALTER TABLE \(table) ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE \(table) FORCE ROW LEVEL SECURITY",
            "DROP POLICY IF EXISTS \"\(policyName)\" ON \(table)",
            "CREATE POLICY \"\(policyName)\" ON \(table) AS PERMISSIVE FOR ALL TO PUBLIC USING (\(condition)) WITH CHECK (\(condition))",
            "DROP POLICY IF EXISTS \"\(guardPolicyName)\" ON \(table)",
            "CREATE POLICY \"\(guardPolicyName)\" ON \(table) AS RESTRICTIVE FOR ALL TO PUBLIC USING (\(condition)) WITH CHECK (\(condition))",
        ]
    }

    /// The statements that create the binding schema (``schemaName``), its key table and functions, and give
    /// `serviceRole` the right to call the three functions it needs and nothing else there:
    ///
    /// - `identity_rls.binding_key`: one row, the SHA-256 verifier of the ``BindingSecret`` and two random MAC
    ///   keys; readable by its owner only.
    /// - `identity_rls.bind(account, tenant, secret)` (`SECURITY DEFINER`): refuses unless `secret` matches the
    ///   verifier, then sets the transaction-local settings `identity.account`, `identity.tenant` and
    ///   `identity.binding`, a MAC of both names with the server process and the transaction's start time. It
    ///   also refuses (SQLSTATE 55000) while the session carries anything of an earlier transaction: a cursor
    ///   `WITH HOLD`, a prepared statement made by SQL (`PREPARE`, also from a `DO` block), a listened channel,
    ///   a role set by `SET ROLE`; the runtime then closes that connection and binds on another.
    /// - `identity_rls.reset_session()` (`SECURITY INVOKER`): clears the caller's session as `DISCARD ALL` does
    ///   (settings, cursors, listeners, advisory locks, sequence caches, temporary tables, the role), but keeps
    ///   cached plans and the prepared statements the client made through the protocol (postgres-nio's
    ///   `PostgresPreparedStatement`s hold the service's SQL, never a request's values). The runtime calls it
    ///   after every transaction, committed or not, before the connection goes back to the pool.
    /// - `identity_rls.current_tenant()`, `identity_rls.current_account()` (`SECURITY DEFINER`, `STABLE`): the
    ///   bound tenant or account when `identity.binding` is the MAC of the settings *in this transaction*;
    ///   otherwise `NULL`. A value set by any other means (`set_config`, `SET`, a setting copied from an earlier
    ///   transaction) fails the MAC and binds nothing.
    ///
    /// Run them (through ``install(on:serviceRole:secret:logger:)``, which also stores the secret's verifier) as
    /// the role that owns the protected tables, or another role the service's role is no member of.
    /// - Throws: ``TenantDatabaseError/invalidIdentifier(_:)`` when `serviceRole` is not a plain identifier.
    public static func installationStatements(serviceRole: String) throws(TenantDatabaseError) -> [String] {
        let service = try SQLIdentifier(serviceRole).quoted
        let schema = schemaName
        // Every function pins its search_path, so that no object the service's role creates can stand in for
        // one it calls; the MAC helper is callable by the owner only.
        let pinned = "SET search_path = pg_catalog, pg_temp"
        return [
            "CREATE SCHEMA IF NOT EXISTS \(schema)",
            "REVOKE ALL ON SCHEMA \(schema) FROM PUBLIC",
            """
            CREATE TABLE IF NOT EXISTS \(schema).binding_key (
                only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
                verifier bytea NOT NULL,
                inner_key bytea NOT NULL CHECK (octet_length(inner_key) >= 32),
                outer_key bytea NOT NULL CHECK (octet_length(outer_key) >= 32))
            """,
            "REVOKE ALL ON TABLE \(schema).binding_key FROM PUBLIC",
            // The message names the server process and the start of the transaction (neither can be chosen by
            // SQL), so a binding is good in its own transaction only; the account's byte length makes the
            // concatenation unambiguous. sha256(outer || sha256(inner || message)) is NMAC-SHA-256, a PRF.
            """
            CREATE OR REPLACE FUNCTION \(schema).mac(account text, tenant text) RETURNS text
            LANGUAGE sql STABLE SECURITY DEFINER \(pinned) AS $$
                SELECT encode(sha256(k.outer_key || sha256(k.inner_key || convert_to(
                    pg_backend_pid()::text || '|'
                    || (extract(epoch FROM transaction_timestamp()) * 1000000)::bigint::text || '|'
                    || octet_length(account)::text || '|' || account || tenant, 'UTF8'))), 'hex')
                FROM \(schema).binding_key k
            $$
            """,
            "REVOKE ALL ON FUNCTION \(schema).mac(text, text) FROM PUBLIC",
            """
            CREATE OR REPLACE FUNCTION \(schema).bind(account text, tenant text, secret bytea) RETURNS boolean
            LANGUAGE plpgsql VOLATILE SECURITY DEFINER \(pinned) AS $$
            BEGIN
                IF account IS NULL OR tenant IS NULL OR account = '' OR tenant = '' OR secret IS NULL
                   OR NOT EXISTS (SELECT 1 FROM \(schema).binding_key WHERE verifier = sha256(secret)) THEN
                    RAISE EXCEPTION 'identity binding refused' USING ERRCODE = '42501';
                END IF;
                -- What a session keeps past a transaction and holds text SQL chose (a cursor WITH HOLD, a
                -- prepared statement made by SQL, a listened channel, a role set with SET ROLE) could hand an
                -- earlier request's rows to this one. reset_session() clears them, and settings and advisory
                -- locks, when a transaction ends; a connection that still carries one is dropped by the
                -- runtime. (Listing settings or locks here would cost more than the rest of the transaction.)
                IF EXISTS (SELECT 1 FROM pg_cursors WHERE is_holdable)
                   OR EXISTS (SELECT 1 FROM pg_prepared_statements WHERE from_sql)
                   OR EXISTS (SELECT 1 FROM pg_listening_channels())
                   OR current_setting('role') <> 'none' THEN
                    RAISE EXCEPTION 'identity binding refused: the connection carries state of an earlier transaction'
                        USING ERRCODE = '55000';
                END IF;
                PERFORM set_config('identity.account', account, true), set_config('identity.tenant', tenant, true),
                        set_config('identity.binding', \(schema).mac(account, tenant), true);
                RETURN true;
            END
            $$
            """,
            "REVOKE ALL ON FUNCTION \(schema).bind(text, text, bytea) FROM PUBLIC",
            """
            CREATE OR REPLACE FUNCTION \(schema).current_tenant() RETURNS text
            LANGUAGE sql STABLE SECURITY DEFINER \(pinned) AS $$
                SELECT s.t FROM (SELECT current_setting('identity.tenant', true) AS t,
                                        current_setting('identity.account', true) AS a,
                                        current_setting('identity.binding', true) AS b) s
                WHERE s.t <> '' AND s.a <> '' AND s.b = \(schema).mac(s.a, s.t)
            $$
            """,
            "REVOKE ALL ON FUNCTION \(schema).current_tenant() FROM PUBLIC",
            """
            CREATE OR REPLACE FUNCTION \(schema).current_account() RETURNS text
            LANGUAGE sql STABLE SECURITY DEFINER \(pinned) AS $$
                SELECT s.a FROM (SELECT current_setting('identity.tenant', true) AS t,
                                        current_setting('identity.account', true) AS a,
                                        current_setting('identity.binding', true) AS b) s
                WHERE s.t <> '' AND s.a <> '' AND s.b = \(schema).mac(s.a, s.t)
            $$
            """,
            "REVOKE ALL ON FUNCTION \(schema).current_account() FROM PUBLIC",
            // The caller's own session, cleared as DISCARD ALL would, except for the prepared statements the
            // client made with the protocol (postgres-nio's PostgresPreparedStatement cache): those hold the
            // service's SQL text, never a request's values. SECURITY INVOKER, so that it may RESET ROLE; no SET
            // clause, which would restore the caller's search_path on exit, so every name is qualified.
            """
            CREATE OR REPLACE FUNCTION \(schema).reset_session() RETURNS void
            LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $$
            DECLARE
                statement record;
            BEGIN
                FOR statement IN SELECT name FROM pg_catalog.pg_prepared_statements WHERE from_sql LOOP
                    EXECUTE pg_catalog.format('DEALLOCATE %I', statement.name);
                END LOOP;
                EXECUTE 'CLOSE ALL';
                RESET ROLE;
                RESET ALL;
                UNLISTEN *;
                PERFORM pg_catalog.pg_advisory_unlock_all();
                -- Cached plans are not discarded: SQL cannot read them, and bind would be planned anew each time.
                DISCARD SEQUENCES;
                DISCARD TEMP;
            END
            $$
            """,
            "REVOKE ALL ON FUNCTION \(schema).reset_session() FROM PUBLIC",
            // Ends a backend of the caller's own role that outlived its transaction's deadline: the runtime calls
            // it with the secret from another connection, because a statement can ignore every timeout its own
            // session sets. Its owner needs pg_signal_backend (hardeningStatements(database:owner:)).
            """
            CREATE OR REPLACE FUNCTION \(schema).end_backend(backend integer, secret bytea) RETURNS boolean
            LANGUAGE plpgsql VOLATILE SECURITY DEFINER \(pinned) AS $$
            BEGIN
                IF secret IS NULL OR NOT EXISTS (SELECT 1 FROM \(schema).binding_key WHERE verifier = sha256(secret)) THEN
                    RAISE EXCEPTION 'identity binding refused' USING ERRCODE = '42501';
                END IF;
                RETURN EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = backend AND a.usename = session_user)
                    AND pg_terminate_backend(backend);
            END
            $$
            """,
            "REVOKE ALL ON FUNCTION \(schema).end_backend(integer, bytea) FROM PUBLIC",
            "GRANT USAGE ON SCHEMA \(schema) TO \(service)",
            """
            GRANT EXECUTE ON FUNCTION \(schema).bind(text, text, bytea), \(schema).current_tenant(),
                \(schema).current_account(), \(schema).reset_session(), \(schema).end_backend(integer, bytea) TO \(service)
            """,
        ]
    }

    /// The statements a superuser runs once per database, in either mode, so that SQL a request sends cannot
    /// reach past its transaction or into another tenant's requests by the ways row-level security and schema
    /// privileges do not cover; ``verify()`` (and, per tenant role, the role-per-tenant check) refuses a set-up
    /// without them:
    ///
    /// - `TEMPORARY` on the database and the large-object functions revoked from `PUBLIC`: both outlive a
    ///   transaction;
    /// - `pg_cancel_backend` and `pg_terminate_backend` revoked from `PUBLIC`: they reach every backend of the same
    ///   role, so every other tenant's request in row-level-security mode;
    /// - the statistics, activity, lock and size functions (`pg_stat_get_*`, `pg_lock_status`, `pg_blocking_pids`,
    ///   `pg_relation_size` and its kin) revoked from `PUBLIC`, so that `pg_stat_activity`, `pg_stat_user_tables`
    ///   and `pg_locks` answer "permission denied": they show other requests' SQL text, what they lock (an
    ///   advisory lock's key can carry data) and how many rows each table holds;
    /// - the WAL position, snapshot, transaction status, database and tablespace size functions revoked: they tell
    ///   when other tenants write, how much, and whether their transactions commit;
    /// - `pg_class` readable without its row counts and sizes (`reltuples`, `relpages`, `relallvisible`),
    ///   `pg_roles` and `pg_user` without the roles' settings (`rolconfig`, `useconfig`), `pg_db_role_setting`
    ///   not at all: a role may store text in its own defaults (`ALTER ROLE CURRENT_USER SET`);
    /// - `owner` may end a backend that outlived its transaction's deadline (`pg_signal_backend`, and the two
    ///   functions it needs), which ``TenantDatabase`` asks through `identity_rls.end_backend` with the binding
    ///   secret.
    ///
    /// The revocations hold for every role of the database; grant back to an operator's role what it needs
    /// (tools that read the whole of `pg_class` or `pg_roles`, such as `psql`'s `\d` and `\du`, need one).
    ///
    /// - Throws: ``TenantDatabaseError/invalidIdentifier(_:)`` when `database` or `owner` is not a plain
    ///   identifier.
    public static func hardeningStatements(database: String, owner: String) throws(TenantDatabaseError) -> [String] {
        let database = try SQLIdentifier(database).quoted
        let owner = try SQLIdentifier(owner).quoted
        let classColumns = [
            "oid", "relname", "relnamespace", "reltype", "reloftype", "relowner", "relam", "relkind", "relnatts",
            "relhasindex", "relisshared", "relpersistence", "relchecks", "relhasrules", "relhastriggers",
            "relhassubclass", "relrowsecurity", "relforcerowsecurity", "relispopulated", "relreplident",
            "relispartition", "relacl", "reloptions",
        ]
        let roleColumns = [
            "oid", "rolname", "rolsuper", "rolinherit", "rolcreaterole", "rolcreatedb", "rolcanlogin",
            "rolreplication", "rolconnlimit", "rolvaliduntil", "rolbypassrls",
        ]
        // Each tells one session of others: what they lock, how big tables are, when and how much the database
        // writes (the WAL position), which transactions run and how they ended.
        let functions = ["pg_lock_status", "pg_blocking_pids", "pg_safe_snapshot_blocking_pids", "pg_relation_size",
                         "pg_total_relation_size", "pg_table_size", "pg_indexes_size", "pg_relation_filenode",
                         "pg_relation_filepath", "pg_database_size", "pg_tablespace_size", "pg_current_wal_lsn",
                         "pg_current_wal_insert_lsn", "pg_current_wal_flush_lsn", "pg_current_snapshot",
                         "txid_current_snapshot", "pg_xact_status", "txid_status", "pg_notification_queue_usage",
                         "pg_snapshot_xip", "txid_snapshot_xip", "pg_snapshot_xmin", "pg_snapshot_xmax",
                         "txid_snapshot_xmin", "txid_snapshot_xmax"]
        let userColumns = ["usename", "usesysid", "usecreatedb", "usesuper", "userepl", "usebypassrls", "passwd", "valuntil"]
        func qualified(_ functions: [String]) -> String {
            functions.map { "pg_catalog.\($0)" }.joined(separator: ", ")
        }
        return [
            "REVOKE TEMPORARY ON DATABASE \(database) FROM PUBLIC",
            "REVOKE EXECUTE ON FUNCTION \(qualified(largeObjectCreators)) FROM PUBLIC",
            "REVOKE EXECUTE ON FUNCTION \(qualified(backendSignals)) FROM PUBLIC",
            """
            DO $$ DECLARE f regprocedure; BEGIN
                FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
                         WHERE p.pronamespace = 'pg_catalog'::regnamespace
                           AND (p.proname LIKE 'pg\\_stat\\_get\\_%' OR p.proname IN (\(functions.map { "'\($0)'" }.joined(separator: ", "))))
                LOOP
                    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
                END LOOP;
            END $$
            """,
            "REVOKE SELECT ON pg_catalog.pg_class FROM PUBLIC",
            "GRANT SELECT (\(classColumns.joined(separator: ", "))) ON pg_catalog.pg_class TO PUBLIC",
            "REVOKE SELECT ON pg_catalog.pg_roles FROM PUBLIC",
            "GRANT SELECT (\(roleColumns.joined(separator: ", "))) ON pg_catalog.pg_roles TO PUBLIC",
            "REVOKE SELECT ON pg_catalog.pg_db_role_setting FROM PUBLIC",
            "REVOKE SELECT ON pg_catalog.pg_user FROM PUBLIC",
            "GRANT SELECT (\(userColumns.joined(separator: ", "))) ON pg_catalog.pg_user TO PUBLIC",
            "GRANT pg_signal_backend TO \(owner)",
            "GRANT EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint), pg_catalog.pg_stat_get_activity(integer) TO \(owner)",
        ]
    }

    /// The functions that make a large object, which outlives every transaction and is read by object ID.
    static let largeObjectCreators = ["lo_create(oid)", "lo_creat(integer)", "lo_from_bytea(oid, bytea)", "lo_import(text)", "lo_import(text, oid)"]
    /// The functions that stop another backend of the same role.
    static let backendSignals = ["pg_cancel_backend(integer)", "pg_terminate_backend(integer, bigint)"]
    /// Functions that show other sessions' SQL text, locks and tables' row counts and sizes (a sample of those
    /// ``hardeningStatements(database:owner:)`` revokes, which ``verify()`` checks).
    static let activityFunctions = [
        "pg_stat_get_activity(integer)", "pg_stat_get_backend_activity(integer)", "pg_lock_status()",
        "pg_stat_get_tuples_inserted(oid)", "pg_stat_get_live_tuples(oid)", "pg_relation_size(regclass)",
        "pg_current_wal_insert_lsn()", "pg_xact_status(xid8)", "pg_current_snapshot()",
        "pg_database_size(oid)",
    ]

    /// Creates or updates the binding schema (``installationStatements(serviceRole:)``) and stores the
    /// verifier of `secret` with two new random MAC keys, in one transaction on `connection`.
    ///
    /// Run it as the role that owns the protected tables (or another role `serviceRole` is no member of), never as
    /// the service's role: that role would then own the key and could forge bindings, which ``verify()`` refuses.
    /// Installing again replaces the secret and the MAC keys: transactions bound before then see no rows.
    ///
    /// ```swift
    /// let secret = TenantDatabase.BindingSecret.generate()   // store secret.base64 with the service
    /// try await TenantDatabase.install(on: ownerConnection, serviceRole: "app_service", secret: secret, logger: logger)
    /// for statement in try TenantDatabase.rowLevelSecurity(table: "documents", tenantColumn: "tenant") {
    ///     try await ownerConnection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
    /// }
    /// ```
    /// - Throws: ``TenantDatabaseError/invalidIdentifier(_:)``; ``TenantDatabaseError/queryFailed(operation:sqlState:message:)``
    ///   or ``TenantDatabaseError/unavailable(reason:)`` from the server (nothing is changed then).
    public static func install(
        on connection: PostgresConnection, serviceRole: String, secret: BindingSecret, logger: Logger
    ) async throws(TenantDatabaseError) {
        let statements = try installationStatements(serviceRole: serviceRole)
        let inner = BindingSecret.generate()
        let outer = BindingSecret.generate()
        try await inOneTransaction(on: connection, operation: "installing \(schemaName)", logger: logger) {
            for statement in statements {
                try await connection.perform(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            let verifier = ByteBuffer(bytes: secret.bytes)
            let innerKey = ByteBuffer(bytes: inner.bytes)
            let outerKey = ByteBuffer(bytes: outer.bytes)
            try await connection.perform("""
                INSERT INTO identity_rls.binding_key (only_row, verifier, inner_key, outer_key)
                VALUES (true, sha256(\(verifier)), \(innerKey), \(outerKey))
                ON CONFLICT (only_row) DO UPDATE
                SET verifier = excluded.verifier, inner_key = excluded.inner_key, outer_key = excluded.outer_key
                """, logger: logger)
        }
    }

    /// Runs `body` between `BEGIN` and `COMMIT`, rolling back when it throws: all of it or nothing.
    static func inOneTransaction(
        on connection: PostgresConnection, operation: String, logger: Logger, _ body: () async throws -> Void
    ) async throws(TenantDatabaseError) {
        do {
            try await connection.perform("BEGIN", logger: logger)
            do {
                try await body()
                try await connection.perform("COMMIT", logger: logger)
            } catch {
                // The statement's error is the one to report; a rollback that fails too means the connection
                // broke, and a broken connection cannot commit what was begun.
                _ = try? await connection.perform("ROLLBACK", logger: logger)
                throw error
            }
        } catch {
            throw TenantDatabaseError.from(error, operation: operation)
        }
    }
}
