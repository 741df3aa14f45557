import IdentityPolicy
import IdentityRuntime
import Logging
import PostgresNIO

extension TenantDatabase.TenantRoles {
    /// The statements a superuser runs once per database for the role-per-tenant mode, so that a tenant role's
    /// SQL learns nothing of other tenants from the shared catalogs and cannot keep data past its transaction:
    ///
    /// - `TEMPORARY` on the database and the large-object functions revoked from `PUBLIC` (both outlive a
    ///   transaction);
    /// - the statistics, activity, lock and size functions (`pg_stat_get_*`, `pg_lock_status`,
    ///   `pg_blocking_pids`, `pg_relation_size` and its kin) revoked from `PUBLIC`, so `pg_stat_activity`,
    ///   `pg_stat_user_tables` and `pg_locks` answer "permission denied";
    /// - `pg_class` readable by `PUBLIC` without its row counts and sizes (`reltuples`, `relpages`,
    ///   `relallvisible`), `pg_roles` without the roles' settings (`rolconfig`), `pg_db_role_setting` not at all:
    ///   a role may store text in its own defaults (`ALTER ROLE CURRENT_USER SET`), and no other tenant reads it.
    ///
    /// They hold for every role of that database; grant back to an operator's role what it needs. Tools that
    /// read the whole of `pg_class` or `pg_roles` (`psql`'s `\d`, `\du`) need such a role.
    /// - Throws: ``TenantDatabaseError/invalidIdentifier(_:)`` when `database` is not a plain identifier.
    public static func hardeningStatements(database: String) throws(TenantDatabaseError) -> [String] {
        let database = try SQLIdentifier(database).quoted
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
        let functions = ["pg_lock_status", "pg_blocking_pids", "pg_safe_snapshot_blocking_pids", "pg_relation_size",
                         "pg_total_relation_size", "pg_table_size", "pg_indexes_size", "pg_relation_filenode",
                         "pg_relation_filepath"]
        return [
            "REVOKE TEMPORARY ON DATABASE \(database) FROM PUBLIC",
            "REVOKE EXECUTE ON FUNCTION \(TenantDatabase.largeObjectCreators.map { "pg_catalog.\($0)" }.joined(separator: ", ")) FROM PUBLIC",
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
        ]
    }
}

extension TenantDatabase {
    /// The statements that give `tenant` its login role and schema, both named `roles.name(for: tenant)`: the
    /// role (`LOGIN` with `roles.password(for:)`, no other attribute, a member of no role), the schema owned by
    /// `roles.owner`, `tables` created in it as the owner, and the role's privileges: `USAGE` on its schema,
    /// `SELECT`, `INSERT`, `UPDATE`, `DELETE` on its tables, `USAGE` on their sequences, and the binding
    /// functions of ``schemaName``.
    ///
    /// - Parameter tables: `CREATE TABLE` (and other DDL) statements with unqualified names, run with the
    ///   tenant's schema as `search_path`; the same for every tenant. Column defaults may use
    ///   `identity_rls.current_tenant()` and `current_account()`, and ``rowLevelSecurity(table:tenantColumn:accountColumn:)``'s
    ///   statements may follow for rows of one account.
    public static func provisioningStatements(
        for tenant: TenantID, roles: TenantRoles, tables: [String]
    ) throws(TenantDatabaseError) -> [String] {
        let name = try SQLIdentifier(roles.name(for: tenant)).quoted
        let owner = try SQLIdentifier(roles.owner).quoted
        // Hex digits only: nothing in the password needs quoting.
        let password = roles.password(for: tenant)
        return [
            "CREATE ROLE \(name) LOGIN PASSWORD '\(password)' NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION NOINHERIT",
            "CREATE SCHEMA \(name) AUTHORIZATION \(owner)",
            "SET LOCAL ROLE \(owner)",
            "SET LOCAL search_path = \(name)",
        ] + tables + [
            "RESET ROLE",
            "SET LOCAL search_path = pg_catalog",
            "GRANT USAGE ON SCHEMA \(name) TO \(name)",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \(name) TO \(name)",
            "GRANT USAGE ON ALL SEQUENCES IN SCHEMA \(name) TO \(name)",
            "GRANT USAGE ON SCHEMA \(schemaName) TO \(name)",
            """
            GRANT EXECUTE ON FUNCTION \(schemaName).bind(text, text, bytea), \(schemaName).current_tenant(),
                \(schemaName).current_account(), \(schemaName).reset_session() TO \(name)
            """,
        ]
    }

    /// Provisions `tenant` (``provisioningStatements(for:roles:tables:)``) in one transaction on `connection`,
    /// which must be a superuser's (or a role with `CREATEROLE` that is a member of `roles.owner`): all of it or
    /// nothing.
    public static func provision(
        _ tenant: TenantID, roles: TenantRoles, tables: [String], on connection: PostgresConnection, logger: Logger
    ) async throws(TenantDatabaseError) {
        try await inOneTransaction(on: connection, operation: "provisioning a tenant", logger: logger) {
            for statement in try provisioningStatements(for: tenant, roles: roles, tables: tables) {
                try await connection.perform(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
        }
    }

    /// Moves `tenant`'s rows of a shared table (row-level-security mode) into the table of the same columns in
    /// its own schema, in one transaction: every row whose `tenantColumn` is the tenant's canonical name is
    /// inserted there (`OVERRIDING SYSTEM VALUE`, so identity columns keep their values) and deleted from the
    /// shared table. Run it as a superuser (row-level security hides the rows from everyone else) while the
    /// service does not write that tenant.
    /// - Returns: how many rows moved.
    public static func moveRows(
        of tenant: TenantID, roles: TenantRoles, from sharedTable: String, tenantColumn: String, to table: String,
        on connection: PostgresConnection, logger: Logger
    ) async throws(TenantDatabaseError) -> Int {
        let source = try SQLTableName(sharedTable).quoted
        let column = try SQLIdentifier(tenantColumn).quoted
        let target = "\(try SQLIdentifier(roles.name(for: tenant)).quoted).\(try SQLIdentifier(table).quoted)"
        let canonicalTenant = canonical(Identity(tenant.rawValue))
        var moved = 0
        try await inOneTransaction(on: connection, operation: "moving a tenant's rows", logger: logger) {
            let inserted = try await connection.query(PostgresQuery(
                unsafeSQL: "INSERT INTO \(target) OVERRIDING SYSTEM VALUE SELECT * FROM \(source) WHERE \(column) = $1",
                binds: binds(canonicalTenant)), logger: logger)
            for try await _ in inserted {}
            let deleted = try await connection.query(PostgresQuery(
                unsafeSQL: "DELETE FROM \(source) WHERE \(column) = $1 RETURNING 1", binds: binds(canonicalTenant)), logger: logger)
            for try await _ in deleted { moved += 1 }
        }
        return moved
    }

    private static func binds(_ value: String) -> PostgresBindings {
        var bindings = PostgresBindings()
        bindings.append(value)
        return bindings
    }
}
