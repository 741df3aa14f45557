import Foundation
import HTTPTypes
import Hummingbird
import IdentityHummingbird
import IdentityPolicy
import IdentityAssertions
import IdentityRuntime

/// Who a request runs for, as the handlers see it: from ``IdentityMiddleware`` (verified, admitted) or, on the
/// comparison routes, from ``PlainIdentityMiddleware`` (taken from a header, unverified) or
/// ``BareSignatureMiddleware`` (a bare signature check).
public struct Caller: Sendable {
    public let account: Identity
    public let tenant: String
    public let policy: Policy
}

/// The request context of both services.
public struct TenantRequestContext: IdentityRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var admittedIdentity: AdmittedIdentity?
    /// Set by the comparison baselines, ``PlainIdentityMiddleware`` and ``BareSignatureMiddleware``.
    public var plainCaller: Caller?

    public init(source: Source) {
        coreContext = .init(source: source)
        admittedIdentity = nil
        plainCaller = nil
    }

    /// The caller, whichever middleware found it.
    public var caller: Caller? {
        if let admitted = admittedIdentity {
            return Caller(account: admitted.account, tenant: admitted.tenant, policy: admitted.policy)
        }
        return plainCaller
    }
}

/// The baseline the load test compares ``IdentityMiddleware`` with: the same routes, with the identity taken
/// from the `x-identity-account` header as it comes, **unverified and not admitted**, then the rest of the
/// chain run under it (`IdentityContext.withThreadIdentity`) with its policy in the context. What a service
/// without signed identities would do; never expose it.
public struct PlainIdentityMiddleware: RouterMiddleware {
    public typealias Context = TenantRequestContext
    public static let header = HTTPField.Name("x-identity-account")!
    let policies: PolicyManager

    public init(policies: PolicyManager) {
        self.policies = policies
    }

    public func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let name = request.headers[Self.header], let account = try? Identity(validating: name), !account.isUnmanaged else {
            throw HTTPError(.unauthorized, message: "x-identity-account missing or invalid")
        }
        var context = context
        context.plainCaller = Caller(
            account: account, tenant: policies.tenant(for: account).rawValue, policy: policies.policy(for: account))
        return try await IdentityContext.withThreadIdentity(account) { try await next(request, context) }
    }
}

/// The second baseline of the load test: what a service that checks signed identities by hand writes. The
/// token in `x-identity-assertion` has its Ed25519 signature checked (one bare verification with the gateway's
/// public key: libsodium on Linux) and its `sub` read with `JSONSerialization`; then the rest of the chain runs under that
/// account, as in ``PlainIdentityMiddleware``. **No** algorithm, key ID, expiry, audience, issuer or replay
/// check, and no admission: compared with ``IdentityMiddleware`` it shows what the middleware costs beyond the
/// signature check that any signed identity needs. Never expose it.
public struct BareSignatureMiddleware: RouterMiddleware {
    public typealias Context = TenantRequestContext
    let key: AssertionVerificationKey
    let policies: PolicyManager

    public init(key: AssertionVerificationKey, policies: PolicyManager) {
        self.key = key
        self.policies = policies
    }

    public func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let token = request.headers[IdentityMiddleware<Context>.defaultAssertionHeader] else {
            throw HTTPError(.unauthorized, message: "x-identity-assertion missing")
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let signature = Self.base64URL(parts[2]), let claims = Self.base64URL(parts[1]),
              (try? key.isValidSignature(Array(signature), of: Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count)))) == true,
              let object = try? JSONSerialization.jsonObject(with: claims) as? [String: Any],
              let subject = object["sub"] as? String, let account = try? Identity(validating: subject), !account.isUnmanaged
        else {
            throw HTTPError(.unauthorized, message: "bad token")
        }
        var context = context
        context.plainCaller = Caller(
            account: account, tenant: policies.tenant(for: account).rawValue, policy: policies.policy(for: account))
        return try await IdentityContext.withThreadIdentity(account) { try await next(request, context) }
    }

    /// base64url without padding, through Foundation.
    static func base64URL(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
