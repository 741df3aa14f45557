// libFuzzer target: the data-envelope reader (protectionInfo, unprotect) and the protected-stream reader
// (FileProtectionManager.unprotect(atPath:toPath:)). Every input must give a typed error or a consistent answer; a crash, a
// trap or an inconsistency is a finding.
import Foundation
import FuzzSupport
import IdentityProtection

private let streamInput = FuzzFixture.directory + "/root/stream.in"
private let streamOutput = FuzzFixture.directory + "/root/stream.out"
private let files = FuzzFixture.files(chunkSize: 64 * 1024)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEnvelope(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let input = Data(bytes: start, count: count)
    let manager = FuzzFixture.data
    let info = try? manager.protectionInfo(input)
    if let opened = try? manager.unprotect(input) {
        if info == nil && opened != input { fatalError("unprotected data changed by unprotect") }
        if let info, let again = try? manager.protect(opened, owner: info.owner), (try? manager.unprotect(again)) != opened {
            fatalError("protect/unprotect round trip lost data")
        }
    }
    // The same bytes as a stream: pass-through for non-streams, typed errors for damaged ones.
    if FileManager.default.createFile(atPath: streamInput, contents: input) {
        if (try? files.unprotect(atPath: streamInput, toPath: streamOutput)) != nil,
           input.first != 0x89, FileManager.default.contents(atPath: streamOutput) != input {
            fatalError("a non-stream input was not passed through unchanged")
        }
    }
    return 0
}
