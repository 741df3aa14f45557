import HTTPTypes
import Hummingbird

/// A request context that can carry the identity ``IdentityMiddleware`` admitted. Adopt it in your own
/// context with one stored property:
///
/// ```swift
/// struct AppContext: IdentityRequestContext {
///     var coreContext: CoreRequestContextStorage
///     var admittedIdentity: AdmittedIdentity?
///     init(source: Source) {
///         coreContext = .init(source: source)
///         admittedIdentity = nil
///     }
/// }
/// ```
///
/// The middleware sets ``admittedIdentity`` before it calls the rest of the chain; it is `nil` before the
/// middleware and in routes that are not behind it.
public protocol IdentityRequestContext: RequestContext {
    /// The admitted identity, its tenant and its policy; set by ``IdentityMiddleware``.
    var admittedIdentity: AdmittedIdentity? { get set }
}

/// A ready-made ``IdentityRequestContext`` for applications that need nothing else in their context.
public struct BasicIdentityRequestContext: IdentityRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var admittedIdentity: AdmittedIdentity?

    public init(source: Source) {
        coreContext = .init(source: source)
        admittedIdentity = nil
    }
}
