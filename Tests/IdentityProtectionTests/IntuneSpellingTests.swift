import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// `protect(_:identity:)`, the Intune App SDK's label, is `protect(_:owner:)` under another name: same owner,
/// same envelope, same isolation.
@Suite("The Intune spelling protect(_:identity:) is protect(_:owner:)")
struct IntuneSpellingTests {
    @Test("Data and String: the identity: label names the owner, and the owner's data stays isolated")
    func identityLabelNamesTheOwner() throws {
        let fixture = try Fixture(isolated: true)
        let data = fixture.data
        let plaintext = Data("quarterly numbers".utf8)
        let sealed = try data.protect(plaintext, identity: alice)
        #expect(sealed.range(of: plaintext) == nil)
        #expect(try data.protectionInfo(sealed)?.owner == alice)
        #expect(try IdentityContext.withThreadIdentity(alice) { try data.unprotect(sealed) } == plaintext)
        let refusal = protectionError { try IdentityContext.withThreadIdentity(carol) { try data.unprotect(sealed) } }
        #expect(refusal == .accessDenied(identity: alice, reader: carol))
        #expect(try data.protectionInfo(data.protect("x", identity: bob))?.owner == bob)
    }
}
