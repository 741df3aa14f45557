import IdentityRuntime
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a protection operation failed. Every case has a stable numeric ``code`` (100...115) that is part of
/// the public contract: log it, compare it, show it.
///
/// | code | case | meaning |
/// |---|---|---|
/// | 100 | ``invalidEnvelope(reason:)`` | not a well-formed envelope or encrypted file: truncated, trailing bytes, reserved bits set, bad length field |
/// | 101 | ``unsupportedVersion(_:)`` | a well-formed magic with a format version this build cannot read |
/// | 102 | ``authenticationFailed`` | AES-GCM tag check failed: tampered header or body, wrong key, reordered or dropped chunk |
/// | 103 | ``keyNotFound(identity:keyID:)`` | the owner has no key with that id (never had it, or it was destroyed by a wipe) |
/// | 104 | ``invalidIdentity(reason:)`` | an owner field that is not valid UTF-8, too long or not a valid identity; an owner whose name `Identity(validating:)` rejects, for new data (nothing is made for it, no key either); an identity that cannot own encrypted data |
/// | 105 | ``fileNotFound(path:)`` | no such file, or the path names something other than a regular file (a directory, a socket), or a `URL` that is not a file URL (`path` is its `absoluteString`) |
/// | 106 | ``ioFailure(path:operation:errno:)`` | the operating system refused or failed: permission denied, read-only, no space, I/O error |
/// | 107 | ``cryptoBackendFailure(_:)`` | the crypto library failed (random generator, cipher setup); not caused by the input |
/// | 108 | ``accessDenied(identity:reader:)`` | the data belongs to a managed account that the reader (the effective file identity), or the recipient of a transfer, may not see: no byte of plaintext is returned |
/// | 109 | ``accountBlocked(identity:reason:)`` | the owner is a blocked account: its data is neither created nor read until it is unblocked |
/// | 110 | ``encryptionRequired(path:)`` | a plaintext handle was asked for a file that must be encrypted at rest: use ``ProtectedFile`` |
/// | 111 | ``fileClosed(path:)`` | a ``ProtectedFile`` was used after ``ProtectedFile/close()`` |
/// | 112 | ``invalidOffset(path:offset:)`` | an offset or size beyond what the file format can address |
/// | 113 | ``keyStoreUnavailable(reason:)`` | a remote ``KeyStore`` (a fleet's database) could not answer in time and has no usable cached key: the operation was refused, nothing was created or returned |
/// | 114 | ``insecureDirectory(path:reason:)`` | a key or protection state directory that other users could read or enter and that could not be made private (`0700`), that belongs to another user, or that lies below a directory another user could write to |
/// | 115 | ``policyUnavailable(reason:)`` | the policy could not decide (its source has not loaded yet): the operation on owned data was refused, nothing was written or returned |
/// | 116 | ``reservedPath(path:)`` | a file API was given a path inside the manager's state directory or its key store's directory: the runtime's own files are not data, and are neither read nor written through its file APIs |
///
/// A failed operation never returns plaintext that was not authenticated and never leaves a modified
/// original behind.
public enum ProtectionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// 100: the input is not a well-formed envelope or encrypted file.
    case invalidEnvelope(reason: String)
    /// 101: the format version is not one this build reads.
    case unsupportedVersion(UInt8)
    /// 102: the authentication tag did not verify; the input was tampered with or belongs to another key.
    case authenticationFailed
    /// 103: the key store has no key with `keyID` for `identity` (`keyID` is `nil` when the identity has no
    /// keys at all).
    case keyNotFound(identity: Identity, keyID: ProtectionKeyID?)
    /// 104: an owner identity field or argument that cannot be used.
    case invalidIdentity(reason: String)
    /// 105: the path does not exist or is not a regular file (for a directory operation: not a directory),
    /// or a `URL` given for a file is not a file URL of this host (`path` is then its `absoluteString`).
    case fileNotFound(path: String)
    /// 106: an operating-system call failed (`errno` is its error number; `EACCES`, `EROFS`, `ENOSPC`,
    /// `ENOTDIR`, `EIO`, ...).
    case ioFailure(path: String, operation: String, errno: Int32)
    /// 107: the crypto backend (CryptoKit or libcrypto) reported a failure unrelated to the input.
    case cryptoBackendFailure(String)
    /// 108: `identity` owns the data and `reader` (the effective file identity of the code asking, or the
    /// recipient of a transfer; `nil`: none) may not see it. No plaintext is returned, nothing is changed.
    case accessDenied(identity: Identity, reader: Identity?)
    /// 109: the owner account is blocked (`reason` is `IdentityPolicy.BlockAccountReason`'s raw value); no
    /// plaintext is returned and nothing is created for it.
    case accountBlocked(identity: Identity, reason: Int)
    /// 110: a plaintext handle (``FileProtectionManager/openFile(atPath:options:permissions:)``) was asked for a
    /// file that is encrypted, or whose owner's policy requires encryption at rest. Open it as a
    /// ``ProtectedFile`` instead.
    case encryptionRequired(path: String)
    /// 111: a ``ProtectedFile`` was used after it was closed.
    case fileClosed(path: String)
    /// 112: an offset or size that the file format cannot address (beyond 2^62 bytes of content).
    case invalidOffset(path: String, offset: UInt64)
    /// 113: the ``KeyStore`` keeps its keys elsewhere (a database shared by a fleet of instances) and could not
    /// reach it within its timeout, and holds no cached key it may still use. Nothing was returned or created;
    /// retrying later may succeed. `reason` says what failed (no key material, no plaintext).
    case keyStoreUnavailable(reason: String)
    /// 114: a directory that must be private to this process's user (``FileKeyStore``'s key directory, a
    /// ``FileProtectionManager``'s state directory) belongs to another user, or others could read or enter it
    /// and it could not be tightened to `0700`, or a directory above it could be written by another user (it
    /// belongs to a user other than root or this one, or is group- or world-writable without the sticky bit),
    /// who could replace it. Nothing was read from it or written to it.
    case insecureDirectory(path: String, reason: String)
    /// 115: the policy cannot decide yet (a policy source that has not loaded, so any account may be managed):
    /// deny by default. Nothing was written in the clear and nothing was read; retrying once the policies
    /// loaded succeeds.
    case policyUnavailable(reason: String)
    /// 116: `path` (after symbolic links are resolved) lies in a ``FileProtectionManager``'s state directory or
    /// in its ``FileKeyStore``'s directory. The owner index, the wipe journal and the key files are the
    /// runtime's own: a path handed to a file API never reads or replaces them (a planted wipe journal would
    /// otherwise delete an account's files at the next start). Nothing was read or written.
    case reservedPath(path: String)

    /// The stable numeric code of the case.
    public var code: Int {
        switch self {
        case .invalidEnvelope: return 100
        case .unsupportedVersion: return 101
        case .authenticationFailed: return 102
        case .keyNotFound: return 103
        case .invalidIdentity: return 104
        case .fileNotFound: return 105
        case .ioFailure: return 106
        case .cryptoBackendFailure: return 107
        case .accessDenied: return 108
        case .accountBlocked: return 109
        case .encryptionRequired: return 110
        case .fileClosed: return 111
        case .invalidOffset: return 112
        case .keyStoreUnavailable: return 113
        case .insecureDirectory: return 114
        case .policyUnavailable: return 115
        case .reservedPath: return 116
        }
    }

    public var description: String {
        switch self {
        case let .invalidEnvelope(reason):
            return "ProtectionError 100: invalid envelope: \(reason)"
        case let .unsupportedVersion(version):
            return "ProtectionError 101: unsupported format version \(version)"
        case .authenticationFailed:
            return "ProtectionError 102: authentication failed (tampered data or wrong key)"
        case let .keyNotFound(identity, keyID):
            return "ProtectionError 103: no key \(keyID.map { "\($0)" } ?? "at all") for \(identity.debugDescription)"
        case let .invalidIdentity(reason):
            return "ProtectionError 104: invalid identity: \(reason)"
        case let .fileNotFound(path):
            return "ProtectionError 105: no regular file at \(path)"
        case let .ioFailure(path, operation, errno):
            return "ProtectionError 106: \(operation) failed for \(path): \(ProtectionError.errnoName(errno))"
        case let .cryptoBackendFailure(detail):
            return "ProtectionError 107: crypto backend failure: \(detail)"
        case let .accessDenied(identity, reader):
            return "ProtectionError 108: data of \(identity.debugDescription) is not readable by \(reader?.debugDescription ?? "code with no identity")"
        case let .accountBlocked(identity, reason):
            return "ProtectionError 109: \(identity.debugDescription) is blocked (reason \(reason))"
        case let .encryptionRequired(path):
            return "ProtectionError 110: \(path) must be encrypted at rest; open it as a ProtectedFile"
        case let .fileClosed(path):
            return "ProtectionError 111: the ProtectedFile for \(path) is closed"
        case let .invalidOffset(path, offset):
            return "ProtectionError 112: offset \(offset) is beyond what \(path) can address"
        case let .keyStoreUnavailable(reason):
            return "ProtectionError 113: the key store is unavailable: \(reason)"
        case let .insecureDirectory(path, reason):
            return "ProtectionError 114: \(path) is not a private directory: \(reason)"
        case let .policyUnavailable(reason):
            return "ProtectionError 115: the policy is unavailable: \(reason)"
        case let .reservedPath(path):
            return "ProtectionError 116: \(path) is in the runtime's own state or key directory, not data"
        }
    }

    static func errnoName(_ code: Int32) -> String {
        guard let message = strerror(code) else { return "errno \(code)" }
        return "\(String(cString: message)) (errno \(code))"
    }
}
