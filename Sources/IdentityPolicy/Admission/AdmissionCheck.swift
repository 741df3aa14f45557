import IdentityRuntime

/// Why an account asks to be admitted: free text for logs and checks ("GET /documents"), or one of the
/// named reasons. A string literal, interpolations included, is one.
///
/// Two reasons are equal when their descriptions are: `AdmissionReason(method: "GET") { "/documents" }`
/// equals `AdmissionReason("GET /documents")`.
public struct AdmissionReason: Sendable, Hashable, ExpressibleByStringInterpolation, CustomStringConvertible {
    // A request's path is asked for only when someone reads the description: an admission that no check or
    // observer looks at (the usual one) then neither builds a string nor finds the path (Vapor's `URI.path`
    // parses the URL again with Foundation: 25,000 instructions). Two plain fields, not an enum of the two
    // forms: copying the reason is then two retains.
    /// The text, or a request's method.
    private let head: String
    /// A request's path; `nil` for a reason made of text.
    private let path: (@Sendable () -> String)?

    /// What the reason says: the text it was made from, or `METHOD /path` for a request.
    public var description: String {
        guard let path else { return head }
        return head + " " + path()
    }

    /// A reason described by `description`.
    public init(_ description: String) {
        head = description
        path = nil
    }

    public init(stringLiteral value: String) {
        self.init(value)
    }

    /// An HTTP request, described as `METHOD /path` (the form the HTTP middlewares give). `path` is called
    /// each time ``description`` is read, and only then (a check or an observer that looks at the reason, or
    /// a comparison): pass the request's path as the framework computes it from a copy of the URL taken at
    /// admission (`let url = request.url` then `{ url.path }`). It must answer the same text every time:
    /// equality and hashing read it.
    public init(method: String, path: @escaping @Sendable () -> String) {
        head = method
        self.path = path
    }

    /// The reason of an identity switch, for code that admits where an app would switch.
    public init(_ reason: IdentitySwitchReason) {
        self.init(reason.description)
    }

    /// A request to the service, the default.
    public static let request: AdmissionReason = "request"

    /// Whether the two reasons read the same (``description``), however each was made.
    public static func == (lhs: AdmissionReason, rhs: AdmissionReason) -> Bool {
        // Two texts compare as texts. Otherwise the descriptions decide: the request `GET` `/a` reads as the text
        // "GET /a", and as the request split as `GET /` and `a`.
        if lhs.path == nil && rhs.path == nil { return lhs.head == rhs.head }
        return lhs.description == rhs.description
    }

    /// Hashes the ``description``, as `==` compares it.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(description)
    }
}

/// What an ``AdmissionCheck`` decided.
public enum AdmissionOutcome: Sendable, Hashable {
    /// The account may be served. The pass is trusted for ``RuntimeSettings/admissionCacheDuration``.
    case admit
    /// The account must not be served (a token revoked, the tenant suspended): the admission fails and the
    /// account is blocked (``BlockAccountReason/admissionCheckFailed``) until a check passes again after
    /// ``RuntimeSettings/admissionRetryInterval``.
    case deny(String)
    /// The check could not decide now (its service is unreachable): this admission fails, nothing is
    /// blocked or cached, and the next admission asks again.
    case unavailable(String)
}

/// A check that runs before a service acts for a managed account: the service analog of a
/// ``ConditionalLaunchCheck``. Checks run in registration order, one after another; the first that does not
/// admit decides. Run by ``PolicyManager/withAdmittedIdentity(_:reason:isolation:operation:)`` with the
/// account as the thread identity.
public protocol AdmissionCheck: Sendable {
    /// Decides whether `account` may be served now, for `reason`.
    func evaluate(account: Identity, reason: AdmissionReason) async -> AdmissionOutcome
}

/// An ``AdmissionCheck`` made from a closure.
public struct ClosureAdmissionCheck: AdmissionCheck {
    private let body: @Sendable (Identity, AdmissionReason) async -> AdmissionOutcome

    /// A check that answers with `body`'s outcome for the account and the reason.
    public init(_ body: @escaping @Sendable (Identity, AdmissionReason) async -> AdmissionOutcome) {
        self.body = body
    }

    public func evaluate(account: Identity, reason: AdmissionReason) async -> AdmissionOutcome {
        await body(account, reason)
    }
}

/// Why an account was not admitted. ``result`` is the ``SwitchIdentityResult`` a switch to the account would
/// give: ``SwitchIdentityResult/notAllowed`` for a refusal by rule (blocked, not allowed, claimed),
/// ``SwitchIdentityResult/failed`` for a check that denied it or could not decide.
public struct AdmissionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What refused the account.
    public enum Cause: Sendable, Hashable {
        /// The account is blocked (a denied check blocks it too: ``BlockAccountReason/admissionCheckFailed``).
        case blocked(BlockAccountReason)
        /// The account is not in ``PolicyManager/allowedAccounts``.
        case notInAllowedAccounts
        /// The account is managed elsewhere (see ``RuntimeSettings/maxManagedAccounts``).
        case claimed
        /// A check denied the account; it is now blocked.
        case denied(String)
        /// A check could not decide.
        case unavailable(String)
    }

    /// The account that asked.
    public let account: Identity
    /// What a switch to it would give.
    public let result: SwitchIdentityResult
    /// Why.
    public let cause: Cause

    /// A refusal of `account` with `result`, for `cause`.
    public init(account: Identity, result: SwitchIdentityResult, cause: Cause) {
        self.account = account
        self.result = result
        self.cause = cause
    }

    /// ``result``'s raw value, the code to log or return.
    public var code: Int { result.rawValue }

    public var description: String {
        let why = switch cause {
        case let .blocked(reason): "blocked (\(reason))"
        case .notInAllowedAccounts: "not an allowed account"
        case .claimed: "managed elsewhere"
        case let .denied(message): "denied by an admission check: \(message)"
        case let .unavailable(message): "no admission check could decide: \(message)"
        }
        return "AdmissionError \(code) (\(result)): \(account.debugDescription) \(why)"
    }
}
