import IdentityPolicy
import IdentityAssertions
import IdentityHTTP
import IdentityProtection
import IdentityRuntime
import Vapor

/// A Vapor 4 middleware that runs the rest of the responder chain under the identity a request proves: the
/// counterpart of IdentityHummingbird's `IdentityMiddleware`, with the same steps and the same refusals.
///
/// For each request, in order (the first that fails answers, and the rest of the chain never runs):
/// 1. **Token.** The signed identity assertion (a compact JWS, see Sources/IdentityPolicy/IdentityPolicy.docc/ServiceBoundary.md) is taken from
///    ``assertionHeader`` (`x-identity-assertion`) if present, else from `Authorization: Bearer <token>` when
///    ``acceptsBearerToken``. None: 401 `missing-token`. The assertion header sent twice: 401 `malformed-token`.
/// 2. **Verification** by ``verifier``: signature, key ID, algorithm (EdDSA only), issuer, audience, expiry,
///    replay. Refused: 401 with the `AssertionError`'s code (503 `replay-cache-full`).
/// 3. **Tenant.** When ``checksTenant`` and the token names a tenant (`tid`), it must be the runtime's tenant of
///    the account (``PolicyManager/tenant(for:)``): else 401 `tenant-mismatch`.
/// 4. **Policies loaded.** While the ``policies``' policy source has not loaded (`PolicySource.hasLoaded`),
///    nobody can tell whether the account is managed or what its policy is: 503 `policy-unavailable`.
/// 5. **Admission** with ``PolicyManager/withAdmittedIdentity(_:reason:isolation:operation:)``: blocked,
///    disallowed or claimed accounts and accounts an ``AdmissionCheck`` denies get 403; a check that cannot
///    decide gets 503. The reason is `"METHOD /path"`. When no admission check has to run (none registered, or
///    a pass still trusted), the middleware decides on the request's event loop
///    (``PolicyManager/admitWithoutWaiting(_:reason:)``), with the same outcomes, and calls the rest of the
///    chain there in a synchronous identity scope, without a task of its own; otherwise in a task, as an
///    `AsyncMiddleware` does.
/// 6. **The rest of the chain** (later middleware and the route handler) runs with the account as its thread
///    identity, and with ``Vapor/Request/admittedIdentity`` set (account, tenant, ``Policy``). The request's
///    logger gets the metadata `identity`.
///
/// Refusals are answered here with ``IdentityProblem/response()``: an RFC 9457 `application/problem+json`
/// document, the same as IdentityHummingbird's (both adapt the root package's `IdentityHTTPProblem`, which
/// documents the statuses and codes; steps 1 to 3 follow its framework-neutral rules, `IdentityHTTPToken`). They are responses, not errors, so Vapor's `ErrorMiddleware`
/// leaves them as they are; middleware in front of this one sees a 401, 403 or 503 response. Errors of the
/// rest of the chain (a handler's `Abort(.notFound)`) pass through unchanged.
///
/// ```swift
/// let protected = app.grouped(IdentityMiddleware(verifier: verifier, policies: policies))
/// protected.get("documents", ":name") { request async throws -> Response in
///     // IdentityContext.effectiveFileIdentity == request.admittedIdentity?.account
///     let policy = request.identityPolicy!                 // the account's Policy
///     return try await serve(files.readFile(atPath: path)) // refused for another tenant's file
/// }
/// ```
///
/// ## Propagation
/// - An `async` route handler and everything it awaits run inside the scope: the account is the thread
///   identity there, also across suspension points. (Vapor runs the handler in a `Task` that the chain creates
///   inside the scope, and a `Task` inherits the identity.)
/// - `Task {}`, `async let` and task-group children created in the handler inherit it.
/// - `IdentityDispatchQueue` blocks and `IdentityOperationQueue` operations submitted from the handler run
///   under it (captured at submission).
/// - `Task.detached`, a raw `DispatchQueue`, a raw `Thread`, and `EventLoopFuture` callbacks or
///   `request.eventLoop.execute` blocks do **not** carry it: capture an `IdentitySnapshot` and run the work
///   with `snapshot.run { … }` (or use IdentityNIO's `flow:` overloads). Write route handlers as `async`
///   closures: the body of a synchronous handler runs under the account only while the middleware's scope is
///   on the stack, and an `EventLoopFuture` handler's callbacks run later on the event loop, outside it, where
///   they have no identity (and data owned by managed accounts is refused to them).
/// - Middleware added *before* this one (the application's `ErrorMiddleware`, for instance) runs without it.
/// - Log lines: the middleware writes nothing into `request.logger` (one metadata write per request cost more
///   than the rest of the middleware). Install IdentityLogging's `Logger.MetadataProvider.identity(policyManager:)`:
///   every line logged under the admitted identity then names the account and its tenant, whichever logger
///   writes it.
/// - A streamed response body (`Response.Body(asyncStream:)`, `managedAsyncStream:`, `stream:`) is written
///   after the handler returns, outside the scope: capture an `IdentitySnapshot` in the handler and run the
///   writer's work in it. A streamed *request* body read in the handler (`for try await chunk in
///   request.body`, with `body: .stream`) is read under the identity.
/// - The verified token is used up (replay protection): register the middleware once per route (twice, the
///   second instance refuses the token as `replayed-token`). A call to another service signs a new assertion
///   for that service's audience (`IdentityAssertionSigner`, or IdentityTracing's instrument).
///
/// > Warning: Put this middleware in front of every route that reads or writes account data. A route outside
/// > it runs with no thread identity, so data owned by managed accounts is refused to it (and data it writes
/// > is unowned).
public struct IdentityMiddleware: AsyncMiddleware {
    /// The header a verified assertion is read from, unless another is chosen: `x-identity-assertion`, the
    /// header IdentityTracing's instrument writes.
    public static let defaultAssertionHeader: HTTPHeaders.Name = "x-identity-assertion"

    /// Verifies the tokens (keys, trusted issuers, this service's audience, the replay cache).
    public let verifier: IdentityAssertionVerifier
    /// Admits accounts, and answers their policies and tenants.
    public let policies: PolicyManager
    /// Where the assertion is looked for first (matched with ASCII letters compared without case, every other
    /// byte exactly).
    public let assertionHeader: HTTPHeaders.Name
    /// Whether `Authorization: Bearer <token>` is accepted when the assertion header is absent.
    public let acceptsBearerToken: Bool
    /// Whether a token's `tid` must match the runtime's tenant of the account.
    public let checksTenant: Bool
    /// The start of each problem's `type` URI; the problem's code follows it. The default is under the
    /// reserved `.invalid` domain (RFC 2606), which never resolves: set your own documentation URL.
    public let problemTypeBase: String
    /// ``assertionHeader`` as problem details name it, written once rather than at every request.
    private let assertionHeaderName: String

    /// - Parameters:
    ///   - verifier: the assertion verifier of this service (its audience, trusted issuers and keys).
    ///   - policies: the `PolicyManager` that admits accounts.
    ///   - assertionHeader: the dedicated header (default `x-identity-assertion`).
    ///   - acceptsBearerToken: accept `Authorization: Bearer` too (default `true`).
    ///   - checksTenant: refuse a token whose `tid` is not the account's tenant (default `true`).
    ///   - problemTypeBase: the base of the problem `type` URIs.
    public init(
        verifier: IdentityAssertionVerifier, policies: PolicyManager,
        assertionHeader: HTTPHeaders.Name = IdentityMiddleware.defaultAssertionHeader,
        acceptsBearerToken: Bool = true, checksTenant: Bool = true,
        problemTypeBase: String = IdentityHTTPProblem.defaultTypeBase
    ) {
        self.verifier = verifier
        self.policies = policies
        self.assertionHeader = assertionHeader
        self.assertionHeaderName = "\(assertionHeader)"
        self.acceptsBearerToken = acceptsBearerToken
        self.checksTenant = checksTenant
        self.problemTypeBase = problemTypeBase
    }

    /// Steps 1 to 6 (see the type's documentation): the rest of the chain's response under the admitted
    /// identity, or the refusal's problem document.
    public func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
        let admitted: AdmittedIdentity
        do { admitted = try verify(request) } catch { return error.response() }
        return try await admit(admitted, of: request, reason: reason(of: request), chainingTo: next)
    }

    /// Steps 1 to 6, as Vapor calls them: on the request's event loop, without a task of its own when the
    /// admission is decided at once (``PolicyManager/admitWithoutWaiting(_:reason:)``: no admission check has
    /// to run). The rest of the chain is then called under the account (a synchronous identity scope around
    /// `next.respond(to:)`): an `async` handler's task, which Vapor creates there, inherits it. When the checks
    /// must run, the admission and the rest of the chain run in a task, as an `AsyncMiddleware` does.
    public func respond(to request: Request, chainingTo next: any Responder) -> EventLoopFuture<Response> {
        let admitted: AdmittedIdentity
        do { admitted = try verify(request) } catch { return request.eventLoop.makeSucceededFuture(error.response()) }
        let reason = reason(of: request)
        let decided: Bool
        do {
            decided = try policies.admitWithoutWaiting(admitted.account, reason: reason)
        } catch {
            return request.eventLoop.makeSucceededFuture(IdentityProblem(.admission(error, typeBase: problemTypeBase)).response())
        }
        guard decided else {
            // The checks must run: admit in a task (the token is verified already, and not again).
            let promise = request.eventLoop.makePromise(of: Response.self)
            promise.completeWithTask {
                let asyncNext = AsyncBasicResponder { request in try await next.respond(to: request).get() }
                return try await admit(admitted, of: request, reason: reason, chainingTo: asyncNext)
            }
            return promise.futureResult
        }
        // Only once admitted: a refused request never carries an admitted identity.
        request.admittedIdentity = admitted
        return IdentityContext.withThreadIdentity(admitted.account) { next.respond(to: request) }
    }

    /// Step 5 and 6 for a verified request: the rest of the chain under the admitted identity, or the refusal.
    private func admit(
        _ admitted: AdmittedIdentity, of request: Request, reason: AdmissionReason, chainingTo next: any AsyncResponder
    ) async throws -> Response {
        // The chain's own errors travel inside the result, so that whatever withAdmittedIdentity throws is a
        // refusal at the door (an AdmissionError) and never an error of the handler.
        let outcome: Result<Response, any Error>
        do {
            outcome = try await policies.withAdmittedIdentity(admitted.account, reason: reason) {
                // Only once admitted: a refused request never carries an admitted identity.
                request.admittedIdentity = admitted
                do { return .success(try await next.respond(to: request)) } catch { return .failure(error) }
            }
        } catch let error as AdmissionError {
            return IdentityProblem(.admission(error, typeBase: problemTypeBase)).response()
        }
        return try outcome.get()
    }

    /// The admission reason: `"METHOD /path"`.
    private func reason(of request: Request) -> AdmissionReason {
        // The URL as admitted (a later rewrite does not change the reason), without holding the request.
        let url = request.url
        return AdmissionReason(method: request.method.rawValue) { url.path }
    }

    /// Steps 1 to 4: the verified identity of `request`, its tenant and its policy, or the problem. Verifying
    /// uses the token up (replay protection). It sets nothing on the request and admits no one.
    public func verify(_ request: Request) throws(IdentityProblem) -> AdmittedIdentity {
        let verified: IdentityHTTPVerification
        do {
            verified = try IdentityHTTPVerification(
                token: token(of: request), verifier: verifier, policies: policies, checksTenant: checksTenant,
                problemTypeBase: problemTypeBase)
        } catch {
            throw IdentityProblem(error)
        }
        return AdmittedIdentity(verified)
    }

    private func token(of request: Request) throws(IdentityHTTPProblem) -> IdentityHTTPToken {
        // One pass over the fields, as IdentityHummingbird reads them: a lookup by name walks every field and
        // makes an array of the values, and the middleware needs two. Names compare after their lengths, as
        // RFC 9110 and IdentityHummingbird (through HTTPTypes) compare them: ASCII letters without case, every
        // other byte exactly. (HTTPHeaders' own lookup also takes bytes that differ only in bit 0x20 as equal,
        // `~` and `^`, CR and `-`: a field another component sees as another header would have been read, and
        // counted, as the assertion.) Several Authorization lines are read as one, comma-joined, never resolved
        // by picking one; a single line is taken as it is.
        var assertions: [String] = []
        var authorization: String?
        for (name, value) in request.headers {
            let length = name.utf8.count
            if length == assertionHeaderName.utf8.count, Self.namesMatch(name, assertionHeaderName) {
                assertions.append(value)
            } else if length == 13, Self.namesMatch(name, "authorization") {
                authorization = authorization.map { $0 + ", " + value } ?? value
            }
        }
        return try IdentityHTTPToken(
            assertionHeader: assertionHeaderName, values: assertions, authorization: authorization,
            acceptsBearerToken: acceptsBearerToken, problemTypeBase: problemTypeBase)
    }

    /// Whether two header names are equal with ASCII letters compared without case; any other byte must be
    /// equal (RFC 9110 §5.1).
    private static func namesMatch(_ name: String, _ other: String) -> Bool {
        name.utf8.elementsEqual(other.utf8) { a, b in
            a == b || (a ^ b == 0x20 && (a | 0x20) >= 0x61 && (a | 0x20) <= 0x7A)
        }
    }
}
