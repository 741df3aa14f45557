/// The labels of the metrics ``IdentityRuntimeMetrics`` reports, and of their dimensions. Counters end in
/// `_total` and durations in `_seconds`, as Prometheus names them (a swift-prometheus factory exports timers as
/// histograms in seconds).
///
/// | metric | kind | dimensions | counts |
/// |---|---|---|---|
/// | ``admissions`` | counter | `tenant` | accounts admitted (`withAdmittedIdentity` ran its operation) |
/// | ``admissionRefusals`` | counter | `code`, `cause`, `block_reason`, `tenant` | admissions refused |
/// | ``accountBlocks`` | counter | `reason`, `tenant` | accounts blocked, or blocked for a new reason |
/// | ``accountUnblocks`` | counter | `reason`, `tenant` | accounts unblocked (every cause cleared) |
/// | ``blockedAccounts`` | gauge | — | accounts blocked now |
/// | ``policyReloads`` | counter | — | policy changes the manager applied |
/// | ``policyErrors`` | gauge | — | policy documents in error now (`PolicyManager.policyErrors`) |
/// | ``policyErrorReports`` | counter | — | policy document errors newly reported |
/// | ``tokenVerifications`` | counter | `outcome` | token verifications |
/// | ``tokenCacheHits`` | counter | — | reusable tokens recognized from the verifier's cache |
/// | ``keyFetches`` | counter | `operation`, `outcome` | key store fetches |
/// | ``keyFetchDuration`` | timer | `operation`, `outcome` | how long each fetch took |
/// | ``keyFetchTimeouts`` | counter | `operation` | fetches the store could not answer in time |
/// | ``wipes`` | counter | `outcome`, `tenant` | accounts wiped |
/// | ``wipeDuration`` | timer | `scope` | how long each wipe took |
/// | ``wipeLeftovers`` | counter | `tenant` | what wipes could not remove or look into |
///
/// No dimension ever holds an account name or a token: the tenant is the only one about an account, and it can
/// be turned off (``IdentityRuntimeMetrics/TenantDimension/disabled``).
public enum IdentityMetricNames {
    public static let admissions = "identity_admissions_total"
    public static let admissionRefusals = "identity_admission_refusals_total"
    public static let accountBlocks = "identity_account_blocks_total"
    public static let accountUnblocks = "identity_account_unblocks_total"
    public static let blockedAccounts = "identity_blocked_accounts"
    public static let policyReloads = "identity_policy_reloads_total"
    public static let policyErrors = "identity_policy_errors"
    public static let policyErrorReports = "identity_policy_error_reports_total"
    public static let tokenVerifications = "identity_token_verifications_total"
    public static let tokenCacheHits = "identity_token_cache_hits_total"
    public static let keyFetches = "identity_key_store_fetches_total"
    public static let keyFetchDuration = "identity_key_store_fetch_duration_seconds"
    public static let keyFetchTimeouts = "identity_key_store_timeouts_total"
    public static let wipes = "identity_wipes_total"
    public static let wipeDuration = "identity_wipe_duration_seconds"
    public static let wipeLeftovers = "identity_wipe_leftovers_total"

    /// The names of the dimensions.
    public enum Dimension {
        /// The account's tenant (`PolicyManager.tenant(for:)`), bounded; see
        /// ``IdentityRuntimeMetrics/TenantDimension``.
        public static let tenant = "tenant"
        /// An admission refusal's `AdmissionError.code`: `2` (`notAllowed`) or `3` (`failed`).
        public static let code = "code"
        /// An admission refusal's cause: `blocked`, `notInAllowedAccounts`, `claimed`, `denied`, `unavailable`.
        public static let cause = "cause"
        /// The `BlockAccountReason` of a refusal of a blocked account (`none` for the other causes).
        public static let blockReason = "block_reason"
        /// A `BlockAccountReason` (`clockedOut`, `blockedByAdministrator`, `wiped`, ...), `unknown` for an
        /// unblock of an account whose block the metrics did not see.
        public static let reason = "reason"
        /// What a verification, fetch or wipe ended in.
        public static let outcome = "outcome"
        /// The key store requirement: `currentKey` or `keyWithID`.
        public static let operation = "operation"
        /// A wipe's scope: `account` or `tenant`.
        public static let scope = "scope"
    }
}
