import IdentityAssertions
import IdentityRuntime
import ServiceContextModule

/// The ``ServiceContext`` key of the identity a piece of work is for. Its name, for instruments and loggers
/// that print context items, is `identity`.
public enum IdentityServiceContextKey: ServiceContextKey {
    public typealias Value = Identity
    public static var nameOverride: String? { "identity" }
}

/// The ``ServiceContext`` key of the verified identity assertion an incoming request carried.
public enum IdentityAssertionServiceContextKey: ServiceContextKey {
    public typealias Value = IdentityAssertion
    public static var nameOverride: String? { "identity-assertion" }
}

/// The ``ServiceContext`` key of the reason an incoming identity assertion was refused.
public enum IdentityAssertionErrorServiceContextKey: ServiceContextKey {
    public typealias Value = AssertionError
    public static var nameOverride: String? { "identity-assertion-error" }
}

extension ServiceContext {
    /// The identity this context's work is for, or `nil`.
    ///
    /// Setting it on a context value changes only that value. To run code under it, bind the context with
    /// ``IdentityRuntime/IdentityContext/withServiceContext(_:operation:)``, which makes it the thread
    /// identity too, or use ``withIdentity(_:operation:)``.
    public var identity: Identity? {
        get { self[IdentityServiceContextKey.self] }
        set { self[IdentityServiceContextKey.self] = newValue }
    }

    /// The verified assertion (account, tenant, issuer, token ID…) that ``IdentityAssertionInstrument``
    /// extracted from an incoming carrier, or `nil`.
    public var identityAssertion: IdentityAssertion? {
        get { self[IdentityAssertionServiceContextKey.self] }
        set { self[IdentityAssertionServiceContextKey.self] = newValue }
    }

    /// Why the incoming carrier's identity assertion was refused, or `nil` (accepted, or none was carried).
    public var identityAssertionError: AssertionError? {
        get { self[IdentityAssertionErrorServiceContextKey.self] }
        set { self[IdentityAssertionErrorServiceContextKey.self] = newValue }
    }

    /// The current service context (``ServiceContext/current``, else ``ServiceContext/topLevel``) with its
    /// ``identity`` brought up to date with the runtime: the caller's thread identity when one is set
    /// (`withThreadIdentity`, a wrapped queue block, an inherited task-local), else the context's own.
    ///
    /// Use it where a context is handed on (`withSpan(context:)`, an instrument's `inject`): a plain
    /// `ServiceContext.current?.identity` does not see an identity bound with `withThreadIdentity`, because
    /// the runtime cannot bind swift-service-context's task-local from its own scopes.
    ///
    /// > Note: an inner `withThreadIdentity(nil)` cannot hide an identity stored in the bound context itself;
    /// > bind a context without one (``withIdentity(_:operation:)`` with `nil`) to hide both.
    public static var currentWithIdentity: ServiceContext {
        var context = ServiceContext.current ?? .topLevel
        if let thread = IdentityContext.currentThreadIdentity { context.identity = thread }
        return context
    }

    /// Runs `operation` with `identity` both in the current service context and as the thread identity.
    ///
    /// The current context (or the top-level one) is bound again with ``identity`` replaced; `nil` removes it
    /// and hides any outer thread identity. Everything else in the context (trace IDs, baggage) is kept.
    public static func withIdentity<R>(_ identity: Identity?, operation: () throws -> R) rethrows -> R {
        var context = ServiceContext.current ?? .topLevel
        context.identity = identity
        return try IdentityContext.withServiceContext(context, operation: operation)
    }

    /// Runs `operation` with `identity` both in the current service context and as the thread identity, across
    /// suspension points; child tasks and `Task {}` created inside inherit both.
    public static func withIdentity<R>(
        _ identity: Identity?,
        isolation: isolated (any Actor)? = #isolation,
        operation: () async throws -> R
    ) async rethrows -> R {
        var context = ServiceContext.current ?? .topLevel
        context.identity = identity
        return try await IdentityContext.withServiceContext(context, isolation: isolation, operation: operation)
    }
}
