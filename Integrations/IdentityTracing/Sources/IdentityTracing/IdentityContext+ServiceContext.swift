import IdentityRuntime
import ServiceContextModule

extension IdentityContext {
    /// Binds `context` as ``ServiceContext/current`` and its ``ServiceContext/identity`` as the thread
    /// identity for `operation`, then restores both.
    ///
    /// The context is authoritative: a context without an identity runs `operation` with *no* thread identity,
    /// hiding any outer one, so that an incoming request never runs under an identity it did not prove. Inside,
    /// `ServiceContext.current?.identity == IdentityContext.currentThreadIdentity`.
    ///
    /// ```swift
    /// var context = ServiceContext.topLevel
    /// instrument.extract(request.headers, into: &context, using: HeadersExtractor())
    /// try IdentityContext.withServiceContext(context) {
    ///     try handle(request)   // runs under the verified identity, or none
    /// }
    /// ```
    public static func withServiceContext<R>(_ context: ServiceContext, operation: () throws -> R) rethrows -> R {
        try ServiceContext.$current.withValue(context) {
            try withThreadIdentity(context.identity, operation: operation)
        }
    }

    /// Binds `context` as ``ServiceContext/current`` and its ``ServiceContext/identity`` as the thread
    /// identity for `operation`, across suspension points, then restores both. `Task {}`, `async let` and
    /// task-group children created inside inherit both. A context without an identity hides any outer one.
    public static func withServiceContext<R>(
        _ context: ServiceContext,
        isolation: isolated (any Actor)? = #isolation,
        operation: () async throws -> R
    ) async rethrows -> R {
        try await ServiceContext.$current.withValue(context, operation: {
            try await withThreadIdentity(context.identity, isolation: isolation, operation: operation)
        }, isolation: isolation)
    }
}
