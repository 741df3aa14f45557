import GRPCCore
import IdentityAssertions
import IdentityHTTP
import IdentityPolicy
import IdentityRuntime

/// A gRPC server interceptor that runs each RPC's handler under the identity the call proves.
///
/// For each RPC, the same rules as the HTTP middlewares (IdentityHummingbird, IdentityVapor), from the root
/// package's framework-neutral `IdentityHTTPToken` and `IdentityHTTPVerification`:
/// 1. **Token.** The signed identity assertion (a compact JWS) is taken from the metadata key
///    ``assertionKey`` (`x-identity-assertion`) if present, else from `authorization: Bearer <token>` when
///    ``acceptsBearerToken``. None: `unauthenticated`, `missing-token`. The assertion key sent twice:
///    `unauthenticated`, `malformed-token`.
/// 2. **Verification** by ``verifier``: signature, key ID, algorithm (EdDSA only), issuer, audience, expiry,
///    and, with a single-use verifier (the default mode), replay; a reusable verifier
///    (`IdentityAssertionVerifier.Mode.reusable`) accepts a client's bearer token at every call while it is
///    valid, checking its signature once. Refused: `unauthenticated` with the `AssertionError`'s code
///    (`unavailable`, `replay-cache-full`, when the replay cache is over capacity).
/// 3. **Tenant.** When ``checksTenant`` and the token names a tenant (`tid`), it must be the runtime's tenant
///    of the account (`PolicyManager.tenant(for:)`): else `unauthenticated`, `tenant-mismatch`.
/// 4. **Policies loaded.** While the ``policies``' policy source has not loaded, nobody can tell whether the
///    account is managed or what its policy is: `unavailable`, `policy-unavailable`.
/// 5. **Admission** with `PolicyManager.withAdmittedIdentity(_:reason:isolation:operation:)`: blocked,
///    disallowed or claimed accounts and accounts an `AdmissionCheck` denies get `permissionDenied`; a check
///    that cannot decide gets `unavailable`, `admission-unavailable`. The reason is `"gRPC /service/method"`.
/// 6. **The handler** runs with the account as its thread identity and with ``AdmittedIdentity/current``
///    set (account, tenant, `Policy`).
///
/// Refusals are thrown as ``IdentityProblem``, which maps them to a gRPC status in one place: the status
/// message starts with the runtime's code (`"replayed-token: …"`) and the trailing metadata carries the code
/// (`identity-problem-code`) and the problem document. The handler never runs for a refused call.
///
/// ```swift
/// let interceptor = IdentityServerInterceptor(verifier: verifier, policies: policies)
/// try await withGRPCServer(transport: transport, services: [documents], interceptors: [interceptor]) { server in
///     // in a handler: IdentityContext.effectiveFileIdentity == AdmittedIdentity.current?.account
/// }
/// ```
///
/// ## Propagation
/// A gRPC handler runs in two parts, and both run under the account:
/// - the handler function itself (the one registered with the router), inside the admission scope, and
/// - its response body, the `StreamingServerResponse` producer, which gRPC runs after this interceptor has
///   returned: the interceptor wraps the producer so that it runs under the account too.
///
/// So every shape (unary, client streaming, server streaming, bidirectional) handles each request message
/// and writes each response message with the account as its thread identity. From there, the runtime's
/// rules hold:
/// - `Task {}`, `async let` and task-group children created in the handler or its body inherit it.
/// - `IdentityDispatchQueue` blocks and `IdentityOperationQueue` operations submitted there run under it
///   (captured at submission).
/// - `Task.detached`, a raw `DispatchQueue` or a raw `Thread` do **not** carry it: capture an
///   `IdentitySnapshot` and run the work with `snapshot.run { … }`.
/// - Interceptors listed *before* this one run without it; those after it (nearer the handler) run under it.
/// - Each RPC is admitted on its own: two calls for different tenants on one connection, interleaved, each
///   see only their own account.
///
/// > Warning: Put this interceptor in front of every method that reads or writes account data (a
/// > `ConditionalInterceptor` may exempt health checks). A handler outside it runs with no thread identity,
/// > so data owned by managed accounts is refused to it (and data it writes is unowned).
public struct IdentityServerInterceptor: ServerInterceptor {
    /// The metadata key a verified assertion is read from, unless another is chosen: `x-identity-assertion`,
    /// the header the HTTP middlewares and IdentityTracing's instrument use.
    public static let defaultAssertionKey = "x-identity-assertion"

    /// Verifies the tokens (keys, trusted issuers, this service's audience, and its mode: single-use or
    /// reusable).
    public let verifier: IdentityAssertionVerifier
    /// Admits accounts, and answers their policies and tenants.
    public let policies: PolicyManager
    /// Where the assertion is looked for first (lower case, as gRPC metadata keys travel).
    public let assertionKey: String
    /// Whether `authorization: Bearer <token>` is accepted when the assertion key is absent.
    public let acceptsBearerToken: Bool
    /// Whether a token's `tid` must match the runtime's tenant of the account.
    public let checksTenant: Bool
    /// The start of each problem's `type` URI; the problem's code follows it.
    public let problemTypeBase: String
    /// The admission reason of each method, built once.
    let reasons = AdmissionReasons()

    /// - Parameters:
    ///   - verifier: the assertion verifier of this service (its audience, trusted issuers and keys).
    ///   - policies: the `PolicyManager` that admits accounts.
    ///   - assertionKey: the dedicated metadata key (default `x-identity-assertion`).
    ///   - acceptsBearerToken: accept `authorization: Bearer` too (default `true`).
    ///   - checksTenant: refuse a token whose `tid` is not the account's tenant (default `true`).
    ///   - problemTypeBase: the base of the problem `type` URIs.
    public init(
        verifier: IdentityAssertionVerifier, policies: PolicyManager,
        assertionKey: String = IdentityServerInterceptor.defaultAssertionKey, acceptsBearerToken: Bool = true,
        checksTenant: Bool = true, problemTypeBase: String = IdentityHTTPProblem.defaultTypeBase
    ) {
        self.verifier = verifier
        self.policies = policies
        self.assertionKey = assertionKey.lowercased()
        self.acceptsBearerToken = acceptsBearerToken
        self.checksTenant = checksTenant
        self.problemTypeBase = problemTypeBase
    }

    public func intercept<Input: Sendable, Output: Sendable>(
        request: StreamingServerRequest<Input>,
        context: ServerContext,
        next: @Sendable (StreamingServerRequest<Input>, ServerContext) async throws -> StreamingServerResponse<Output>
    ) async throws -> StreamingServerResponse<Output> {
        let admitted = try verify(request.metadata)
        let reason = reasons.reason(for: context.descriptor)
        // The handler's own errors travel inside the result, so that whatever withAdmittedIdentity throws is
        // a refusal at the door (an AdmissionError) and never an error of the handler.
        let outcome: Result<StreamingServerResponse<Output>, any Error>
        do {
            outcome = try await policies.withAdmittedIdentity(admitted.account, reason: reason) {
                await AdmittedIdentity.$current.withValue(admitted) {
                    do { return .success(try await next(request, context)) } catch { return .failure(error) }
                }
            }
        } catch let error as AdmissionError {
            throw IdentityProblem(.admission(error, typeBase: problemTypeBase))
        }
        return Self.bodyRuns(under: admitted, try outcome.get())
    }

    /// Steps 1 to 4: the verified identity of a call's metadata, its tenant and its policy, or the refusal.
    /// Verifying uses the token up (replay protection). It admits no one.
    public func verify(_ metadata: Metadata) throws(IdentityProblem) -> AdmittedIdentity {
        let verified: IdentityHTTPVerification
        do {
            // Several authorization values are read as one, joined with ", " as HTTP fields are: never
            // resolved by picking one. The usual single value is passed as it is, not copied.
            var authorization: String?
            for value in metadata[stringValues: "authorization"] {
                authorization = authorization.map { $0 + ", " + value } ?? value
            }
            let token = try IdentityHTTPToken(
                assertionHeader: assertionKey, values: Array(metadata[stringValues: assertionKey]),
                authorization: authorization,
                acceptsBearerToken: acceptsBearerToken, problemTypeBase: problemTypeBase)
            verified = try IdentityHTTPVerification(
                token: token, verifier: verifier, policies: policies, checksTenant: checksTenant,
                problemTypeBase: problemTypeBase)
        } catch {
            throw IdentityProblem(error)
        }
        return AdmittedIdentity(verified)
    }

    /// `response` with its body (the producer, which gRPC runs after the interceptors return) bound to the
    /// admitted account, as the handler was.
    static func bodyRuns<Output: Sendable>(
        under admitted: AdmittedIdentity, _ response: StreamingServerResponse<Output>
    ) -> StreamingServerResponse<Output> {
        guard case var .success(contents) = response.accepted else { return response }
        let producer = contents.producer
        contents.producer = { writer in
            try await IdentityContext.withThreadIdentity(admitted.account) {
                try await AdmittedIdentity.$current.withValue(admitted) { try await producer(writer) }
            }
        }
        return StreamingServerResponse(accepted: .success(contents))
    }
}

/// The admission reasons of a server's methods (`"gRPC /service/method"`), built at a method's first call and
/// then looked up: building the string for every call was a measurable part of the interceptor's cost. At most
/// ``capacity`` methods are kept (a server has a fixed set; the table is emptied if ever it fills).
final class AdmissionReasons: Sendable {
    static let capacity = 1_024
    private let table = Locked<[MethodDescriptor: AdmissionReason]>([:])

    func reason(for method: MethodDescriptor) -> AdmissionReason {
        if let known = table.withLock({ $0[method] }) { return known }
        let reason = AdmissionReason("gRPC /\(method.fullyQualifiedMethod)")
        table.withLock { table in
            if table.count >= Self.capacity { table.removeAll(keepingCapacity: true) }
            table[method] = reason
        }
        return reason
    }
}
