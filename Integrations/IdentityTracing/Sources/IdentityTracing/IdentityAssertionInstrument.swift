import Foundation
import IdentityAssertions
import IdentityRuntime
import Instrumentation
import ServiceContextModule

/// A swift-distributed-tracing `Instrument` that carries the identity between services as a signed identity
/// assertion (a compact JWS signed with Ed25519, see ``IdentityAssertions/IdentityAssertionSigner``).
///
/// - **Inject** (outgoing): the identity is the context's ``ServiceContext/identity``, else the caller's
///   thread identity (``IdentityRuntime/IdentityContext/currentThreadIdentity``; never the process
///   identity, so background work is not signed as the primary user). When there is one and it is not
///   unmanaged, a fresh assertion for ``audience``, valid for ``lifetime`` seconds with a new token ID, is
///   written under ``headerName`` (default `x-identity-assertion`) as the bare token, no `Bearer` prefix.
///   No identity, an unmanaged one, no signer, or a signing failure: nothing is written.
/// - **Extract** (incoming): the header's token is verified with ``verifier`` (signature, key ID, issuer,
///   audience, expiry, replay). Accepted: ``ServiceContext/identity`` and
///   ``ServiceContext/identityAssertion`` are set. Refused: both are removed and the reason is stored in
///   ``ServiceContext/identityAssertionError``. No header: both are removed, no error. Without a verifier,
///   extraction leaves the context unchanged.
///
/// A dedicated header is used rather than `Authorization`, which the caller's own credentials (an OAuth token
/// of the end user or of the calling service) usually occupy; the two compose.
///
/// ```swift
/// let instrument = IdentityAssertionInstrument(
///     signer: IdentityAssertionSigner(key: key, keyID: "2026-11", issuer: "frontend"), audience: "documents",
///     verifier: IdentityAssertionVerifier(keys: ["2026-11": key.publicKey], issuers: ["frontend"], audience: "frontend"))
/// InstrumentationSystem.bootstrap(instrument)
/// ```
public struct IdentityAssertionInstrument: Instrument {
    /// The header the assertion travels in unless another is chosen: `x-identity-assertion`.
    public static let defaultHeaderName = "x-identity-assertion"

    /// Signs outgoing assertions; `nil`: inject nothing.
    public let signer: IdentityAssertionSigner?
    /// The `aud` of outgoing assertions: the service called.
    public let audience: String
    /// Verifies incoming assertions; `nil`: extract nothing.
    public let verifier: IdentityAssertionVerifier?
    /// The carrier key (HTTP header name, lower case).
    public let headerName: String
    /// Seconds an outgoing assertion is valid.
    public let lifetime: TimeInterval
    /// The tenant claim (`tid`) of an outgoing assertion for an account, or `nil` for none.
    public let tenant: @Sendable (Identity) -> String?

    /// - Parameters:
    ///   - signer: signs outgoing assertions (`nil` for a service that only receives).
    ///   - audience: the called service's name, the `aud` of outgoing assertions.
    ///   - verifier: verifies incoming assertions (`nil` for a client that only calls).
    ///   - headerName: the carrier key, `x-identity-assertion` by default.
    ///   - lifetime: seconds an outgoing assertion is valid (default 60).
    ///   - tenant: the tenant of an account, for the `tid` claim; by default the tenant of a verified incoming
    ///     assertion for the same account, else none. Pass `{ PolicyManager.shared.tenant(for: $0).rawValue }`
    ///     to use the policy module's.
    public init(
        signer: IdentityAssertionSigner? = nil, audience: String = "", verifier: IdentityAssertionVerifier? = nil,
        headerName: String = IdentityAssertionInstrument.defaultHeaderName, lifetime: TimeInterval = 60,
        tenant: @escaping @Sendable (Identity) -> String? = { _ in nil }
    ) {
        self.signer = signer
        self.audience = audience
        self.verifier = verifier
        self.headerName = headerName
        self.lifetime = lifetime
        self.tenant = tenant
    }

    public func inject<Carrier, Inject>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject: Injector, Inject.Carrier == Carrier {
        guard let signer, let identity = context.identity ?? IdentityContext.currentThreadIdentity,
              !identity.isUnmanaged
        else { return }
        let forwarded = context.identityAssertion.flatMap { $0.account == identity ? $0.tenant : nil }
        // No token when signing fails: the peer then sees no identity and refuses, never another identity.
        guard let token = try? signer.sign(
            account: identity, tenant: tenant(identity) ?? forwarded, audience: audience, lifetime: lifetime)
        else { return }
        injector.inject(token, forKey: headerName, into: &carrier)
    }

    public func extract<Carrier, Extract>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract: Extractor, Extract.Carrier == Carrier {
        guard let verifier else { return }
        context.identity = nil
        context.identityAssertion = nil
        context.identityAssertionError = nil
        guard let token = extractor.extract(key: headerName, from: carrier) else { return }
        do {
            let assertion = try verifier.verify(token)
            context.identity = assertion.account
            context.identityAssertion = assertion
        } catch {
            context.identityAssertionError = error
        }
    }
}
