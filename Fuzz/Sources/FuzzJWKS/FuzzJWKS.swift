// libFuzzer target: the JWKS reader (AssertionKeySet(jwks:)). Any input: a key set or a typed
// AssertionError.invalidKeySet. A set it reads must publish a document it reads back to the same set.
import IdentityAssertions

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJWKS(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: start, count: count)
    do throws(AssertionError) {
        let keys = try AssertionKeySet(jwks: bytes)
        guard let again = try? AssertionKeySet(jwks: keys.jwks), again == keys else {
            fatalError("a key set read from JWKS does not read back from its own JWKS")
        }
    } catch {
        guard case .invalidKeySet = error else { fatalError("not a key set refusal: \(error)") }
    }
    return 0
}
