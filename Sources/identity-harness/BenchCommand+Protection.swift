#if canImport(CryptoKit)
import CryptoKit
#elseif IDENTITY_SWIFT_CRYPTO
// The CryptoKit branch built against apple/swift-crypto (the same API) on Linux, by the check package
// Checks/SwiftCrypto only.
import Crypto
#else
import CIdentityCrypto
#endif
import Foundation
import IdentityProtection
import IdentityRuntime
import Synchronization

extension BenchCommand {
    /// `protect` / `unprotect` of 1 KiB: raw, the platform's AES-256-GCM called directly (libcrypto on Linux,
    /// CryptoKit's `AES.GCM` on Apple platforms) with a fresh random nonce (what the envelope needs at the least); the peer, what a user would write instead: the account's key from a dictionary
    /// behind a mutex, the account name as associated data, nonce ‖ ciphertext ‖ tag; ours,
    /// `DataProtectionManager` (policy check, key store, versioned header naming the owner).
    static func protectionPairs(operations: Int) -> [Pair] {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("identity-harness-bench-keys").path
        let identity: Identity = "alice@contoso.com"
        let manager: DataProtectionManager
        let sealed: Data
        do {
            manager = DataProtectionManager(
                keyStore: try FileKeyStore(atPath: scratch), policy: StaticManagedIdentityPolicy(managed: [identity]))
            sealed = try manager.protect(Data(count: 1024), owner: identity)
        } catch {
            fatalError("bench: cannot set up the protection pairs in \(scratch): \(error)")
        }
        let key = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let userKeys = Mutex<[String: [UInt8]]>([identity.name: key])
        let plaintext = Data((0..<1024).map { UInt8(truncatingIfNeeded: $0) })
        let rawSealed = rawSeal(plaintext, key: key, aad: [])
        let peerSealed = rawSeal(plaintext, key: key, aad: Array(identity.name.utf8))
        let sink = Counter()

        func peerKey() -> [UInt8] { userKeys.withLock { $0[identity.name]! } }
        return [
            Pair(name: "protect-1k", title: "protect 1 KiB (AES-256-GCM envelope)", targetRatio: 1 / 0.85,
                 operations: operations,
                 raw: { count in for _ in 0..<count { sink.value &+= rawSeal(plaintext, key: key, aad: []).count } },
                 peer: { count in
                     for _ in 0..<count { sink.value &+= rawSeal(plaintext, key: peerKey(), aad: Array(identity.name.utf8)).count }
                 },
                 ours: { count in
                     for _ in 0..<count { sink.value &+= (try? manager.protect(plaintext, owner: identity))?.count ?? 0 }
                 }),
            // The asynchronous entry point with the key at hand: raw is the synchronous call (the path it must
            // stay within 5% of), peer the user's own sealing; the batch runs in one task, so the count-0 run
            // takes the task's start off.
            Pair(name: "protect-1k-async", title: "protect 1 KiB through manager.async (warm key store)", targetRatio: 1.05,
                 operations: operations,
                 raw: { count in
                     for _ in 0..<count { sink.value &+= (try? manager.protect(plaintext, owner: identity))?.count ?? 0 }
                 },
                 peer: { count in
                     for _ in 0..<count { sink.value &+= rawSeal(plaintext, key: peerKey(), aad: Array(identity.name.utf8)).count }
                 },
                 ours: { count in
                     runInTask {
                         for _ in 0..<count {
                             sink.value &+= (try? await manager.async.protect(plaintext, owner: identity))?.count ?? 0
                         }
                     }
                 }),
            Pair(name: "unprotect-1k", title: "unprotect 1 KiB", targetRatio: 1 / 0.85, operations: operations,
                 raw: { count in for _ in 0..<count { sink.value &+= rawOpen(rawSealed, key: key, aad: []).count } },
                 peer: { count in
                     for _ in 0..<count { sink.value &+= rawOpen(peerSealed, key: peerKey(), aad: Array(identity.name.utf8)).count }
                 },
                 ours: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         for _ in 0..<count { sink.value &+= (try? manager.unprotect(sealed))?.count ?? 0 }
                     }
                 }),
        ]
    }

    /// Runs `body` in a task and waits for it (the bench's members are synchronous).
    static func runInTask(_ body: @escaping @Sendable () async -> Void) {
        let done = DispatchSemaphore(value: 0)
        Task {
            await body()
            done.signal()
        }
        done.wait()
    }

    #if canImport(CryptoKit) || IDENTITY_SWIFT_CRYPTO
    /// nonce ‖ ciphertext ‖ tag, sealed with CryptoKit's `AES.GCM` directly (a fresh random nonce).
    static func rawSeal(_ plaintext: Data, key: [UInt8], aad: [UInt8]) -> Data {
        do {
            // A 12-byte nonce: `combined` is nonce ‖ ciphertext ‖ tag, never nil.
            let box = try AES.GCM.seal(plaintext, using: SymmetricKey(data: key), nonce: AES.GCM.Nonce(), authenticating: aad)
            return box.combined!
        } catch {
            preconditionFailure("raw AES-256-GCM seal failed: \(error)")
        }
    }

    /// The inverse of ``rawSeal(_:key:aad:)``.
    static func rawOpen(_ sealed: Data, key: [UInt8], aad: [UInt8]) -> Data {
        do {
            return try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: SymmetricKey(data: key), authenticating: aad)
        } catch {
            preconditionFailure("raw AES-256-GCM open failed: \(error)")
        }
    }
    #else
    /// nonce ‖ ciphertext ‖ tag, sealed with libcrypto directly (a fresh random nonce).
    static func rawSeal(_ plaintext: Data, key: [UInt8], aad: [UInt8]) -> Data {
        var output = Data(count: 12 + plaintext.count + 16)
        let status = output.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) -> Int32 in
            let base = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            guard cidc_random_bytes(base, 12) == 1 else { return 0 }
            return plaintext.withUnsafeBytes { input in
                cidc_aes256gcm_seal(
                    key, base, aad, aad.count, input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count,
                    base + 12, base + 12 + input.count)
            }
        }
        precondition(status == 1, "raw AES-256-GCM seal failed")
        return output
    }

    /// The inverse of ``rawSeal(_:key:aad:)``.
    static func rawOpen(_ sealed: Data, key: [UInt8], aad: [UInt8]) -> Data {
        let length = sealed.count - 12 - 16
        var output = Data(count: length)
        let status = output.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) -> Int32 in
            sealed.withUnsafeBytes { input in
                let base = input.baseAddress!.assumingMemoryBound(to: UInt8.self)
                return cidc_aes256gcm_open(
                    key, base, aad, aad.count, base + 12, length, base + 12 + length,
                    out.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
        }
        precondition(status == 1, "raw AES-256-GCM open failed")
        return output
    }
    #endif
}
