import PostgresNIO
import Synchronization

extension TenantDatabase {
    /// Checks, on a connection of the pool, that row-level security holds for the pool's role; until it succeeds
    /// ``withTransaction(isolation:_:)`` refuses with ``TenantDatabaseError/notVerified``. Call it at start-up
    /// (a service that cannot verify should not start).
    ///
    /// It refuses (``TenantDatabaseError/unsafeConfiguration(reason:)``) when:
    /// - the role, or a role it is a member of (directly or not, also through the session user), is a superuser
    ///   or has `BYPASSRLS`; or the role is a member of any role at all (privileges reached by `SET ROLE` through
    ///   a membership are not the role's own, so they would go unchecked);
    /// - the role may create objects in the database or in any schema (a table there outlives the transaction,
    ///   and a function there could stand in for one the runtime calls);
    /// - the role may create temporary tables (`TEMPORARY` on the database, which `PUBLIC` has by default): a
    ///   temporary table outlives the transaction and would carry one request's rows to the next on the
    ///   connection;
    /// - the role may create large objects (`lo_create`, `lo_creat`, `lo_from_bytea`, `lo_import`, which
    ///   `PUBLIC` may call by default) or read or write one, or `lo_compat_privileges` is on: a large object
    ///   outlives the transaction and every connection, and any session of the role reads it by its ID;
    /// - the role may cancel or terminate backends (`pg_cancel_backend`, `pg_terminate_backend`, which `PUBLIC`
    ///   may call by default and which reach every backend of the same role, so every other tenant's request;
    ///   or membership in `pg_signal_backend`);
    /// - the role may read other sessions' activity, locks or table statistics (`pg_stat_get_*`,
    ///   `pg_lock_status`, the size functions, `pg_class`'s counts) or the roles' settings: they show other
    ///   requests' SQL text and what they lock, and count every tenant's rows;
    /// - the runtime could not end a backend that outlives its deadline (`identity_rls.end_backend` not callable,
    ///   or the schema's owner not a member of `pg_signal_backend`);
    /// - the binding schema is missing, the role may create objects in it, is a member of its owner, may read
    ///   or change the binding key, or may call the MAC helper; or the role may not call `identity_rls.bind`;
    /// - a function in the schema is not `SECURITY DEFINER` or not owned by the schema's owner;
    /// - a protected table is missing or not an ordinary table, does not have row-level security enabled and
    ///   forced, lacks the restrictive guard policy (``guardPolicyName``), is owned by the role or a role it is a
    ///   member of (its owner could turn the policies off), or may be truncated by the role (`TRUNCATE` ignores
    ///   row-level security).
    ///
    /// ``hardeningStatements(database:owner:)`` closes the stores, signals and catalogs above.
    ///
    /// In ``Isolation/rolePerTenant(_:)`` mode there is no shared role to check: `verify()` only records that
    /// start-up checked the configuration, and each tenant's pool checks its role (the same session checks, and
    /// its schema's) before it serves that tenant's first transaction.
    ///
    /// > Note: It checks the set-up as it is now. Changing roles or tables later (as their owner) is not
    /// > noticed until the next `verify()`.
    public func verify() async throws(TenantDatabaseError) {
        // Not verified while the checks run, nor after one fails: a set-up found unsafe later stops the
        // transactions an earlier verify() allowed.
        verified.store(false, ordering: .releasing)
        guard let client else {
            verified.store(true, ordering: .releasing)
            return
        }
        do {
            try await client.withConnection { connection in
                try await self.verify(on: connection)
            }
        } catch let error as TenantDatabaseError {
            throw error
        } catch {
            throw .from(error, operation: "verifying the tenant database")
        }
        verified.store(true, ordering: .releasing)
    }

    /// The stores, signals and catalogs that reach past one transaction of the session's role, whatever the mode:
    /// memberships, objects it may create, temporary tables, large objects, other backends, other sessions'
    /// activity and statistics, the roles' settings, and the runtime's way to end a backend past its deadline.
    func verifySessionReach(on connection: PostgresConnection) async throws {
        func unsafe(_ reason: String) -> TenantDatabaseError { .unsafeConfiguration(reason: reason) }
        let fix = "run TenantDatabase.hardeningStatements(database:owner:) as a superuser"
        let functions = Self.largeObjectCreators.map { ($0, "a large object outlives the transaction") }
            + Self.backendSignals.map { ($0, "it reaches every backend of the role, so other tenants' requests") }
            + Self.activityFunctions.map { ($0, "it shows other requests' SQL text, locks or row counts") }
        for (function, why) in functions {
            let rows = try await connection.query(
                "SELECT has_function_privilege(current_user, \("pg_catalog." + function), 'EXECUTE')", logger: logger).collect()
            if try rows.first?.decode(Bool.self) ?? true { throw unsafe("the role may call \(function): \(why): \(fix)") }
        }
        let rows = try await connection.query("""
            SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles r ON r.oid = m.member
                           WHERE r.rolname = current_user OR r.rolname = session_user),
                   has_database_privilege(current_database(), 'CREATE')
                       OR EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n WHERE has_schema_privilege(n.oid, 'CREATE')),
                   has_database_privilege(current_database(), 'TEMPORARY'),
                   EXISTS (SELECT 1 FROM pg_catalog.pg_largeobject_metadata m
                           WHERE pg_has_role(current_user, m.lomowner, 'MEMBER')
                              OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(m.lomacl) a
                                         WHERE a.grantee = 0 OR pg_has_role(current_user, a.grantee, 'MEMBER')))
                       OR pg_catalog.current_setting('lo_compat_privileges') <> 'off',
                   has_column_privilege('pg_catalog.pg_class', 'reltuples', 'SELECT')
                       OR has_column_privilege('pg_catalog.pg_class', 'relpages', 'SELECT'),
                   has_table_privilege('pg_catalog.pg_db_role_setting', 'SELECT')
                       OR has_column_privilege('pg_catalog.pg_roles', 'rolconfig', 'SELECT')
                       OR has_column_privilege('pg_catalog.pg_user', 'useconfig', 'SELECT'),
                   to_regprocedure('identity_rls.end_backend(integer, bytea)') IS NOT NULL
                       AND has_function_privilege('identity_rls.end_backend(integer, bytea)', 'EXECUTE')
                       AND EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n WHERE n.nspname = 'identity_rls'
                                   AND pg_has_role(n.nspowner, 'pg_signal_backend', 'MEMBER'))
            """, logger: logger).collect()
        guard let row = rows.first else { throw unsafe("the session checks returned nothing") }
        let (member, mayCreate, mayTemporary, largeObjects, counts, settings, mayEnd)
            = try row.decode((Bool, Bool, Bool, Bool, Bool, Bool, Bool).self)
        if member { throw unsafe("the role is a member of another role (SET ROLE would reach privileges not checked here)") }
        if mayCreate { throw unsafe("the role may create objects in the database or in a schema") }
        if mayTemporary {
            throw unsafe("the role may create temporary tables, which outlive a transaction on a pooled connection: REVOKE TEMPORARY ON DATABASE ... FROM PUBLIC")
        }
        if largeObjects { throw unsafe("the role may read or write a large object (or lo_compat_privileges is on), which outlives the transaction") }
        if counts { throw unsafe("the role may read pg_class's row counts: \(fix)") }
        if settings { throw unsafe("the role may read the roles' settings: \(fix)") }
        if !mayEnd {
            throw unsafe("the runtime could not end a backend past its deadline (identity_rls.end_backend, its owner in pg_signal_backend): reinstall the schema and \(fix)")
        }
    }

    /// Checks, on a connection of a tenant's pool, that its login role reaches nothing beyond its own schema:
    /// refused (``TenantDatabaseError/unsafeConfiguration(reason:)``) when the session's role is not `role`, is a
    /// superuser, has `BYPASSRLS`, `CREATEROLE`, `CREATEDB` or `REPLICATION`, is a member of any role, may create
    /// objects in the database or in any schema, may create temporary tables or large objects, may use another
    /// tenant's schema (one named with ``TenantRoles/prefix``), may read other sessions' activity, locks or statistics or the roles' settings; or when its
    /// schema is missing or not owned by ``TenantRoles/owner``, or a protected table is missing there or owned
    /// by the role.
    func verifyTenantRole(_ role: String, on connection: PostgresConnection) async throws {
        func unsafe(_ reason: String) -> TenantDatabaseError {
            .unsafeConfiguration(reason: "the tenant role \(role): \(reason)")
        }
        guard case let .rolePerTenant(roles) = isolation else { return }
        let rows = try await connection.query("""
            SELECT session_user = \(role) AND current_user = \(role),
                   r.rolsuper OR r.rolbypassrls OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication,
                   EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n WHERE starts_with(n.nspname, \(roles.prefix + "_"))
                           AND n.nspname <> \(role) AND has_schema_privilege(n.oid, 'USAGE'))
                       OR EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                                  WHERE n.nspname NOT IN (\(role), 'pg_catalog', 'information_schema')
                                    AND has_schema_privilege(n.oid, 'USAGE')
                                    AND has_table_privilege(c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')),
                   coalesce((SELECT n.nspowner = (SELECT o.oid FROM pg_catalog.pg_roles o WHERE o.rolname = \(roles.owner))
                             FROM pg_catalog.pg_namespace n WHERE n.nspname = \(role)), false)
            FROM pg_catalog.pg_roles r WHERE r.rolname = session_user
            """, logger: logger).collect()
        guard let row = rows.first else { throw unsafe("the session's role is not among pg_roles") }
        let (isRole, privileged, reachesOthers, schemaSound) = try row.decode((Bool, Bool, Bool, Bool).self)
        if !isRole { throw unsafe("the pool's sessions run as another role") }
        if privileged { throw unsafe("is a superuser or has BYPASSRLS, CREATEROLE, CREATEDB or REPLICATION") }
        if reachesOthers { throw unsafe("may use another tenant's schema, or a table outside its own schema") }
        if !schemaSound { throw unsafe("its schema is missing or not owned by \(roles.owner): provision the tenant") }
        do {
            try await verifySessionReach(on: connection)
            try await verifyBindingSchema(on: connection)
        } catch let TenantDatabaseError.unsafeConfiguration(reason) {
            throw unsafe(reason)
        }
        for table in tables {
            let tableRows = try await connection.query("""
                SELECT c.relowner = (SELECT r.oid FROM pg_roles r WHERE r.rolname = session_user)
                FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = \(role) AND c.relname = \(table.table.name)
                """, logger: logger).collect()
            guard let tableRow = tableRows.first else { throw unsafe("its schema has no table \(table)") }
            if try tableRow.decode(Bool.self) { throw unsafe("owns \(table), so may change its policies") }
        }
    }

    /// The binding schema: present, not the role's, nothing in it the role may create, read, change or call but
    /// what a transaction needs.
    private func verifyBindingSchema(on connection: PostgresConnection) async throws {
        func unsafe(_ reason: String) -> TenantDatabaseError { .unsafeConfiguration(reason: reason) }
        let schema = Self.schemaName
        let schemaRows = try await connection.query("""
            SELECT pg_has_role(current_user, n.nspowner, 'MEMBER') OR pg_has_role(session_user, n.nspowner, 'MEMBER'),
                   has_schema_privilege(current_user, n.oid, 'CREATE'),
                   has_table_privilege(current_user, 'identity_rls.binding_key', 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'),
                   has_function_privilege(current_user, 'identity_rls.mac(text, text)', 'EXECUTE'),
                   has_function_privilege(current_user, 'identity_rls.bind(text, text, bytea)', 'EXECUTE'),
                   NOT EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = n.oid
                               AND ((NOT p.prosecdef AND p.proname <> 'reset_session') OR p.proowner <> n.nspowner))
            FROM pg_namespace n WHERE n.nspname = \(schema)
            """, logger: logger).collect()
        guard let row = schemaRows.first else {
            throw unsafe("the schema \(schema) is missing: run TenantDatabase.install(on:serviceRole:secret:logger:) as the tables' owner")
        }
        let (ownsSchema, mayCreate, mayTouchKey, mayMAC, mayBind, functionsSound) = try row.decode((Bool, Bool, Bool, Bool, Bool, Bool).self)
        if ownsSchema { throw unsafe("the role is a member of the owner of \(schema)") }
        if mayCreate { throw unsafe("the role may create objects in \(schema)") }
        if mayTouchKey { throw unsafe("the role has privileges on \(schema).binding_key") }
        if mayMAC { throw unsafe("the role may call \(schema).mac") }
        if !mayBind { throw unsafe("the role may not call \(schema).bind: grant it with installationStatements(serviceRole:)") }
        if !functionsSound { throw unsafe("a function in \(schema) other than reset_session is not SECURITY DEFINER, or one is not owned by the schema's owner") }
    }

    private func verify(on connection: PostgresConnection) async throws {
        func unsafe(_ reason: String) -> TenantDatabaseError { .unsafeConfiguration(reason: reason) }
        let roles = try await connection.query("""
            SELECT r.rolname, r.rolsuper, r.rolbypassrls FROM pg_roles r
            WHERE pg_has_role(current_user, r.oid, 'MEMBER') OR pg_has_role(session_user, r.oid, 'MEMBER')
            ORDER BY r.rolsuper DESC, r.rolbypassrls DESC, r.rolname
            """, logger: logger)
        for try await (name, isSuperuser, bypassesRLS) in roles.decode((String, Bool, Bool).self) {
            if isSuperuser { throw unsafe("the role \(String(reflecting: name)) is a superuser") }
            if bypassesRLS { throw unsafe("the role \(String(reflecting: name)) has BYPASSRLS") }
        }
        try await verifyBindingSchema(on: connection)
        try await verifySessionReach(on: connection)
        for table in tables {
            let tableRows = try await connection.query("""
                SELECT c.relkind::text, c.relrowsecurity, c.relforcerowsecurity,
                       pg_has_role(current_user, c.relowner, 'MEMBER') OR pg_has_role(session_user, c.relowner, 'MEMBER'),
                       has_table_privilege(current_user, c.oid, 'TRUNCATE'),
                       EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = \(Self.guardPolicyName)
                               AND NOT p.polpermissive AND p.polcmd = '*')
                FROM pg_class c WHERE c.oid = to_regclass(\(table.quoted))
                """, logger: logger).collect()
            guard let row = tableRows.first else { throw unsafe("the protected table \(table) does not exist") }
            let (kind, enabled, forced, owns, mayTruncate, guarded) = try row.decode((String, Bool, Bool, Bool, Bool, Bool).self)
            if kind != "r" { throw unsafe("\(table) is not an ordinary table (partitions and views are not checked)") }
            if !enabled || !forced { throw unsafe("\(table) does not have row-level security enabled and forced") }
            if owns { throw unsafe("the role is a member of the owner of \(table), which may turn its policies off") }
            if mayTruncate { throw unsafe("the role may TRUNCATE \(table), which ignores row-level security") }
            if !guarded { throw unsafe("\(table) lacks the restrictive policy \(Self.guardPolicyName)") }
        }
    }
}
