import HTTPTypes
import Hummingbird
import IdentityHummingbird
import IdentityPolicy
import IdentityRuntime

/// Who a request runs for, as the handlers see it: from ``IdentityMiddleware`` (verified, admitted) or, on the
/// comparison routes, from ``PlainIdentityMiddleware`` (taken from a header, unverified).
public struct Caller: Sendable {
    public let account: Identity
    public let tenant: String
    public let policy: Policy
}

/// The request context of both services.
public struct TenantRequestContext: IdentityRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var admittedIdentity: AdmittedIdentity?
    /// Set by ``PlainIdentityMiddleware`` only.
    public var plainCaller: Caller?

    public init(source: Source) {
        coreContext = .init(source: source)
        admittedIdentity = nil
        plainCaller = nil
    }

    /// The caller, whichever middleware found it.
    public var caller: Caller? {
        if let admitted = admittedIdentity {
            return Caller(account: admitted.account, tenant: admitted.tenant ?? "", policy: admitted.policy)
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
            account: account, tenant: policies.tenant(of: account)?.rawValue ?? "", policy: policies.policy(for: account))
        return try await IdentityContext.withThreadIdentity(account) { try await next(request, context) }
    }
}
