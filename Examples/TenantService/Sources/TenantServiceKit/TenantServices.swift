import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import IdentityHummingbird
import IdentityLogging
import IdentityMetrics
import IdentityPolicy
import IdentityAssertions
import IdentityPostgres
import IdentityProtection
import IdentityRuntime
import Logging
import Prometheus
import Synchronization

/// The two services of the example, set up in a temporary directory:
///
/// - the **document service** (audience `documents`): documents per account stored through the runtime's
///   `FileProtectionManager` (owner = the request's account, encrypted when the account's policy says so,
///   other tenants' documents refused), an export endpoint under the save-to rules, an account wipe. Its
///   routes are served four times: under `/v1`, behind ``IdentityMiddleware`` (a verified single-use assertion,
///   then admission), under `/reusable`, behind ``IdentityMiddleware`` with a reusable verifier (a bearer token a
///   client keeps for its lifetime: verified in full once, then recognized), and for the load test's comparisons
///   under `/plain`, behind ``PlainIdentityMiddleware`` (the account from a header, unverified), and under
///   `/bare`, behind ``BareSignatureMiddleware`` (a bare signature check, nothing else);
/// - the **audit service** (``AuditService``, audience `audit`), which the document service calls for every
///   request from a `Task` deep in the request's hops, with a new assertion signed for the identity seen there.
///   It verifies it with ``IdentityMiddleware`` and logs the event through a logger whose metadata provider
///   (IdentityLogging) adds the identity. It runs here, or in another process at ``auditURL`` (the load
///   driver's default).
///
/// With a PostgreSQL server (`init(database:)`, e.g. `PostgresFleetConfiguration.fromEnvironment()`), the document
/// service also keeps documents in PostgreSQL (``DatabaseDocuments``, the `/db` routes): ``withRunningServices(_:)``
/// sets up its database and roles, starts the pool and runs `verify()` before it serves, and refuses to start when
/// that fails. Without one, the `/db` routes answer 503 `database-not-configured` and nothing else changes.
///
/// The document service's identity metrics (IdentityMetrics: admissions and refusals, blocks, policy reloads and
/// errors, token verifications, key store fetches, wipes) are exported in Prometheus' text format at `GET /metrics`,
/// outside the identity middleware, from a registry of its own (``metricsRegistry``): its manager is observed, its
/// key store metered and both verifiers report to them.
///
/// Callers (the load driver, the tests) sign their tokens with ``gatewaySigner`` (issuer `gateway`).
public final class TenantServices: Sendable {
    public static let documentsAudience = "documents"
    public static let auditAudience = AuditService.audience

    public let root: String
    /// The document service's policies, admission and file protection.
    public let policies: PolicyManager
    public let files: FileProtectionManager
    /// The PostgreSQL document store, when the service was given a server (`nil`: the `/db` routes refuse).
    public let databaseDocuments: DatabaseDocuments?
    /// The audit service, when it runs in this process (`nil` when it runs at the `auditURL` given to `init`).
    public let audit: AuditService?
    /// What callers of the document service sign with.
    public let gatewaySigner: IdentityAssertionSigner
    public let documentsVerifier: IdentityAssertionVerifier
    /// The verifier of the `/reusable` routes: the same key, issuer and audience, in reusable mode.
    public let bearerVerifier: IdentityAssertionVerifier
    /// Where the document service's identity metrics are kept, and read by `GET /metrics`.
    public let metricsRegistry: PrometheusCollectorRegistry
    /// The document service's identity metrics (tenant dimension on: the example's 8 tenants).
    public let metrics: IdentityRuntimeMetrics
    /// Counts what ``policies`` decides; run by ``withRunningServices(_:)``.
    let policyMetrics: PolicyManagerMetrics
    /// What the document service signs its calls to the audit service with.
    let serviceSigner: IdentityAssertionSigner
    let httpClient: HTTPClient
    /// The legacy hops every document request goes through.
    let queue = IdentityDispatchQueue(label: "documents.render", attributes: .concurrent)
    let operations: IdentityOperationQueue
    let auditBaseURL = Mutex<String?>(nil)
    private let ownsRoot: Bool

    /// - Parameters:
    ///   - root: a directory to work in; by default a new temporary one, removed by ``shutDown()``.
    ///   - echoAuditLog: print the audit service's log lines too (when it runs in this process).
    ///   - serviceKey: the document service's signing key for its calls to the audit service; by default a new one.
    ///   - auditURL: where an audit service trusting `serviceKey`'s public key already runs (in another process);
    ///     by default ``withRunningServices(_:)`` runs one in this process.
    ///   - database: a PostgreSQL server and its administrator role, for the `/db` routes (``DatabaseDocuments``:
    ///     its own database and roles, made when the services start, removed by ``shutDown()``); `nil`: none.
    public init(
        root: String? = nil, echoAuditLog: Bool = false, serviceKey: AssertionSigningKey? = nil, auditURL: String? = nil,
        database: PostgresFleetConfiguration? = nil
    ) throws {
        let root = root ?? (NSTemporaryDirectory() + "tenant-service-" + UUID().uuidString)
        self.root = root
        ownsRoot = true
        for tenant in 0..<Tenants.tenantCount {
            for user in 0..<Tenants.accountsPerTenant {
                try FileManager.default.createDirectory(
                    atPath: Self.folder(root: root, account: Tenants.account(tenant: tenant, user: user)),
                    withIntermediateDirectories: true)
            }
            for target in ExportTarget.allCases {
                try FileManager.default.createDirectory(
                    atPath: "\(root)/exports/\(target.rawValue)/\(Tenants.tenant(tenant).rawValue)",
                    withIntermediateDirectories: true)
            }
        }
        policies = Tenants.policyManager()
        // A registry of this instance's own (not the process's MetricsSystem): tests run several services at once.
        metricsRegistry = PrometheusCollectorRegistry()
        metrics = IdentityRuntimeMetrics(
            configuration: .init(tenantDimension: .enabled(maximumTenants: Tenants.tenantCount)),
            factory: PrometheusMetricsFactory(registry: metricsRegistry))
        policyMetrics = metrics.observe(policies)
        files = try FileProtectionManager(
            roots: [root + "/documents", root + "/exports"], keyStore: metrics.meter(FileKeyStore(atPath: root + "/keys")),
            policy: policies, stateDirectory: root + "/state")
        policies.fileProtection = files
        let policies = policies
        databaseDocuments = try database.map { try DatabaseDocuments(server: $0, policies: policies) }

        let gatewayKey = try AssertionSigningKey(), serviceKey = try serviceKey ?? AssertionSigningKey()
        gatewaySigner = IdentityAssertionSigner(key: gatewayKey, keyID: "gateway-1", issuer: "gateway")
        serviceSigner = IdentityAssertionSigner(key: serviceKey, keyID: AuditService.keyID, issuer: AuditService.issuer)
        // Every request of a load run carries a new token, valid for minutes: room for a million token IDs.
        documentsVerifier = IdentityAssertionVerifier(
            keys: ["gateway-1": gatewayKey.publicKey], issuers: ["gateway"], audience: Self.documentsAudience,
            replayCacheCapacity: 1_000_000, observer: metrics.verificationObserver)
        bearerVerifier = IdentityAssertionVerifier(
            keys: ["gateway-1": gatewayKey.publicKey], issuers: ["gateway"], audience: Self.documentsAudience,
            mode: .reusable, observer: metrics.verificationObserver)
        audit = auditURL == nil ? AuditService(trustedKey: serviceKey.publicKey, echo: echoAuditLog) : nil
        auditBaseURL.withLock { $0 = auditURL }

        var pool = HTTPClient.Configuration.ConnectionPool()
        pool.concurrentHTTP1ConnectionsPerHostSoftLimit = 128
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = pool
        httpClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)

        operations = IdentityOperationQueue()
        operations.name = "documents.storage"
        operations.maxConcurrentOperationCount = 4
    }

    /// Stops the HTTP client, removes the working directory and the PostgreSQL database and roles, if any.
    public func shutDown() async throws {
        try await httpClient.shutdown()
        try await databaseDocuments?.drop()
        if ownsRoot { try? FileManager.default.removeItem(atPath: root) }
    }

    static func folder(root: String, account: Identity) -> String {
        let tenant = Tenants.tenantIndex(of: account).map { Tenants.tenant($0).rawValue } ?? "other"
        return "\(root)/documents/\(tenant)/\(account.name)"
    }

    /// Runs the document service, and the audit service unless it runs elsewhere, on 127.0.0.1 (ports chosen
    /// by the system), then `body` with their base URLs, then stops them. With a database, its set-up, pool and
    /// `verify()` come first: the document service does not start when they fail. Once per instance.
    public func withRunningServices<T: Sendable>(
        _ body: @Sendable (_ documentsURL: String, _ auditURL: String) async throws -> T
    ) async throws -> T {
        let (ports, continuation) = AsyncStream.makeStream(of: (String, Int).self)
        let logger = Logger(label: "tenant-service") { _ in SwiftLogNoOpLogHandler() }
        let documents = Application(
            router: documentRouter(), configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(("documents", channel.localAddress?.port ?? 0)) },
            logger: logger)
        let localAudit = audit.map { $0.application { port in continuation.yield(("audit", port)) } }
        try await databaseDocuments?.provision()
        return try await withThrowingTaskGroup(of: T?.self) { group in
            let policyMetrics = policyMetrics
            group.addTask { await policyMetrics.run(); return nil }
            if let databaseDocuments {
                group.addTask { await databaseDocuments.run(); return nil }
                do {
                    try await databaseDocuments.verify()
                } catch {
                    group.cancelAll()
                    throw error
                }
            }
            group.addTask { try await documents.runService(gracefulShutdownSignals: []); return nil }
            if let localAudit {
                group.addTask { try await localAudit.runService(gracefulShutdownSignals: []); return nil }
            }
            var found: [String: Int] = [:]
            for await (name, port) in ports {
                found[name] = port
                if found.count == (localAudit == nil ? 1 : 2) { break }
            }
            if let auditPort = found["audit"], auditPort > 0 {
                auditBaseURL.withLock { $0 = "http://127.0.0.1:\(auditPort)" }
            }
            guard let documentsPort = found["documents"], documentsPort > 0, let auditURL = auditBaseURL.withLock({ $0 }) else {
                throw HTTPError(.internalServerError, message: "a service did not start")
            }
            let result: T
            do {
                result = try await body("http://127.0.0.1:\(documentsPort)", auditURL)
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
            while (try? await group.next()) != nil {}
            return result
        }
    }
}
