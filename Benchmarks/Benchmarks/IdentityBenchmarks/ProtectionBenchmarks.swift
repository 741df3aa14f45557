import Benchmark
import CIdentityCrypto
import Foundation
import IdentityProtection
import IdentityRuntime

/// `protect` / `unprotect` of 1 KiB and 1 MiB against raw libcrypto AES-256-GCM of the same bytes (a fresh
/// random nonce per message, as the envelope needs). The envelope adds the policy check, the key lookup and
/// a header (authenticated as AAD), and copies between `Data` and byte arrays.
func registerProtectionBenchmarks() {
    // One directory reused by every run, so runs leave no key directories behind.
    let keyDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("identity-bench-keys").path
    let manager: DataProtectionManager
    do {
        manager = DataProtectionManager(
            keyStore: try FileKeyStore(atPath: keyDirectory),
            policy: StaticManagedIdentityPolicy(managed: [alice]))
    } catch {
        fatalError("cannot create the benchmark key store in \(keyDirectory): \(error)")
    }
    let key = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7) }

    for (label, size) in [("1KiB", 1 << 10), ("1MiB", 1 << 20)] {
        let plaintext = Data((0..<size).map { UInt8(truncatingIfNeeded: $0) })
        let configuration = Benchmark.Configuration(
            metrics: [.wallClock, .mallocCountTotal], scalingFactor: size < 4096 ? .kilo : .one)
        let rawSealed = RawGCM.seal(plaintext, key: key)
        let protected: Data
        do {
            protected = try manager.protect(plaintext, owner: alice)
        } catch {
            fatalError("protect failed: \(error)")
        }

        Benchmark("Protect\(label).RawLibcrypto", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations { blackHole(RawGCM.seal(plaintext, key: key)) }
        }
        Benchmark("Protect\(label).DataProtectionManager", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations { blackHole(try manager.protect(plaintext, owner: alice)) }
        }
        Benchmark("Unprotect\(label).RawLibcrypto", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations { blackHole(RawGCM.open(rawSealed, key: key)) }
        }
        Benchmark("Unprotect\(label).DataProtectionManager", configuration: configuration) { benchmark in
            // As its owner: the default policy refuses a managed account's data to everyone else.
            try IdentityContext.withThreadIdentity(alice) {
                for _ in benchmark.scaledIterations { blackHole(try manager.unprotect(protected)) }
            }
        }
    }
}

/// Bare AES-256-GCM through the same libcrypto EVP calls the runtime uses: nonce ‖ ciphertext ‖ tag.
enum RawGCM {
    static func seal(_ plaintext: Data, key: [UInt8]) -> Data {
        var output = Data(count: 12 + plaintext.count + 16)
        let status = output.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) -> Int32 in
            let base = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            guard cidc_random_bytes(base, 12) == 1 else { return 0 }
            return plaintext.withUnsafeBytes { input in
                cidc_aes256gcm_seal(
                    key, base, nil, 0, input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count,
                    base + 12, base + 12 + input.count)
            }
        }
        precondition(status == 1, "raw AES-256-GCM seal failed")
        return output
    }

    static func open(_ sealed: Data, key: [UInt8]) -> Data {
        let length = sealed.count - 12 - 16
        var output = Data(count: length)
        let status = output.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) -> Int32 in
            sealed.withUnsafeBytes { input in
                let base = input.baseAddress!.assumingMemoryBound(to: UInt8.self)
                return cidc_aes256gcm_open(
                    key, base, nil, 0, base + 12, length, base + 12 + length,
                    out.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
        }
        precondition(status == 1, "raw AES-256-GCM open failed")
        return output
    }
}
