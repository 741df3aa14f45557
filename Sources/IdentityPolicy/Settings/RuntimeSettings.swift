import Foundation
import IdentityRuntime

/// How the policy module behaves: the analog of the Intune App SDK's `IntuneMAMSettings` dictionary.
///
/// Build it in code, or load it from a JSON object whose keys are the property names (intervals in seconds):
///
/// ```json
/// {
///   "multiIdentity": true,
///   "autoEnrollOnLaunch": false,
///   "policyRequired": true,
///   "enrollmentRetryInterval": 86400,
///   "policyRefreshInterval": 28800,
///   "delegateTimeout": 120,
///   "allowedAccounts": ["alice@contoso.com"],
///   "policyDirectory": "/etc/myservice/policies",
///   "policyPollInterval": 5,
///   "maxManagedAccounts": 1
/// }
/// ```
///
/// Missing keys keep their defaults. Unknown keys and values of the wrong type are errors
/// (``RuntimeSettingsError``), never ignored.
public struct RuntimeSettings: Sendable, Hashable {
    /// Multi-identity mode: process, UI and thread identities all start `nil` and the app sets them. In
    /// single-identity mode (the default) the process identity follows the enrolled (primary) user.
    public var multiIdentity: Bool = false
    /// Enroll the account named by ``allowedAccounts`` (or the one the app adds) without the app asking.
    public var autoEnrollOnLaunch: Bool = false
    /// The app must not show a managed account's data without a policy: a managed account with no policy
    /// document gets ``Policy/locked(for:)`` instead of the unrestricted policy.
    public var policyRequired: Bool = false
    /// Seconds between attempts to enroll an account whose enrollment failed. Default: 24 hours.
    public var enrollmentRetryInterval: TimeInterval = 24 * 60 * 60
    /// Seconds between policy check-ins of the enrolled account. Default: 8 hours.
    public var policyRefreshInterval: TimeInterval = 8 * 60 * 60
    /// Seconds the runtime waits for a delegate to call a completion handler before it gives up with
    /// ``SwitchIdentityResult/failed``. Default: 120.
    public var delegateTimeout: TimeInterval = 120
    /// The only accounts that may be enrolled (`nil`: any account).
    public var allowedAccounts: [Identity]? = nil
    /// A directory of JSON policy documents for the embedded ``DirectoryPolicySource``.
    public var policyDirectory: String? = nil
    /// Seconds between the reads of the policy source (``policyDirectory``, or any other) by
    /// ``PolicyManager/run()``. Default: 5.
    public var policyPollInterval: TimeInterval = 5
    /// The most accounts managed at once (`nil`, the default: no limit). With a limit, only enrolled accounts
    /// are managed, the first `maxManagedAccounts` in enrollment order; enrolling more is refused (227
    /// `singleManagedAccountMode`), and another account with a policy is claimed (a switch to it is
    /// ``SwitchIdentityResult/notAllowed``). `1` is the SDK guide's original model: one managed account, the
    /// primary user. At least 1.
    public var maxManagedAccounts: Int? = nil
    /// Tenant isolation of data (<doc:ServiceBoundary>): data owned by a managed account is readable only under an
    /// effective file identity its policy lets see it (``PolicyManager/isDataTransferAllowed(from:to:)``);
    /// anyone else gets `ProtectionError.accessDenied` (108). `false` gives the SDK's behaviour for
    /// single-tenant apps: any code in the process reads any account's data. Default: `true`.
    public var dataIsolation: Bool = true
    /// Seconds an account's passed ``AdmissionCheck``s are trusted before
    /// ``PolicyManager/withAdmittedIdentity(_:reason:isolation:operation:)`` runs them again. `0`: every
    /// admission runs them. Default: 60.
    public var admissionCacheDuration: TimeInterval = 60
    /// Seconds after an ``AdmissionCheck`` denied an account before an admission runs its checks again (until
    /// then it is refused at once as blocked). Default: 30.
    public var admissionRetryInterval: TimeInterval = 30
    /// Seconds a run of an account's ``AdmissionCheck``s may take before an admission of the account that
    /// arrives later stops waiting for it: that admission runs the checks again, and the old run ends, its
    /// task cancelled and every admission still waiting for it refused with
    /// ``AdmissionError/Cause/unavailable(_:)`` (nothing is blocked or cached; what it answers later counts
    /// for nobody). An admission waiting for a run leaves earlier when its own task is cancelled. A value that
    /// is not a positive number (zero, negative, NaN) counts as the default. Default: 30.
    public var admissionCheckTimeout: TimeInterval = 30

    /// The defaults.
    public init() {}

    /// Every key a settings document may contain.
    public static let keys: [String] = [
        "admissionCacheDuration", "admissionCheckTimeout", "admissionRetryInterval", "allowedAccounts", "autoEnrollOnLaunch", "dataIsolation",
        "delegateTimeout", "enrollmentRetryInterval", "maxManagedAccounts", "multiIdentity", "policyDirectory",
        "policyPollInterval", "policyRefreshInterval", "policyRequired",
    ]

    /// Settings read from the JSON object in `data`.
    public init(json data: Data) throws(RuntimeSettingsError) {
        let members: [String: AppConfigurationValue]
        do throws(JSONReadError) {
            members = try AppConfigurationValue.parseObject(data)
        } catch {
            switch error {
            case let .malformed(reason): throw .malformedJSON(reason: reason)
            case let .notAnObject(found): throw .notAnObject(found: found)
            }
        }
        self.init()
        for key in members.keys.sorted() where !Self.keys.contains(key) {
            throw .unknownKey(key, known: Self.keys)
        }
        for (key, value) in members.sorted(by: { $0.key < $1.key }) {
            switch key {
            case "multiIdentity": multiIdentity = try Self.bool(key, value)
            case "autoEnrollOnLaunch": autoEnrollOnLaunch = try Self.bool(key, value)
            case "policyRequired": policyRequired = try Self.bool(key, value)
            case "enrollmentRetryInterval": enrollmentRetryInterval = try Self.interval(key, value)
            case "policyRefreshInterval": policyRefreshInterval = try Self.interval(key, value)
            case "delegateTimeout": delegateTimeout = try Self.interval(key, value)
            case "policyPollInterval": policyPollInterval = try Self.interval(key, value)
            case "dataIsolation": dataIsolation = try Self.bool(key, value)
            case "admissionCacheDuration": admissionCacheDuration = try Self.interval(key, value, zeroAllowed: true)
            case "admissionRetryInterval": admissionRetryInterval = try Self.interval(key, value, zeroAllowed: true)
            case "admissionCheckTimeout": admissionCheckTimeout = try Self.interval(key, value)
            case "maxManagedAccounts":
                guard case let .number(count) = value else {
                    throw .wrongType(key: key, expected: "a whole number of accounts", found: value.typeName)
                }
                guard count.isFinite, count >= 1, count <= Double(Int32.max), count.rounded() == count else {
                    throw .invalidValue(key: key, reason: "\(count) is not a whole number of accounts of at least 1")
                }
                maxManagedAccounts = Int(count)
            case "policyDirectory":
                guard case let .string(path) = value else {
                    throw .wrongType(key: key, expected: "a string", found: value.typeName)
                }
                guard !path.isEmpty else { throw .invalidValue(key: key, reason: "the path is empty") }
                policyDirectory = path
            case "allowedAccounts":
                guard case let .array(items) = value else {
                    throw .wrongType(key: key, expected: "an array of account names", found: value.typeName)
                }
                var accounts: [Identity] = []
                for item in items {
                    guard case let .string(name) = item else {
                        throw .wrongType(key: key, expected: "an array of account names", found: "an array containing \(item.typeName)")
                    }
                    do {
                        let identity = try Identity(validating: name)
                        guard !identity.isUnmanaged else {
                            throw RuntimeSettingsError.invalidValue(key: key, reason: "the empty (unmanaged) identity is not an account")
                        }
                        accounts.append(identity)
                    } catch let error as RuntimeSettingsError {
                        throw error
                    } catch {
                        throw .invalidValue(key: key, reason: "\(String(reflecting: name)) is not a valid account name: \(error)")
                    }
                }
                allowedAccounts = accounts
            default:
                throw .unknownKey(key, known: Self.keys)
            }
        }
    }

    /// Settings read from the JSON file at `path`.
    public init(contentsOfFile path: String) throws(RuntimeSettingsError) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadable(path: path, reason: error.localizedDescription)
        }
        try self.init(json: data)
    }

    private static func bool(_ key: String, _ value: AppConfigurationValue) throws(RuntimeSettingsError) -> Bool {
        guard case let .bool(flag) = value else { throw .wrongType(key: key, expected: "a boolean", found: value.typeName) }
        return flag
    }

    private static func interval(
        _ key: String, _ value: AppConfigurationValue, zeroAllowed: Bool = false
    ) throws(RuntimeSettingsError) -> TimeInterval {
        guard case let .number(seconds) = value else {
            throw .wrongType(key: key, expected: "a number of seconds", found: value.typeName)
        }
        guard seconds.isFinite, seconds > 0 || (zeroAllowed && seconds == 0) else {
            throw .invalidValue(key: key, reason: "\(seconds) is not a \(zeroAllowed ? "non-negative" : "positive") number of seconds")
        }
        return seconds
    }
}
