import Foundation
@testable import IdentityAssertions
import IdentityRuntime
import Testing

/// Records what a verifier tells its observer, in order.
final class RecordingVerificationObserver: AssertionVerificationObserver {
    enum Seen: Sendable, Equatable {
        case accepted(Identity, fromCache: Bool)
        case refused(Int)
    }

    private let values = LockedValue<[Seen]>([])
    var all: [Seen] { values.withLock { $0 } }

    func didAccept(_ assertion: IdentityAssertion, fromCache: Bool) {
        values.withLock { $0.append(.accepted(assertion.account, fromCache: fromCache)) }
    }

    func didRefuse(_ error: AssertionError) {
        values.withLock { $0.append(.refused(error.code)) }
    }
}

@Suite("The verifier's observer: one outcome per verification")
struct VerificationObserverTests {
    func verifier(_ f: AssertionFixture, mode: IdentityAssertionVerifier.Mode, observer: RecordingVerificationObserver)
        -> IdentityAssertionVerifier {
        let clock = f.clock
        return IdentityAssertionVerifier(
            keys: ["k1": f.key.publicKey], issuers: ["frontend"], audience: "documents", mode: mode, observer: observer,
            clock: { clock.date })
    }

    @Test("single-use: accepted once, then refused as replayed; malformed and wrong-audience tokens refused")
    func singleUse() throws {
        let f = try AssertionFixture()
        let observer = RecordingVerificationObserver()
        let verifier = verifier(f, mode: .singleUse, observer: observer)
        let token = try f.token()
        _ = try verifier.verify(token)
        #expect(refusalCode(verifier, token) == 10)
        #expect(refusalCode(verifier, "not.a.token") == 1)
        #expect(refusalCode(verifier, try f.token(audience: "audit")) == 8)
        #expect(observer.all == [.accepted("alice@contoso.com", fromCache: false), .refused(10), .refused(1), .refused(8)])
    }

    @Test("reusable: the first use is a full verification, later ones come from the cache")
    func reusable() throws {
        let f = try AssertionFixture()
        let observer = RecordingVerificationObserver()
        let verifier = verifier(f, mode: .reusable, observer: observer)
        let token = try f.token()
        for _ in 0..<3 { _ = try verifier.verify(token) }
        f.clock.advance(3_600)
        #expect(refusalCode(verifier, token) == 6)
        #expect(observer.all == [
            .accepted("alice@contoso.com", fromCache: false), .accepted("alice@contoso.com", fromCache: true),
            .accepted("alice@contoso.com", fromCache: true), .refused(6),
        ])
    }

    @Test("without an observer the verifier answers the same")
    func withoutObserver() throws {
        let f = try AssertionFixture()
        #expect(f.verifier.observer == nil)
        let token = try f.token()
        #expect(try f.verifier.verify(token).account == "alice@contoso.com")
        #expect(refusalCode(f.verifier, token) == 10)
    }
}
