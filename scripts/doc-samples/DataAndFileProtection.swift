// What the samples of "Data and file protection" stand for; see scripts/doc-samples.py. Declarations only.
import Foundation
import IdentityProtection
import IdentityRuntime

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

// sample 1
let report: Data = placeholder()

// samples 3, 4, 5, 9
let data: DataProtectionManager = placeholder()
let files: FileProtectionManager = placeholder()

// sample 3
let upload: AsyncStream<[UInt8]> = placeholder()
let download: AsyncStream<[UInt8]> = placeholder()
final class Sink: Sendable {
    func write(_ piece: [UInt8]) throws {}
}
let sink: Sink = placeholder()

// sample 4
let report: Data = placeholder()
let documents: URL = placeholder()
let exports: URL = placeholder()

// sample 5
let path: String = placeholder()
let header: Data = placeholder()
let entry: Data = placeholder()

// sample 9
let payload: Data = placeholder()
let alice: Identity = placeholder()
let path: String = placeholder()
let report: Data = placeholder()
