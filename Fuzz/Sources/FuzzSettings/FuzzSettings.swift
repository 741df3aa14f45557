// libFuzzer target: the runtime-settings parser. Any input: settings or a typed RuntimeSettingsError.
import Foundation
import IdentityPolicy

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSettings(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    _ = try? RuntimeSettings(json: Data(bytes: start, count: count))
    return 0
}
