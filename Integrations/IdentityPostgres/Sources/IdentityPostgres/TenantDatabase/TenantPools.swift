import IdentityPolicy
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// One `PostgresClient` per tenant role, opened on a tenant's first transaction, at most
/// `TenantRoles.maximumPools` at once, closed when unused for `TenantRoles.idleTimeout` or when a new tenant
/// needs the place (the least recently used idle one goes).
final class TenantPools: Sendable {
    struct Lease: Sendable {
        let role: String
        let client: PostgresClient
        /// Whether the role's privileges were checked on this pool already.
        let isVerified: Bool
    }

    private struct Entry {
        let client: PostgresClient
        let runner: Task<Void, Never>
        var leases: Int
        var lastUsed: ContinuousClock.Instant
        var verified: Bool
    }

    /// Settings each connection asks for at start-up. They take precedence over the role's own defaults,
    /// which a tenant's SQL may change (`ALTER ROLE CURRENT_USER SET`): a default that ends idle sessions or makes
    /// transactions read-only would otherwise stop the runtime's own statements on the tenant's pool, the
    /// ending of a backend past its deadline among them. The transaction's limits are set by the binding.
    static let startupParameters: [(String, String)] = [
        ("idle_session_timeout", "0"), ("idle_in_transaction_session_timeout", "0"), ("statement_timeout", "0"),
        ("lock_timeout", "0"), ("default_transaction_read_only", "off"), ("transaction_read_only", "off"),
    ]

    private let roles: TenantDatabase.TenantRoles
    private let logger: Logger
    private let entries = NIOLockedValueBox<[String: Entry]>([:])

    init(roles: TenantDatabase.TenantRoles, logger: Logger) {
        self.roles = roles
        self.logger = logger
    }

    /// A lease on `tenant`'s pool, opening it when needed; give it back with ``release(_:)``.
    func acquire(_ tenant: TenantID) throws(TenantDatabaseError) -> Lease {
        let role = roles.name(for: tenant)
        let now = ContinuousClock.now
        var closing: [Task<Void, Never>] = []
        defer { for runner in closing { runner.cancel() } }
        let lease: Lease? = entries.withLockedValue { entries in
            for (name, entry) in entries where entry.leases == 0 && now - entry.lastUsed >= roles.idleTimeout {
                closing.append(entry.runner)
                entries[name] = nil
            }
            if var entry = entries[role] {
                entry.leases += 1
                entry.lastUsed = now
                entries[role] = entry
                return Lease(role: role, client: entry.client, isVerified: entry.verified)
            }
            if entries.count >= roles.maximumPools {
                guard let idle = entries.filter({ $0.value.leases == 0 }).min(by: { $0.value.lastUsed < $1.value.lastUsed }) else {
                    return nil
                }
                closing.append(idle.value.runner)
                entries[idle.key] = nil
            }
            var configuration = roles.connection
            configuration.username = role
            configuration.password = roles.password(for: tenant)
            configuration.options.additionalStartupParameters += Self.startupParameters
            let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
            let runner = Task { await client.run() }
            entries[role] = Entry(client: client, runner: runner, leases: 1, lastUsed: now, verified: false)
            return Lease(role: role, client: client, isVerified: false)
        }
        guard let lease else {
            throw .unavailable(reason: "all \(roles.maximumPools) tenant pools are in use")
        }
        return lease
    }

    /// Gives a lease back; `verified` records that the role's privileges were checked on its pool.
    func release(_ lease: Lease, verified: Bool) {
        entries.withLockedValue { entries in
            guard var entry = entries[lease.role] else { return }
            entry.leases -= 1
            entry.lastUsed = ContinuousClock.now
            entry.verified = entry.verified || verified
            entries[lease.role] = entry
        }
    }

    /// How many pools are open now.
    var openCount: Int { entries.withLockedValue { $0.count } }

    /// Closes every pool (their connections close as their clients stop).
    func closeAll() {
        let runners = entries.withLockedValue { entries in
            defer { entries.removeAll() }
            return entries.values.map(\.runner)
        }
        for runner in runners { runner.cancel() }
    }

    deinit {
        closeAll()
    }
}
