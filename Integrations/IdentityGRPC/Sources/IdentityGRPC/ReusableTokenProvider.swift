import Foundation
import IdentityAssertions
import IdentityRuntime

/// An ``IdentityTokenProvider`` of reusable bearer tokens: it signs one assertion per account with an
/// `IdentityAssertionSigner` and hands out the same token at every call until it is about to expire, then
/// signs a new one.
///
/// Pair it with a service whose verifier is in reusable mode (`IdentityAssertionVerifier.Mode.reusable`),
/// which checks a token's signature once and recognizes it afterwards; a single-use verifier refuses the
/// second call of a token (`replayed-token`), so for one-shot assertions give ``IdentityClientInterceptor``
/// the signer itself.
///
/// ```swift
/// let tokens = ReusableTokenProvider(signer: signer, audience: "documents", lifetime: 300)
/// let client = GRPCClient(transport: transport, interceptors: [IdentityClientInterceptor(tokenProvider: tokens)])
/// ```
///
/// Thread-safe; tokens are kept per account (compared as `Identity` compares: case-insensitively), at most
/// ``capacity`` at once (the cache is emptied when it is full, and refills as accounts call).
///
/// > Warning: A bearer token can be replayed by whoever steals it until it expires: keep ``lifetime`` short
/// > and send tokens only over TLS.
public final class ReusableTokenProvider: IdentityTokenProvider {
    /// Signs the tokens.
    public let signer: IdentityAssertionSigner
    /// The `aud` of the tokens: the called service.
    public let audience: String
    /// Seconds a token is valid.
    public let lifetime: TimeInterval
    /// A token is replaced when fewer than this many seconds of its lifetime remain.
    public let renewalMargin: TimeInterval
    /// The most accounts whose tokens are kept.
    public let capacity: Int
    private let tenant: @Sendable (Identity) -> String?
    private let clock: @Sendable () -> Date
    /// Each account's token, its `authorization` value (`Bearer <token>`, built once for every call that sends it)
    /// and when it is replaced.
    private let cache = Locked<[Identity: (token: String, authorization: String, renewAt: Date)]>([:])

    /// - Parameters:
    ///   - signer: signs the tokens (its key, key ID and issuer).
    ///   - audience: the called service's name, the `aud` of the tokens.
    ///   - lifetime: seconds a token is valid (default 300; the verifier's `maximumLifetime` bounds it).
    ///   - renewalMargin: seconds before expiry at which a token is replaced (default 30, at most half the
    ///     lifetime).
    ///   - capacity: the most accounts whose tokens are kept (default 1,024).
    ///   - tenant: the tenant claim (`tid`) of an account's token, or `nil` for none (the default). Pass
    ///     `{ policies.tenant(for: $0).rawValue }` to use the policy module's.
    ///   - clock: the current time (tests pass their own).
    public init(
        signer: IdentityAssertionSigner, audience: String, lifetime: TimeInterval = 300,
        renewalMargin: TimeInterval = 30, capacity: Int = 1_024,
        tenant: @escaping @Sendable (Identity) -> String? = { _ in nil },
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.signer = signer
        self.audience = audience
        self.lifetime = max(1, lifetime)
        self.renewalMargin = min(max(0, renewalMargin), self.lifetime / 2)
        self.capacity = max(1, capacity)
        self.tenant = tenant
        self.clock = clock
    }

    /// The account's current token: the kept one while it is not about to expire, else a new one.
    ///
    /// - Throws: the signer's `AssertionError` (for example an account name that cannot be a `sub`).
    public func currentToken(for account: Identity) throws(AssertionError) -> String {
        try current(for: account).token
    }

    /// `Bearer <token>` of ``currentToken(for:)``, the value ``IdentityClientInterceptor`` sends: kept with the
    /// token, so that a call does not build it again.
    func currentAuthorization(for account: Identity) throws(AssertionError) -> String {
        try current(for: account).authorization
    }

    private func current(for account: Identity) throws(AssertionError) -> (token: String, authorization: String) {
        let now = clock()
        if let kept = cache.withLock({ $0[account] }), kept.renewAt > now {
            return (kept.token, kept.authorization)
        }
        // Signed outside the lock; two calls racing for the same account both sign, and the later one is kept.
        let token = try signer.sign(account: account, tenant: tenant(account), audience: audience, lifetime: lifetime, now: now)
        let authorization = "Bearer " + token
        let renewAt = now.addingTimeInterval(lifetime - renewalMargin)
        cache.withLock { tokens in
            if tokens.count >= capacity, tokens[account] == nil { tokens.removeAll(keepingCapacity: true) }
            tokens[account] = (token, authorization, renewAt)
        }
        return (token, authorization)
    }

    /// ``currentToken(for:)``, for ``IdentityClientInterceptor``.
    public func token(for account: Identity) async throws -> String {
        try currentToken(for: account)
    }
}
