import Crypto
import IdentityPolicy
import IdentityRuntime
import PostgresNIO

extension TenantDatabase {
    /// How a ``TenantDatabase`` keeps tenants apart.
    ///
    /// | | ``rowLevelSecurity`` | ``rolePerTenant(_:)`` |
    /// |---|---|---|
    /// | tables | shared, a tenant column | one schema per tenant |
    /// | the body runs as | the service's role, one pool | the tenant's own login role, a pool per tenant |
    /// | another tenant's rows | row-level security | no privilege on its schema |
    /// | planner counts, sequences, statistics, activity, role defaults | open (listed in the article) | refused by privileges |
    public enum Isolation: Sendable {
        /// Every tenant's rows in shared tables, filtered by row-level security for one service role.
        case rowLevelSecurity
        /// Each tenant's transactions run as a login role of that tenant, over a schema of its own that the
        /// other tenants' roles have no privilege on.
        case rolePerTenant(TenantRoles)
    }

    /// The role-and-schema-per-tenant set-up: where the tenants' login roles connect, how their names and
    /// passwords are derived, and how many pools the runtime keeps.
    ///
    /// Each tenant `t` has one login role and one schema, both named ``name(for:)`` (the ``prefix``, `_`, and 20
    /// hex digits of HMAC-SHA-256 under ``secret`` of the tenant's canonical name), and the role logs in with
    /// ``password(for:)``. The runtime computes both when a tenant's first transaction comes and opens a pool of
    /// its own for that role (at most ``maximumPools`` at once, each closed after ``idleTimeout`` unused). The role
    /// is a member of no other role and owns nothing: its schema and tables belong to ``owner``, so its SQL can
    /// neither change them nor reach any other tenant's.
    ///
    /// > Warning: Whoever holds ``secret`` can log in as every tenant. Keep it with the service's other secrets.
    public struct TenantRoles: Sendable {
        /// Where the pools connect: host, port, database, TLS and pool options. Its `username` and `password`
        /// are replaced by each tenant's.
        public var connection: PostgresClient.Configuration
        /// The role that owns every tenant's schema and tables (it need not log in).
        public let owner: String
        /// How every tenant role's and schema's name starts (a plain identifier of at most 40 bytes).
        public let prefix: String
        /// The key that derives the roles' names and passwords.
        public let secret: BindingSecret
        /// How many tenants' pools are open at most; a transaction of another tenant while every one is in use is
        /// refused with ``TenantDatabaseError/unavailable(reason:)``.
        public var maximumPools: Int
        /// How long a tenant's pool stays open unused before it is closed.
        public var idleTimeout: Duration

        /// - Throws: ``TenantDatabaseError/invalidIdentifier(_:)`` for an owner or prefix that is not a plain
        ///   identifier (or a prefix over 40 bytes); ``TenantDatabaseError/unsafeConfiguration(reason:)`` for
        ///   fewer than one pool or a timeout that is not positive.
        public init(
            connection: PostgresClient.Configuration, owner: String, prefix: String = "tenant", secret: BindingSecret,
            maximumPools: Int = 32, idleTimeout: Duration = .seconds(60)
        ) throws(TenantDatabaseError) {
            _ = try SQLIdentifier(owner)
            guard prefix.utf8.count <= 40 else { throw .invalidIdentifier(prefix) }
            _ = try SQLIdentifier(prefix)
            guard maximumPools >= 1, idleTimeout > .zero else {
                throw .unsafeConfiguration(reason: "a role-per-tenant set-up needs at least one pool and a positive idle timeout")
            }
            self.connection = connection
            self.owner = owner
            self.prefix = prefix
            self.secret = secret
            self.maximumPools = maximumPools
            self.idleTimeout = idleTimeout
        }

        /// The name of `tenant`'s login role and schema.
        public func name(for tenant: TenantID) -> String {
            let digest = mac("role", tenant)
            return prefix + "_" + Self.hex(digest.prefix(10))
        }

        /// The password `tenant`'s login role logs in with (64 hex digits).
        public func password(for tenant: TenantID) -> String {
            Self.hex(mac("password", tenant))
        }

        private func mac(_ purpose: String, _ tenant: TenantID) -> [UInt8] {
            let message = Array((purpose + "\u{0}" + TenantDatabase.canonical(Identity(tenant.rawValue))).utf8)
            let key = SymmetricKey(data: secret.bytes)
            return Array(HMAC<SHA256>.authenticationCode(for: message, using: key))
        }

        /// Lower-case hex, two digits a byte: a plain identifier's characters, nothing to quote.
        private static func hex(_ bytes: some Sequence<UInt8>) -> String {
            let digits = Array("0123456789abcdef")
            return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
        }
    }
}
