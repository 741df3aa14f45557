import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

/// The one deprecated spelling left, `protect(_:identity:)`, forwards to `protect(_:owner:)`. The tests are themselves marked deprecated: calling a
/// deprecated name from a deprecated declaration is expected and warns nothing.
@Suite("The deprecated identity: label of the data calls forwards to owner:")
struct DeprecatedNamesTests {
    @Test("DataProtectionManager: identity: forms, sync and async")
    @available(*, deprecated, message: "calls the deprecated names on purpose")
    func dataProtectionManager() async throws {
        let fixture = try Fixture()
        let data = fixture.data
        #expect(try data.protectionInfo(data.protect(Data("x".utf8), identity: alice))?.owner == alice)
        #expect(try data.protectionInfo(data.protect("x", identity: carol))?.owner == carol)
        #expect(try await data.protectionInfo(data.async.protect(Data("x".utf8), identity: bob))?.owner == bob)
        #expect(try await data.protectionInfo(data.async.protect("x", identity: alice))?.owner == alice)
        let pieces = AsyncStream<[UInt8]> { continuation in
            continuation.yield(Array("stream".utf8))
            continuation.finish()
        }
        let sealed = try await data.protect(pieces, identity: alice, chunkSize: 4).collect()
        let asyncSealed = try await data.async.protect(AsyncStream<[UInt8]> { $0.finish() }, identity: bob).collect()
        for (envelope, plaintext) in [(sealed, Array("stream".utf8)), (asyncSealed, [])] {
            #expect(envelope != plaintext)
            let opened = try await data.unprotect(AsyncStream<[UInt8]> { $0.yield(envelope); $0.finish() }).collect()
            #expect(opened == plaintext)
        }
    }
}
