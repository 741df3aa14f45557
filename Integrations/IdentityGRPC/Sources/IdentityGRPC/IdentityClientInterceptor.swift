import Foundation
import GRPCCore
import IdentityAssertions
import IdentityRuntime

/// A gRPC client interceptor that sends each call with a token for the calling task's own identity, for
/// ``IdentityServerInterceptor`` (or an HTTP middleware of this project) on the other side.
///
/// **Whose token.** The identity is the caller's thread identity (`IdentityContext.currentThreadIdentity`) when
/// the call starts, the rule IdentityTracing's instrument follows too:
/// - inside `IdentityContext.withThreadIdentity(_:operation:)`, a handler behind ``IdentityServerInterceptor``,
///   an `IdentityDispatchQueue` block or an `IdentityOperationQueue` operation: that account;
/// - no thread identity: **no token**, even when a process identity is set (background work is never signed
///   as the primary user); the server then refuses the call (`unauthenticated`, `missing-token`);
/// - the unmanaged identity (`""`): no token;
/// - never another identity's: the metadata the interceptor writes is removed from the request first, so a
///   token left in the request's metadata by the caller never travels in its place.
///
/// **Which token**, by the initializer:
/// - ``init(signer:audience:lifetime:assertionKey:tenant:)``: a fresh single-use assertion per call, signed
///   for the called service's audience with a new token ID, under the assertion key
///   (`x-identity-assertion`) as the bare token. The interceptor owns that key; an `authorization` value of
///   the caller (its own OAuth token) is left alone and travels beside it.
/// - ``init(tokenProvider:)``: a reusable bearer token from an ``IdentityTokenProvider`` (for example
///   ``ReusableTokenProvider``) as `authorization: Bearer <token>`. The interceptor owns `authorization` and
///   the assertion key (which a server reads first).
///
/// When signing fails or the provider throws, the call fails here with `unauthenticated` and is not sent.
///
/// ```swift
/// let signer = IdentityAssertionSigner(key: key, keyID: "2026-11", issuer: "frontend")
/// try await withGRPCClient(
///     transport: transport, interceptors: [IdentityClientInterceptor(signer: signer, audience: "documents")]
/// ) { client in
///     try await IdentityContext.withThreadIdentity("alice@contoso.com") {
///         try await documents.read(request, client: client)   // sent with alice's assertion
///     }
/// }
/// ```
///
/// > Note: Request messages of a streaming call are produced by a child task of the call, which inherits the
/// > caller's identity; the token is chosen once, when the call starts.
public struct IdentityClientInterceptor: ClientInterceptor {
    enum Credential: Sendable {
        case assertion(signer: IdentityAssertionSigner, audience: String, lifetime: TimeInterval, tenant: @Sendable (Identity) -> String?)
        case bearer(any IdentityTokenProvider)
        /// A ``ReusableTokenProvider``, asked synchronously for its kept `authorization` value: no asynchronous
        /// call through the protocol, no string built per call.
        case reusable(ReusableTokenProvider)
    }

    let credential: Credential
    /// The metadata key of single-use assertions (and, in bearer mode, a key cleared so that a stale
    /// assertion cannot win over the bearer token).
    public let assertionKey: String

    /// Sends a fresh single-use assertion with each call.
    ///
    /// - Parameters:
    ///   - signer: signs the assertions (its key, key ID and issuer).
    ///   - audience: the called service's name, the `aud` of the assertions.
    ///   - lifetime: seconds an assertion is valid (default 60).
    ///   - assertionKey: the metadata key (default `x-identity-assertion`).
    ///   - tenant: the tenant claim (`tid`) of an account's assertion, or `nil` for none (the default). Pass
    ///     `{ policies.tenant(for: $0).rawValue }` to use the policy module's.
    public init(
        signer: IdentityAssertionSigner, audience: String, lifetime: TimeInterval = 60,
        assertionKey: String = IdentityServerInterceptor.defaultAssertionKey,
        tenant: @escaping @Sendable (Identity) -> String? = { _ in nil }
    ) {
        credential = .assertion(signer: signer, audience: audience, lifetime: lifetime, tenant: tenant)
        self.assertionKey = assertionKey.lowercased()
    }

    /// Sends the provider's bearer token of the caller's identity with each call.
    ///
    /// - Parameters:
    ///   - tokenProvider: answers an account's token (``ReusableTokenProvider`` or your own).
    ///   - assertionKey: the assertion key to clear (default `x-identity-assertion`).
    public init(
        tokenProvider: some IdentityTokenProvider,
        assertionKey: String = IdentityServerInterceptor.defaultAssertionKey
    ) {
        if let reusable = tokenProvider as? ReusableTokenProvider {
            credential = .reusable(reusable)
        } else {
            credential = .bearer(tokenProvider)
        }
        self.assertionKey = assertionKey.lowercased()
    }

    public func intercept<Input: Sendable, Output: Sendable>(
        request: StreamingClientRequest<Input>,
        context: ClientContext,
        next: (StreamingClientRequest<Input>, ClientContext) async throws -> StreamingClientResponse<Output>
    ) async throws -> StreamingClientResponse<Output> {
        var request = request
        request.metadata.removeAllValues(forKey: assertionKey)
        switch credential {
        case .bearer, .reusable: request.metadata.removeAllValues(forKey: "authorization")
        case .assertion: break
        }
        guard let identity = IdentityContext.currentThreadIdentity, !identity.isUnmanaged else {
            return try await next(request, context)
        }
        switch credential {
        case let .assertion(signer, audience, lifetime, tenant):
            let token: String
            do {
                token = try signer.sign(account: identity, tenant: tenant(identity), audience: audience, lifetime: lifetime)
            } catch {
                throw Self.noToken(for: identity, context: context, cause: error)
            }
            request.metadata.addString(token, forKey: assertionKey)
        case let .bearer(provider):
            let token: String
            do { token = try await provider.token(for: identity) } catch {
                throw Self.noToken(for: identity, context: context, cause: error)
            }
            request.metadata.addString("Bearer " + token, forKey: "authorization")
        case let .reusable(provider):
            let authorization: String
            do { authorization = try provider.currentAuthorization(for: identity) } catch {
                throw Self.noToken(for: identity, context: context, cause: error)
            }
            request.metadata.addString(authorization, forKey: "authorization")
        }
        return try await next(request, context)
    }

    static func noToken(for identity: Identity, context: ClientContext, cause: any Error) -> RPCError {
        RPCError(
            code: .unauthenticated,
            message: "no identity token for \(identity.name) to call \(context.descriptor): \(cause)", cause: cause)
    }
}
