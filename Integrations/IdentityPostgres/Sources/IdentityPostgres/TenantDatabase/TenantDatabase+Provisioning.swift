import IdentityPolicy
import IdentityRuntime
import Logging
import PostgresNIO

extension TenantDatabase {
    /// The statements that give `tenant` its login role and schema, both named `roles.name(for: tenant)`: the
    /// role (`LOGIN` with `roles.password(for:)`, no other attribute, a member of no role, at most the pool's
    /// connections and two), the schema owned by
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
        // The pool's connections and two to spare (one closing while its replacement opens): one tenant cannot
        // take the server's connections from the others.
        let limit = roles.connection.options.maximumConnections + 2
        return [
            "CREATE ROLE \(name) LOGIN PASSWORD '\(password)' NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION NOINHERIT CONNECTION LIMIT \(limit)",
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
                \(schemaName).current_account(), \(schemaName).reset_session(), \(schemaName).end_backend(integer, bytea) TO \(name)
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
