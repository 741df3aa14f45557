// libFuzzer target: the JSON policy-document parser. Any input: a document or a typed PolicyDocumentError.
import Foundation
import IdentityPolicy

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPolicyDocument(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    _ = try? PolicyDocument(json: Data(bytes: start, count: count), path: "fuzz.json")
    return 0
}
