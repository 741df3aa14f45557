#if !(canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO) && os(Linux)
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// libsodium, loaded at run time: the accelerator of Ed25519 verification on Linux.
///
/// Nothing is linked at build time and no header is needed, so a machine without `libsodium-dev` builds and
/// runs the package. At the first verification the process looks for the shared library (`libsodium.so.23`,
/// then the unversioned `libsodium.so`), resolves `sodium_init` and `crypto_sign_verify_detached`, and calls
/// `sodium_init()`. When the library is missing, fails to load, lacks a symbol, or `sodium_init()` fails,
/// ``Sodium/library`` is `nil` and verification uses libcrypto: the same answers (both only see inputs that
/// passed the strict pre-check), at libcrypto's cost.
///
/// `IDENTITY_SODIUM=off` in the environment keeps libsodium unloaded for the whole process (the libcrypto
/// backend, for tests and for the bench's comparison).
package enum Sodium {
    /// The two functions verification calls. Safety: C function pointers into a library that is never
    /// unloaded (`dlclose` is never called).
    package struct Library: @unchecked Sendable {
        typealias Verify = @convention(c) (
            UnsafePointer<UInt8>?, UnsafePointer<UInt8>?, UInt64, UnsafePointer<UInt8>?
        ) -> Int32
        let verifyDetached: Verify
        /// The file the library was loaded from (`libsodium.so.23` or `libsodium.so`).
        package let name: String
    }

    /// Why libsodium is not used, when it is not.
    package enum Unavailable: Sendable, Equatable {
        /// `IDENTITY_SODIUM=off`.
        case disabledByEnvironment
        /// Neither name loaded (`dlerror()`'s text for each, in order).
        case notFound(String)
        /// The library lacks a function (its name).
        case missingSymbol(String)
        /// `sodium_init()` returned this (-1).
        case initFailed(Int32)
    }

    /// The names looked for, in order.
    package static let libraryNames = ["libsodium.so.23", "libsodium.so"]

    /// The library, loaded and initialized once per process at the first use, or why not.
    package static let loaded: Result<Library, SodiumUnavailableError> = load()

    /// The library when it is usable, else `nil` (verification then uses libcrypto).
    package static let library: Library? = try? loaded.get()

    /// Which Ed25519 verification backend this process uses: `"libsodium"` (with the file it came from) or
    /// `"libcrypto"` (with why libsodium is not used).
    package static var backendDescription: String {
        switch loaded {
        case let .success(library): "libsodium (\(library.name), loaded at run time)"
        case let .failure(error): "libcrypto (libsodium not used: \(error.reason))"
        }
    }

    private static func load() -> Result<Library, SodiumUnavailableError> {
        if let setting = getenv("IDENTITY_SODIUM"), String(cString: setting) == "off" {
            return .failure(SodiumUnavailableError(.disabledByEnvironment))
        }
        var errors: [String] = []
        for name in libraryNames {
            guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else {
                // Every name's reason: a library that is there but does not load says so, not only the last miss.
                errors.append(dlerror().map { String(cString: $0) } ?? "\(name) not found")
                continue
            }
            guard let initSymbol = dlsym(handle, "sodium_init") else {
                return .failure(SodiumUnavailableError(.missingSymbol("sodium_init")))
            }
            guard let verifySymbol = dlsym(handle, "crypto_sign_verify_detached") else {
                return .failure(SodiumUnavailableError(.missingSymbol("crypto_sign_verify_detached")))
            }
            typealias Initialize = @convention(c) () -> Int32
            // 0: initialized now; 1: already initialized by someone else in the process; -1: failed.
            let status = unsafeBitCast(initSymbol, to: Initialize.self)()
            guard status >= 0 else { return .failure(SodiumUnavailableError(.initFailed(status))) }
            return .success(Library(verifyDetached: unsafeBitCast(verifySymbol, to: Library.Verify.self), name: name))
        }
        return .failure(SodiumUnavailableError(.notFound(errors.joined(separator: "; "))))
    }
}

/// Why libsodium is not used in this process (see ``Sodium``).
package struct SodiumUnavailableError: Error, Sendable, Equatable {
    package let cause: Sodium.Unavailable

    init(_ cause: Sodium.Unavailable) { self.cause = cause }

    package var reason: String {
        switch cause {
        case .disabledByEnvironment: "IDENTITY_SODIUM=off"
        case let .notFound(message): "not found: \(message)"
        case let .missingSymbol(symbol): "the library has no \(symbol)"
        case let .initFailed(status): "sodium_init() returned \(status)"
        }
    }
}
#endif
