import HTTPTypes
import Hummingbird
import IdentityPolicy
import IdentityAssertions
import IdentityHTTP
import IdentityRuntime

/// A Hummingbird 2 middleware that runs the rest of the chain under the identity a request proves.
///
/// For each request:
/// 1. **Token.** The signed identity assertion (a compact JWS, see Sources/IdentityPolicy/IdentityPolicy.docc/ServiceBoundary.md) is taken from
///    ``assertionHeader`` (`x-identity-assertion`) if present, else from `Authorization: Bearer <token>` when
///    ``acceptsBearerToken``. None: 401 `missing-token`. The assertion header sent twice: 401 `malformed-token`.
/// 2. **Verification** by ``verifier``: signature, key ID, algorithm (EdDSA only), issuer, audience, expiry,
///    and, with a single-use verifier (the default mode), replay; a reusable verifier
///    (`IdentityAssertionVerifier.Mode.reusable`) accepts a client's bearer token at every request while it is
///    valid, checking its signature once. Refused: 401 with the ``AssertionError``'s code (503
///    `replay-cache-full`).
/// 3. **Tenant.** When ``checksTenant`` and the token names a tenant (`tid`), it must be the runtime's tenant of
///    the account (``PolicyManager/tenant(for:)``): else 401 `tenant-mismatch`.
/// 4. **Policies loaded.** While the ``policies``' policy source has not loaded (`PolicySource.hasLoaded`),
///    nobody can tell whether the account is managed or what its policy is: 503 `policy-unavailable`.
/// 5. **Admission** with ``PolicyManager/withAdmittedIdentity(_:reason:isolation:operation:)``: blocked,
///    disallowed or claimed accounts and accounts an ``AdmissionCheck`` denies get 403; a check that cannot
///    decide gets 503. The reason is `"METHOD /path"`.
/// 6. **The rest of the chain** (later middleware and the route handler) runs with the account as its thread
///    identity, and with ``IdentityRequestContext/admittedIdentity`` set (account, tenant, ``Policy``).
///
/// Refusals are thrown as ``IdentityProblem`` (an `HTTPResponseError` over the root package's
/// `IdentityHTTPProblem`, which documents the statuses and codes): the router answers them with an RFC 9457
/// `application/problem+json` body, and middleware in front of this one sees the error. Steps 1 to 4 follow
/// the root package's framework-neutral rules (`IdentityHTTPToken`, `IdentityHTTPProblem`), which
/// IdentityVapor follows too.
///
/// ```swift
/// let router = Router(context: BasicIdentityRequestContext.self)
/// router.add(middleware: IdentityMiddleware(verifier: verifier, policies: policies))
/// router.get("/documents") { request, context in
///     // IdentityContext.effectiveFileIdentity == context.admittedIdentity?.account
///     try files.readFile(atPath: path)    // refused for another account's file
/// }
/// ```
///
/// ## Propagation
/// - The handler and everything it awaits run in the request's task, inside the scope: the account is the
///   thread identity there, also across suspension points.
/// - `Task {}`, `async let` and task-group children created in the handler inherit it.
/// - `IdentityDispatchQueue` blocks and `IdentityOperationQueue` operations submitted from the handler run
///   under it (captured at submission).
/// - `Task.detached`, a raw `DispatchQueue`, a raw `Thread` or a NIO event loop callback do **not** carry it:
///   capture an `IdentitySnapshot` and run the work with `snapshot.run { … }`.
/// - Middleware added *before* this one, and the router's error handling, run without it.
/// - Log lines: the middleware writes nothing into `context.logger` (one metadata write per request cost more
///   than the rest of the middleware with swift-log's stream handler). Install IdentityLogging's
///   `Logger.MetadataProvider.identity(policyManager:)`: every line logged under the admitted identity then
///   names the account and its tenant, whichever logger writes it.
/// - A response body written by a closure (`ResponseBody { writer in … }`) is written after the handler
///   returns, outside the scope: capture an `IdentitySnapshot` in the handler and run the writer's work in it.
/// - With a single-use verifier the verified token is used up (replay protection). Either way, a call to
///   another service signs a new assertion for that service's audience (`IdentityAssertionSigner`, or
///   IdentityTracing's instrument).
///
/// > Warning: Put this middleware in front of every route that reads or writes account data. A route outside
/// > it runs with no thread identity, so data owned by managed accounts is refused to it (and data it writes
/// > is unowned).
public struct IdentityMiddleware<Context: IdentityRequestContext>: RouterMiddleware {
    /// The header a verified assertion is read from, unless another is chosen: `x-identity-assertion`, the
    /// header IdentityTracing's instrument writes.
    public static var defaultAssertionHeader: HTTPField.Name { HTTPField.Name("x-identity-assertion")! }

    /// Verifies the tokens (keys, trusted issuers, this service's audience, and its mode: single-use or reusable).
    public let verifier: IdentityAssertionVerifier
    /// Admits accounts, and answers their policies and tenants.
    public let policies: PolicyManager
    /// Where the assertion is looked for first.
    public let assertionHeader: HTTPField.Name
    /// Whether `Authorization: Bearer <token>` is accepted when the assertion header is absent.
    public let acceptsBearerToken: Bool
    /// Whether a token's `tid` must match the runtime's tenant of the account.
    public let checksTenant: Bool
    /// The start of each problem's `type` URI; the problem's code follows it. The default is under the
    /// reserved `.invalid` domain (RFC 2606), which never resolves: set your own documentation URL.
    public let problemTypeBase: String

    /// - Parameters:
    ///   - verifier: the assertion verifier of this service (its audience, trusted issuers and keys).
    ///   - policies: the `PolicyManager` that admits accounts.
    ///   - assertionHeader: the dedicated header (default `x-identity-assertion`).
    ///   - acceptsBearerToken: accept `Authorization: Bearer` too (default `true`).
    ///   - checksTenant: refuse a token whose `tid` is not the account's tenant (default `true`).
    ///   - problemTypeBase: the base of the problem `type` URIs.
    public init(
        verifier: IdentityAssertionVerifier, policies: PolicyManager,
        assertionHeader: HTTPField.Name = IdentityMiddleware.defaultAssertionHeader,
        acceptsBearerToken: Bool = true, checksTenant: Bool = true,
        problemTypeBase: String = IdentityHTTPProblem.defaultTypeBase
    ) {
        self.verifier = verifier
        self.policies = policies
        self.assertionHeader = assertionHeader
        self.acceptsBearerToken = acceptsBearerToken
        self.checksTenant = checksTenant
        self.problemTypeBase = problemTypeBase
        assertionHeaderLength = assertionHeader.canonicalName.utf8.count
    }

    /// The length in bytes of `assertionHeader`'s canonical name.
    private let assertionHeaderLength: Int

    public func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let admitted = try verify(request)
        var context = context
        context.admittedIdentity = admitted
        // The path is found only if a check or an observer reads the reason.
        let uri = request.uri
        let reason = AdmissionReason(method: request.method.rawValue) { uri.path }
        // The operation's own errors travel inside the result, so that whatever withAdmittedIdentity throws
        // is a refusal at the door (an AdmissionError) and never an error of the handler.
        let outcome: Result<Response, any Error>
        do {
            outcome = try await policies.withAdmittedIdentity(admitted.account, reason: reason) {
                do { return .success(try await next(request, context)) } catch { return .failure(error) }
            }
        } catch let error as AdmissionError {
            throw IdentityProblem(.admission(error, typeBase: problemTypeBase))
        }
        return try outcome.get()
    }

    /// Steps 1 to 4: the verified identity of `request`, its tenant and its policy, or the problem. Verifying
    /// uses the token up (replay protection). It sets nothing on the request and admits no one.
    public func verify(_ request: Request) throws(IdentityProblem) -> AdmittedIdentity {
        let verified: IdentityHTTPVerification
        // One pass over the fields: a lookup by name joins the values into a new string (the whole token) for
        // each request. Several Authorization lines are joined with ", ", as HTTPFields joins them: one value,
        // never resolved by picking one.
        var assertions: [String] = []
        var authorization: String?
        // Names compare as strings; most fields are told apart by their length alone.
        for field in request.headers {
            let length = field.name.canonicalName.utf8.count
            if length == assertionHeaderLength, field.name == assertionHeader {
                assertions.append(field.value)
            } else if length == authorizationNameLength, field.name == .authorization {
                authorization = authorization.map { $0 + ", " + field.value } ?? field.value
            }
        }
        do {
            let token = try IdentityHTTPToken(
                assertionHeader: assertionHeader.description, values: assertions, authorization: authorization,
                acceptsBearerToken: acceptsBearerToken, problemTypeBase: problemTypeBase)
            verified = try IdentityHTTPVerification(
                token: token, verifier: verifier, policies: policies, checksTenant: checksTenant,
                problemTypeBase: problemTypeBase)
        } catch {
            throw IdentityProblem(error)
        }
        return AdmittedIdentity(verified)
    }
}

/// The length in bytes of `Authorization`'s canonical name.
private let authorizationNameLength = HTTPField.Name.authorization.canonicalName.utf8.count
