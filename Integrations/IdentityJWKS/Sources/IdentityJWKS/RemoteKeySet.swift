import AsyncHTTPClient
import IdentityAssertions

/// A JWKS document (RFC 7517) fetched over HTTP(S) and kept current in an ``IdentityAssertionVerifier``: every
/// good fetch installs its keys with ``IdentityAssertionVerifier/replaceKeys(with:)``.
///
/// - **Cache.** A fetched set is used until the response's `Cache-Control: max-age` has passed, clamped to
///   ``Configuration/minimumRefreshInterval`` … ``Configuration/maximumRefreshInterval``; `no-store` and
///   `no-cache` mean the minimum; no `max-age` means ``Configuration/defaultRefreshInterval``.
///   ``refreshIfStale()`` fetches only once that time has come; ``run()`` does it in a loop.
/// - **Unknown `kid`.** A token signed with a key the set does not hold yet (the issuer rotated) fails with
///   ``AssertionError/unknownKey(_:)``; ``refreshForUnknownKey()`` then fetches again, at most once per
///   ``Configuration/unknownKeyRefreshInterval``, so a flood of tokens with made-up key IDs costs the endpoint
///   one request per interval. ``verify(_:)`` does verify → refresh when allowed → verify once more.
/// - **Single flight.** Concurrent callers of ``refresh()``, ``refreshIfStale()`` and
///   ``refreshForUnknownKey()`` share the fetch in flight.
/// - **Failures.** A fetch that fails (transport, HTTP status, a body over
///   ``IdentityAssertions/AssertionKeySet/maximumJWKSLength`` bytes, a document `AssertionKeySet(jwks:)` refuses,
///   the ``Configuration/fetchTimeout``) changes no key: the last good set stays in use, and the failure is kept
///   in ``lastError`` until the next good fetch. Verification reports a fetch failure only when no good set was
///   ever fetched (``JWKSVerificationError/keysUnavailable(_:)``): until then nothing verifies.
///
/// ```swift
/// let verifier = IdentityAssertionVerifier(keySet: AssertionKeySet(), issuers: ["gateway"], audience: "documents")
/// let keys = try RemoteKeySet(url: "https://gateway.internal/.well-known/jwks.json", verifier: verifier)
/// try? await keys.refresh()                   // the first set, before serving
/// // … and keep it current: as a swift-service-lifecycle Service, or `Task { try await keys.run() }`
/// let assertion = try await keys.verify(token) // or verifier.verify(token), then refreshForUnknownKey()
/// ```
///
/// > Note: The verifier's keys belong to the remote set: `init` empties them, and each good fetch replaces them.
/// > Add no key to that verifier by hand.
///
/// - **Transport.** Only `https`: whoever can change the document in transit chooses the keys tokens are
///   verified with. Plain `http` is accepted only to a loopback host and only with
///   ``Configuration/allowsLoopbackHTTP``; `init` refuses any other address (``JWKSFetchError/insecureURL(_:)``),
///   and a fetch that a redirect led to such an address fails with the same error and changes no key.
///   Redirects are followed as the `HTTPClient` is configured to.
public actor RemoteKeySet {
    /// Where the document is fetched from.
    public nonisolated let url: String
    /// The verifier whose keys this set keeps.
    public nonisolated let verifier: IdentityAssertionVerifier
    public nonisolated let configuration: Configuration
    private let fetcher: JWKSFetcher

    /// The last good set, `nil` before the first.
    public private(set) var keySet: AssertionKeySet?
    /// The failure of the last fetch, `nil` once a fetch succeeded after it.
    public private(set) var lastError: JWKSFetchError?
    /// How many fetches were started (tests, metrics).
    public private(set) var fetchCount = 0
    /// When the next scheduled fetch is due: ``refreshIfStale()`` fetches from then on.
    public private(set) var nextRefresh: ContinuousClock.Instant
    /// When the last refresh for an unknown `kid` started.
    private var lastUnknownKeyRefresh: ContinuousClock.Instant?
    /// The fetch in flight, shared by every caller.
    private var inFlight: Task<Result<AssertionKeySet, JWKSFetchError>, Never>?

    /// - Parameters:
    ///   - url: the JWKS document's address: `https://…` (or `http://` to a loopback host, with
    ///     ``Configuration/allowsLoopbackHTTP``).
    ///   - verifier: the verifier whose keys to keep in step; its keys are emptied now, and replaced by each good
    ///     fetch.
    ///   - httpClient: the client to fetch with (default: the shared one). Not shut down by this type.
    ///   - configuration: intervals and the fetch deadline.
    ///
    /// Nothing is fetched until ``refresh()``, ``refreshIfStale()``, ``refreshForUnknownKey()``, ``verify(_:)``
    /// or ``run()`` is called.
    /// - Throws: ``JWKSFetchError/insecureURL(_:)`` or ``JWKSFetchError/invalidURL(_:)`` when `url` may not be
    ///   fetched from; the verifier's keys are then left as they were.
    public init(
        url: String, verifier: IdentityAssertionVerifier, httpClient: HTTPClient = .shared,
        configuration: Configuration = Configuration()
    ) throws(JWKSFetchError) {
        if let refusal = JWKSAddress.refusal(of: url, allowsLoopbackHTTP: configuration.allowsLoopbackHTTP) {
            throw refusal
        }
        self.url = url
        self.verifier = verifier
        self.configuration = configuration
        fetcher = JWKSFetcher(
            client: httpClient, url: url, timeout: configuration.fetchTimeout, maximumLength: AssertionKeySet.maximumJWKSLength,
            allowsLoopbackHTTP: configuration.allowsLoopbackHTTP)
        nextRefresh = .now
        verifier.replaceKeys(with: AssertionKeySet())
    }

    /// Fetches the document now (or joins the fetch in flight) and returns the set it gave.
    /// - Throws: the fetch's ``JWKSFetchError``; the keys in use are then unchanged.
    @discardableResult
    public func refresh() async throws(JWKSFetchError) -> AssertionKeySet {
        try await shared().get()
    }

    /// Fetches when the current set's time is up (``nextRefresh``), or joins the fetch in flight; otherwise
    /// does nothing. Never throws: a failure is in ``lastError``.
    public func refreshIfStale() async {
        if let inFlight {
            _ = await inFlight.value
        } else if ContinuousClock.now >= nextRefresh {
            _ = await shared()
        }
    }

    /// Fetches again because a token named a key the set does not hold: joins the fetch in flight, or starts
    /// one when no refresh for an unknown key started within ``Configuration/unknownKeyRefreshInterval``.
    /// - Returns: whether a fetch was made or joined and succeeded (then verify the token once more); `false`
    ///   when rate limited or the fetch failed.
    @discardableResult
    public func refreshForUnknownKey() async -> Bool {
        // A failed fetch answers false (the token stays refused) and is kept in lastError by shared().
        if let inFlight { return (try? await inFlight.value.get()) != nil }
        let now = ContinuousClock.now
        if let last = lastUnknownKeyRefresh, now < last + configuration.unknownKeyRefreshInterval { return false }
        lastUnknownKeyRefresh = now
        return (try? await shared().get()) != nil
    }

    /// The assertion `token` carries, verified by ``verifier``: on ``AssertionError/unknownKey(_:)``, a
    /// ``refreshForUnknownKey()`` (when the rate limit allows; a refresh by another caller meanwhile counts
    /// too), then one more verification. Not isolated to the actor: a token whose key is known is verified
    /// without waiting for it.
    /// - Throws: ``JWKSVerificationError/refused(_:)`` with the verifier's error;
    ///   ``JWKSVerificationError/keysUnavailable(_:)`` when no good set was ever fetched (deny by default).
    public nonisolated func verify(_ token: String) async throws(JWKSVerificationError) -> IdentityAssertion {
        do throws(AssertionError) {
            return try verifier.verify(token)
        } catch {
            guard case .unknownKey = error else { throw .refused(error) }
        }
        if let unavailable = await refreshAfterUnknownKey() { throw .keysUnavailable(unavailable) }
        do throws(AssertionError) {
            return try verifier.verify(token)
        } catch {
            throw .refused(error)
        }
    }

    /// ``refreshForUnknownKey()``, then why no key set is available (`nil` when one is).
    private func refreshAfterUnknownKey() async -> JWKSFetchError? {
        await refreshForUnknownKey()
        return keySet == nil ? lastError ?? .neverFetched : nil
    }

    /// The fetch in flight, or a new one; its outcome is applied before any caller resumes.
    private func shared() async -> Result<AssertionKeySet, JWKSFetchError> {
        if let inFlight { return await inFlight.value }
        fetchCount += 1
        let task = Task { await self.fetchAndApply() }
        inFlight = task
        return await task.value
    }

    private func fetchAndApply() async -> Result<AssertionKeySet, JWKSFetchError> {
        let result = await fetcher.fetch()
        let now = ContinuousClock.now
        inFlight = nil
        switch result {
        case let .success(fetched):
            verifier.replaceKeys(with: fetched.keySet)
            keySet = fetched.keySet
            lastError = nil
            nextRefresh = now + fetched.cacheControl.refreshInterval(
                minimum: configuration.minimumRefreshInterval, maximum: configuration.maximumRefreshInterval,
                fallback: configuration.defaultRefreshInterval)
            return .success(fetched.keySet)
        case let .failure(error):
            lastError = error
            nextRefresh = now + configuration.minimumRefreshInterval
            return .failure(error)
        }
    }
}
