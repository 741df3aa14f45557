import PostgresNIO
import Synchronization

extension TenantDatabase {
    /// Checks, on a connection of the pool, that row-level security holds for the pool's role; until it succeeds
    /// ``withTransaction(isolation:_:)`` refuses with ``TenantDatabaseError/notVerified``. Call it at start-up
    /// (a service that cannot verify should not start).
    ///
    /// It refuses (``TenantDatabaseError/unsafeConfiguration(reason:)``) when:
    /// - the role, or a role it is a member of (directly or not, also through the session user), is a superuser
    ///   or has `BYPASSRLS`;
    /// - the role may create temporary tables (`TEMPORARY` on the database, which `PUBLIC` has by default): a
    ///   temporary table outlives the transaction and would carry one request's rows to the next on the
    ///   connection;
    /// - the role may create large objects (`lo_create`, `lo_creat`, `lo_from_bytea`, `lo_import`, which
    ///   `PUBLIC` may call by default) or read or write one: a large object outlives the transaction and every
    ///   connection, and any session of the role reads it by its ID;
    /// - the role may cancel or terminate backends (`pg_cancel_backend`, `pg_terminate_backend`, which `PUBLIC`
    ///   may call by default and which reach every backend of the same role, so every other tenant's request;
    ///   or membership in `pg_signal_backend`);
    /// - `track_activities` is on for the role's sessions, or the role may change it: `pg_stat_activity` would
    ///   show it the SQL text, literals included, of every request the other connections of the pool run;
    /// - the binding schema is missing, the role may create objects in it, is a member of its owner, may read
    ///   or change the binding key, or may call the MAC helper; or the role may not call `identity_rls.bind`;
    /// - a function in the schema is not `SECURITY DEFINER` or not owned by the schema's owner;
    /// - a protected table is missing or not an ordinary table, does not have row-level security enabled and
    ///   forced, lacks the restrictive guard policy (``guardPolicyName``), is owned by the role or a role it is a
    ///   member of (its owner could turn the policies off), or may be truncated by the role (`TRUNCATE` ignores
    ///   row-level security).
    ///
    /// In ``Isolation/rolePerTenant(_:)`` mode there is no shared role to check: `verify()` only records that
    /// start-up checked the configuration, and each tenant's pool checks its role before it serves that tenant's
    /// first transaction (``TenantDatabase/provision(_:roles:tables:on:logger:)`` lists what is refused).
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

    /// The stores and signals that reach past one transaction of the role: large objects, other backends,
    /// other sessions' SQL text (``hardeningStatements(serviceRole:database:)`` closes them).
    private func verifySessionReach(on connection: PostgresConnection) async throws {
        func unsafe(_ reason: String) -> TenantDatabaseError { .unsafeConfiguration(reason: reason) }
        let fix = "run TenantDatabase.hardeningStatements(serviceRole:database:) as a superuser"
        for function in Self.largeObjectCreators {
            let rows = try await connection.query(
                "SELECT has_function_privilege(current_user, \("pg_catalog." + function), 'EXECUTE')", logger: logger).collect()
            if try rows.first?.decode(Bool.self) ?? true {
                throw unsafe("the role may call \(function), and a large object outlives the transaction: \(fix)")
            }
        }
        for function in Self.backendSignals {
            let rows = try await connection.query(
                "SELECT has_function_privilege(current_user, \("pg_catalog." + function), 'EXECUTE')", logger: logger).collect()
            if try rows.first?.decode(Bool.self) ?? true {
                throw unsafe("the role may call \(function), which reaches every backend of the role, so other tenants' requests: \(fix)")
            }
        }
        let rows = try await connection.query("""
            SELECT pg_has_role(current_user, 'pg_signal_backend', 'MEMBER') OR pg_has_role(session_user, 'pg_signal_backend', 'MEMBER'),
                   EXISTS (SELECT 1 FROM pg_largeobject_metadata m
                           WHERE pg_has_role(current_user, m.lomowner, 'MEMBER')
                              OR EXISTS (SELECT 1 FROM aclexplode(m.lomacl) a
                                         WHERE a.grantee = 0 OR pg_has_role(current_user, a.grantee, 'MEMBER'))),
                   current_setting('track_activities') <> 'off',
                   has_parameter_privilege(current_user, 'track_activities', 'SET')
            """, logger: logger).collect()
        guard let row = rows.first else { throw unsafe("the session checks returned nothing") }
        let (signals, largeObjects, tracked, mayTrack) = try row.decode((Bool, Bool, Bool, Bool).self)
        if signals { throw unsafe("the role is a member of pg_signal_backend, which may stop other tenants' requests") }
        if largeObjects { throw unsafe("the role may read or write a large object, which outlives the transaction: drop it or revoke the role's access") }
        if tracked { throw unsafe("track_activities is on for the role: pg_stat_activity shows it other requests' SQL: \(fix)") }
        if mayTrack { throw unsafe("the role may set track_activities, so turn pg_stat_activity's SQL text back on") }
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
                   EXISTS (SELECT 1 FROM pg_auth_members m WHERE m.member = r.oid),
                   has_database_privilege(current_database(), 'CREATE'),
                   has_database_privilege(current_database(), 'TEMPORARY'),
                   EXISTS (SELECT 1 FROM pg_namespace n WHERE has_schema_privilege(n.oid, 'CREATE')),
                   EXISTS (SELECT 1 FROM pg_namespace n WHERE starts_with(n.nspname, \(roles.prefix + "_"))
                           AND n.nspname <> \(role) AND has_schema_privilege(n.oid, 'USAGE')),
                   coalesce((SELECT n.nspowner = (SELECT o.oid FROM pg_roles o WHERE o.rolname = \(roles.owner))
                             FROM pg_namespace n WHERE n.nspname = \(role)), false),
                   has_function_privilege('pg_catalog.lo_create(oid)', 'EXECUTE')
                       OR has_function_privilege('pg_catalog.lo_creat(integer)', 'EXECUTE')
                       OR has_function_privilege('pg_catalog.lo_from_bytea(oid, bytea)', 'EXECUTE'),
                   has_function_privilege('pg_catalog.pg_stat_get_activity(integer)', 'EXECUTE')
                       OR has_function_privilege('pg_catalog.pg_lock_status()', 'EXECUTE')
                       OR has_function_privilege('pg_catalog.pg_stat_get_tuples_inserted(oid)', 'EXECUTE')
                       OR has_function_privilege('pg_catalog.pg_relation_size(regclass)', 'EXECUTE')
                       OR has_column_privilege('pg_catalog.pg_class', 'reltuples', 'SELECT'),
                   has_table_privilege('pg_catalog.pg_db_role_setting', 'SELECT')
                       OR has_column_privilege('pg_catalog.pg_roles', 'rolconfig', 'SELECT')
            FROM pg_roles r WHERE r.rolname = session_user
            """, logger: logger).collect()
        guard let row = rows.first else { throw unsafe("the session's role is not among pg_roles") }
        let (isRole, privileged, member, mayCreate, mayTemporary, mayCreateInSchema, reachesOthers, schemaSound, largeObjects, statistics, settings)
            = try row.decode((Bool, Bool, Bool, Bool, Bool, Bool, Bool, Bool, Bool, Bool, Bool).self)
        if !isRole { throw unsafe("the pool's sessions run as another role") }
        if privileged { throw unsafe("is a superuser or has BYPASSRLS, CREATEROLE, CREATEDB or REPLICATION") }
        if member { throw unsafe("is a member of another role") }
        if mayCreate || mayCreateInSchema { throw unsafe("may create objects in the database or in a schema") }
        if mayTemporary { throw unsafe("may create temporary tables: run TenantRoles.hardeningStatements(database:) as a superuser") }
        if reachesOthers { throw unsafe("may use a schema other than its own") }
        if !schemaSound { throw unsafe("its schema is missing or not owned by \(roles.owner): provision the tenant") }
        if largeObjects { throw unsafe("may create large objects: run TenantRoles.hardeningStatements(database:) as a superuser") }
        if statistics { throw unsafe("may read other sessions' activity, locks or table statistics: run TenantRoles.hardeningStatements(database:) as a superuser") }
        if settings { throw unsafe("may read the roles' settings: run TenantRoles.hardeningStatements(database:) as a superuser") }
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
        let temporary = try await connection.query(
            "SELECT has_database_privilege(current_user, current_database(), 'TEMPORARY')", logger: logger).collect()
        if try temporary.first?.decode(Bool.self) ?? true {
            throw unsafe("the role may create temporary tables, which outlive a transaction on a pooled connection: REVOKE TEMPORARY ON DATABASE ... FROM PUBLIC")
        }
        try await verifySessionReach(on: connection)
        if ownsSchema { throw unsafe("the role is a member of the owner of \(schema)") }
        if mayCreate { throw unsafe("the role may create objects in \(schema)") }
        if mayTouchKey { throw unsafe("the role has privileges on \(schema).binding_key") }
        if mayMAC { throw unsafe("the role may call \(schema).mac") }
        if !mayBind { throw unsafe("the role may not call \(schema).bind: grant it with installationStatements(serviceRole:)") }
        if !functionsSound { throw unsafe("a function in \(schema) other than reset_session is not SECURITY DEFINER, or one is not owned by the schema's owner") }
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
