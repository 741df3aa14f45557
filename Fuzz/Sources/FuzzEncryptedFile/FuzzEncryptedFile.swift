// libFuzzer target: the encrypted-file readers (readFile, protectionInfo, isFileEncrypted) and ProtectedFile
// (open, size, read(at:), readToEnd, then a write and a read back). Both readers must agree on the content
// of any file they both accept.
import Foundation
import FuzzSupport
import IdentityProtection

private let path = FuzzFixture.directory + "/root/file.in"
private let files = FuzzFixture.files(chunkSize: 16)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEncryptedFile(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard FileManager.default.createFile(atPath: path, contents: Data(bytes: start, count: count)) else { return 0 }
    _ = try? files.isFileEncrypted(atPath: path)
    _ = try? files.protectionInfo(atPath: path)
    let whole = try? files.readFile(atPath: path)
    if let file = try? files.openProtectedFile(atPath: path, options: [.read, .write]) {
        defer { try? file.close() }
        if let size = try? file.size() {
            _ = try? file.read(at: size / 2, upToCount: 40)
            _ = try? file.read(at: size &+ 5, upToCount: 10)
        }
        if let all = try? file.readToEnd(), let whole, file.isEncrypted, Data(all) != whole {
            fatalError("ProtectedFile and readFile disagree on the content")
        }
        let probe: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
        let offset = UInt64(count % 70)
        if (try? file.write(probe, at: offset)) != nil, let back = try? file.read(at: offset, upToCount: probe.count), back != probe {
            fatalError("a write did not read back")
        }
    }
    return 0
}
