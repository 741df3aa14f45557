import CoreMetrics
import IdentityAssertions
import IdentityPolicy
import IdentityProtection
import IdentityRuntime

/// The identity runtime's metrics, through swift-metrics: admissions and refusals, blocks and unblocks, policy
/// reloads and errors, token verifications and reusable-cache hits, key store fetches (count, latency,
/// timeouts), wipes (count, duration, leftovers). The names and dimensions are in ``IdentityMetricNames``.
///
/// Installed from the outside, each part where it applies:
/// - ``observe(_:)``: a `PolicyManager`'s admissions and wipes (its `observer`) and its events (blocks,
///   unblocks, policy reloads and errors): a ``PolicyManagerMetrics`` to run as a service.
/// - ``verificationObserver``: the `observer` of an `IdentityAssertionVerifier`, so every verification is
///   counted, a middleware's included.
/// - ``meter(_:)``: a key store that meters the fetches of the store it wraps.
///
/// ```swift
/// import IdentityMetrics
/// import Metrics
/// import Prometheus
///
/// let registry = PrometheusCollectorRegistry()
/// MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
/// let metrics = IdentityRuntimeMetrics()
///
/// let keys = metrics.meter(try FileKeyStore(atPath: "/var/lib/documents/keys"))
/// let files = try FileProtectionManager(roots: [root], keyStore: keys, policy: policies, stateDirectory: state)
/// let verifier = IdentityAssertionVerifier(
///     keys: ["gateway-1": gatewayKey], issuers: ["gateway"], audience: "documents",
///     observer: metrics.verificationObserver)
/// let policyMetrics = metrics.observe(policies)      // counts from now on; run it to count events too
/// let group = ServiceGroup(services: [policyMetrics, application], logger: logger)
/// try await group.run()
/// ```
///
/// Dimensions are bounded: the tenant at most, for metrics about accounts, and only the first
/// ``TenantDimension/enabled(maximumTenants:)`` tenants by name (``TenantDimension/disabled`` removes it). No
/// dimension holds an account name, a token or anything else a caller chooses (an admission's reason, a
/// refusal's message).
///
/// > Note: Nothing here costs the runtime anything until it is installed: the runtime's hooks are `nil` by
/// > default, and without a bootstrapped backend swift-metrics' handlers do nothing.
public final class IdentityRuntimeMetrics: Sendable {
    /// Whether metrics about accounts carry a `tenant` dimension.
    public enum TenantDimension: Sendable, Hashable {
        /// No `tenant` dimension.
        case disabled
        /// The account's tenant (`PolicyManager.tenant(for:)`): the first `maximumTenants` tenants seen get their
        /// own value, later ones `other`. A domain-less account's own tenant (written `name@`, which holds the
        /// account's name) is `none`.
        case enabled(maximumTenants: Int)

        /// The default: `enabled(maximumTenants: 100)`.
        public static let `default` = TenantDimension.enabled(maximumTenants: 100)
    }

    /// What the metrics look like.
    public struct Configuration: Sendable, Hashable {
        /// The `tenant` dimension of the metrics about accounts (admissions, refusals, blocks, unblocks, wipes).
        public var tenantDimension: TenantDimension

        public init(tenantDimension: TenantDimension = .default) {
            self.tenantDimension = tenantDimension
        }
    }

    /// What the metrics look like.
    public let configuration: Configuration
    let tenantLabels: TenantLabels?

    let admissions: CounterFamily
    let admissionRefusals: CounterFamily
    let accountBlocks: CounterFamily
    let accountUnblocks: CounterFamily
    let blockedAccounts: Gauge
    let policyReloads: Counter
    let policyErrors: Gauge
    let policyErrorReports: Counter
    let tokenVerifications: CounterFamily
    let tokenCacheHits: Counter
    let keyFetches: CounterFamily
    let keyFetchDuration: TimerFamily
    let keyFetchTimeouts: CounterFamily
    let wipes: CounterFamily
    let wipeDuration: TimerFamily
    let wipeLeftovers: CounterFamily

    /// Metrics made by `factory`: by default the one bootstrapped (`MetricsSystem.factory`, or the task-local one
    /// of `withMetricsFactory`), read now.
    public init(configuration: Configuration = Configuration(), factory: any MetricsFactory = MetricsSystem.factory) {
        self.configuration = configuration
        switch configuration.tenantDimension {
        case .disabled: tenantLabels = nil
        case let .enabled(maximumTenants): tenantLabels = TenantLabels(limit: maximumTenants)
        }
        typealias Names = IdentityMetricNames
        typealias Dimension = IdentityMetricNames.Dimension
        let tenant = tenantLabels == nil ? [] : [Dimension.tenant]
        admissions = CounterFamily(Names.admissions, dimensions: tenant, factory: factory)
        admissionRefusals = CounterFamily(
            Names.admissionRefusals, dimensions: [Dimension.code, Dimension.cause, Dimension.blockReason] + tenant, factory: factory)
        accountBlocks = CounterFamily(Names.accountBlocks, dimensions: [Dimension.reason] + tenant, factory: factory)
        accountUnblocks = CounterFamily(Names.accountUnblocks, dimensions: [Dimension.reason] + tenant, factory: factory)
        blockedAccounts = Gauge(label: Names.blockedAccounts, dimensions: [], factory: factory)
        policyReloads = Counter(label: Names.policyReloads, dimensions: [], factory: factory)
        policyErrors = Gauge(label: Names.policyErrors, dimensions: [], factory: factory)
        policyErrorReports = Counter(label: Names.policyErrorReports, dimensions: [], factory: factory)
        tokenVerifications = CounterFamily(Names.tokenVerifications, dimensions: [Dimension.outcome], factory: factory)
        tokenCacheHits = Counter(label: Names.tokenCacheHits, dimensions: [], factory: factory)
        keyFetches = CounterFamily(Names.keyFetches, dimensions: [Dimension.operation, Dimension.outcome], factory: factory)
        keyFetchDuration = TimerFamily(Names.keyFetchDuration, dimensions: [Dimension.operation, Dimension.outcome], factory: factory)
        keyFetchTimeouts = CounterFamily(Names.keyFetchTimeouts, dimensions: [Dimension.operation], factory: factory)
        wipes = CounterFamily(Names.wipes, dimensions: [Dimension.outcome] + tenant, factory: factory)
        wipeDuration = TimerFamily(Names.wipeDuration, dimensions: [Dimension.scope], factory: factory)
        wipeLeftovers = CounterFamily(Names.wipeLeftovers, dimensions: tenant, factory: factory)
    }

    /// Counts what `manager` decides from now on: installs itself as the manager's `observer` (admissions and
    /// wipes; it replaces an observer installed before) and subscribes to its `events` (blocks, unblocks,
    /// policy reloads and errors, counted while the returned service runs).
    ///
    /// Call it once per manager, before the manager serves; run the result (``PolicyManagerMetrics/run()``) for
    /// as long as the manager serves.
    public func observe(_ manager: PolicyManager) -> PolicyManagerMetrics {
        PolicyManagerMetrics(manager: manager, metrics: self)
    }

    /// The observer to give an `IdentityAssertionVerifier` (its `observer:` parameter): every verification is
    /// counted by outcome, and reusable tokens recognized from the cache as hits.
    public var verificationObserver: AssertionVerificationMetrics {
        AssertionVerificationMetrics(metrics: self)
    }

    /// `store`, with its fetches metered (``MeteredKeyStore``). Give the result to the managers in place of
    /// `store`.
    public func meter<Store: KeyStore>(_ store: Store) -> MeteredKeyStore<Store> {
        MeteredKeyStore(store, metrics: self)
    }

    /// The `tenant` values to append to an account metric's dimensions: none when the dimension is off.
    func tenantValues(_ tenant: @autoclosure () -> TenantID) -> [String] {
        guard let tenantLabels else { return [] }
        return [tenantLabels.label(tenant())]
    }
}
