// The libcrypto branch only: Checks/SwiftCrypto compiles this target on swift-crypto (IDENTITY_SWIFT_CRYPTO),
// where neither libcrypto's Ed25519 nor libsodium verifies.
#if os(Linux) && !IDENTITY_SWIFT_CRYPTO
import Glibc

/// The libsodium point and scalar arithmetic the Ed25519 case generator crafts adversarial signatures with,
/// resolved at run time from the same shared library the verifier loads (no headers, no link): the differential
/// suite runs where the system has libsodium and is skipped where it does not.
struct SodiumArithmetic: @unchecked Sendable {
    typealias Reduce = @convention(c) (UnsafeMutablePointer<UInt8>?, UnsafePointer<UInt8>?) -> Void
    typealias Binary = @convention(c) (UnsafeMutablePointer<UInt8>?, UnsafePointer<UInt8>?, UnsafePointer<UInt8>?) -> Void
    typealias BinaryStatus = @convention(c) (UnsafeMutablePointer<UInt8>?, UnsafePointer<UInt8>?, UnsafePointer<UInt8>?) -> Int32
    typealias Unary = @convention(c) (UnsafeMutablePointer<UInt8>?, UnsafePointer<UInt8>?) -> Int32
    typealias Hash = @convention(c) (UnsafeMutablePointer<UInt8>?, UnsafePointer<UInt8>?, UInt64) -> Int32

    let scalarReduce: Reduce
    let scalarMul: Binary
    let scalarAdd: Binary
    let pointAdd: BinaryStatus
    let baseNoclamp: Unary
    let sha512: Hash

    /// The functions, or `nil` when the library is not on this machine.
    static let shared: SodiumArithmetic? = {
        guard let handle = dlopen("libsodium.so.23", RTLD_NOW | RTLD_LOCAL) ?? dlopen("libsodium.so", RTLD_NOW | RTLD_LOCAL) else {
            return nil
        }
        func symbol<T>(_ name: String, as type: T.Type) -> T? {
            dlsym(handle, name).map { unsafeBitCast($0, to: type) }
        }
        guard let reduce = symbol("crypto_core_ed25519_scalar_reduce", as: Reduce.self),
              let mul = symbol("crypto_core_ed25519_scalar_mul", as: Binary.self),
              let add = symbol("crypto_core_ed25519_scalar_add", as: Binary.self),
              let pointAdd = symbol("crypto_core_ed25519_add", as: BinaryStatus.self),
              let base = symbol("crypto_scalarmult_ed25519_base_noclamp", as: Unary.self),
              let sha512 = symbol("crypto_hash_sha512", as: Hash.self),
              let initialize = symbol("sodium_init", as: (@convention(c) () -> Int32).self),
              initialize() >= 0
        else { return nil }
        return SodiumArithmetic(
            scalarReduce: reduce, scalarMul: mul, scalarAdd: add, pointAdd: pointAdd, baseNoclamp: base, sha512: sha512)
    }()

    static var isAvailable: Bool { shared != nil }
}

// The libsodium names the generator is written with, forwarded to the loaded library (call only when
// `SodiumArithmetic.isAvailable`).
func crypto_core_ed25519_scalar_reduce(_ r: UnsafeMutablePointer<UInt8>, _ s: UnsafePointer<UInt8>) {
    SodiumArithmetic.shared!.scalarReduce(r, s)
}

func crypto_core_ed25519_scalar_mul(_ z: UnsafeMutablePointer<UInt8>, _ x: UnsafePointer<UInt8>, _ y: UnsafePointer<UInt8>) {
    SodiumArithmetic.shared!.scalarMul(z, x, y)
}

func crypto_core_ed25519_scalar_add(_ z: UnsafeMutablePointer<UInt8>, _ x: UnsafePointer<UInt8>, _ y: UnsafePointer<UInt8>) {
    SodiumArithmetic.shared!.scalarAdd(z, x, y)
}

func crypto_core_ed25519_add(_ r: UnsafeMutablePointer<UInt8>, _ p: UnsafePointer<UInt8>, _ q: UnsafePointer<UInt8>) -> Int32 {
    SodiumArithmetic.shared!.pointAdd(r, p, q)
}

func crypto_scalarmult_ed25519_base_noclamp(_ q: UnsafeMutablePointer<UInt8>, _ n: UnsafePointer<UInt8>) -> Int32 {
    SodiumArithmetic.shared!.baseNoclamp(q, n)
}

@discardableResult
func crypto_hash_sha512(_ out: UnsafeMutablePointer<UInt8>, _ input: UnsafePointer<UInt8>, _ count: UInt64) -> Int32 {
    SodiumArithmetic.shared!.sha512(out, input, count)
}
#endif
