import Benchmark
import CIdentityCrypto
import Foundation
import IdentityProtection
import IdentityRuntime

/// `ProtectedFile` and streamed protection against raw libcrypto AES-256-GCM over the same buffers, with the
/// same I/O: the raw member seals each 64 KiB buffer with a fresh random nonce and `pwrite`s it (or `pread`s
/// and opens it), so a pair differs only by what the runtime adds (format, policy check, slot bookkeeping,
/// size record, copies).
///
/// - `ProtectedFileWrite64MiB` / `ProtectedFileRead64MiB`: 1,024 sequential 64 KiB writes / reads.
/// - `ProtectedFileRandomRead4KiB`: 4 KiB `read(at:)` at random offsets of a 64 MiB file, against a raw `pread`
///   of one chunk record plus decrypting it.
/// - `StreamProtect1GiB`: streamed `protect` of 1 GiB arriving in 1 MiB pieces, against raw sealing of the same
///   bytes in 64 KiB chunks; peak resident memory shows that it stays flat.
func registerFileBenchmarks() {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("identity-bench-files").path
    try? FileManager.default.createDirectory(atPath: scratch + "/root", withIntermediateDirectories: true)
    let keys: FileKeyStore
    let files: FileProtectionManager
    let data: DataProtectionManager
    do {
        keys = try FileKeyStore(atPath: scratch + "/keys")
        let policy = StaticManagedIdentityPolicy(managed: [alice], fileEncryptionRequired: true)
        files = try FileProtectionManager(roots: [scratch + "/root"], keyStore: keys, policy: policy, stateDirectory: scratch + "/state")
        data = DataProtectionManager(keyStore: keys, policy: policy)
    } catch {
        fatalError("cannot set up the file benchmarks in \(scratch): \(error)")
    }
    let key = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let chunk = 64 * 1024
    let chunks = 1024
    let buffer = (0..<chunk).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let protectedPath = scratch + "/root/protected.bin"
    let rawPath = scratch + "/root/raw.bin"
    // The read benchmarks may run before the write benchmarks (each runs in its own process): make both files.
    if !FileManager.default.fileExists(atPath: protectedPath) || !FileManager.default.fileExists(atPath: rawPath) {
        do {
            try IdentityContext.withThreadIdentity(alice) {
                let file = try files.openProtectedFile(atPath: protectedPath, options: [.write, .create, .truncate], owner: alice)
                for _ in 0..<chunks { try file.write(buffer) }
                try file.close()
            }
        } catch {
            fatalError("cannot write \(protectedPath): \(error)")
        }
        let fd = open(rawPath, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        for index in 0..<chunks {
            let sealed = RawGCM.seal(buffer, key: key)
            _ = sealed.withUnsafeBufferPointer { pwrite(fd, $0.baseAddress, $0.count, off_t(index * (chunk + 28))) }
        }
        close(fd)
    }
    // Each of these counts tens of thousands of allocations per iteration (one stream or file of thousands of
    // chunks), which vary by a few hundred from run to run: 5% of the count is the bound, not 200. One more
    // allocation per 64 KiB chunk is +1,024 per 64 MiB, +16,384 per GiB: well past 5%.
    let bulkThresholds: [BenchmarkMetric: BenchmarkThresholds] = [.mallocCountTotal: BenchmarkThresholds(relative: [.p90: 5.0])]
    let large = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident], scalingFactor: .one,
        maxDuration: .seconds(10), maxIterations: 20, thresholds: bulkThresholds)

    Benchmark("ProtectedFileWrite64MiB.RawLibcrypto", configuration: large) { benchmark in
        let fd = open(rawPath, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd) }
        for index in 0..<chunks {
            let sealed = RawGCM.seal(buffer, key: key)
            _ = sealed.withUnsafeBufferPointer { pwrite(fd, $0.baseAddress, $0.count, off_t(index * (chunk + 28))) }
        }
    }
    Benchmark("ProtectedFileWrite64MiB.ProtectedFile", configuration: large) { benchmark in
        let file = try IdentityContext.withThreadIdentity(alice) {
            try files.openProtectedFile(atPath: protectedPath, options: [.write, .create, .truncate], owner: alice)
        }
        for _ in 0..<chunks { try file.write(buffer) }
        try file.close()
    }
    Benchmark("ProtectedFileRead64MiB.RawLibcrypto", configuration: large) { benchmark in
        let fd = open(rawPath, O_RDONLY)
        defer { close(fd) }
        var record = [UInt8](repeating: 0, count: chunk + 28)
        for index in 0..<chunks {
            _ = record.withUnsafeMutableBufferPointer { pread(fd, $0.baseAddress, $0.count, off_t(index * (chunk + 28))) }
            blackHole(RawGCM.open(record, key: key))
        }
    }
    Benchmark("ProtectedFileRead64MiB.ProtectedFile", configuration: large) { benchmark in
        // Files are read as their owner: the default policy refuses a managed account's data to everyone else.
        let file = try IdentityContext.withThreadIdentity(alice) { try files.openProtectedFile(atPath: protectedPath, options: [.read]) }
        for index in 0..<chunks { blackHole(try file.read(at: UInt64(index * chunk), upToCount: chunk)) }
        try file.close()
    }

    let randomReads = Benchmark.Configuration(metrics: [.wallClock, .mallocCountTotal], scalingFactor: .kilo, maxDuration: .seconds(3))
    Benchmark("ProtectedFileRandomRead4KiB.RawPreadAndDecrypt", configuration: randomReads) { benchmark in
        let fd = open(rawPath, O_RDONLY)
        defer { close(fd) }
        var random = SystemRandomNumberGenerator()
        var record = [UInt8](repeating: 0, count: chunk + 28)
        for _ in benchmark.scaledIterations {
            let index = Int.random(in: 0..<chunks, using: &random)
            _ = record.withUnsafeMutableBufferPointer { pread(fd, $0.baseAddress, $0.count, off_t(index * (chunk + 28))) }
            let plaintext = RawGCM.open(record, key: key)
            blackHole(Array(plaintext[1024..<1024 + 4096]))
        }
    }
    Benchmark("ProtectedFileRandomRead4KiB.ProtectedFile", configuration: randomReads) { benchmark in
        let file = try IdentityContext.withThreadIdentity(alice) { try files.openProtectedFile(atPath: protectedPath, options: [.read]) }
        var random = SystemRandomNumberGenerator()
        for _ in benchmark.scaledIterations {
            let index = Int.random(in: 0..<chunks, using: &random)
            blackHole(try file.read(at: UInt64(index * chunk + 1024), upToCount: 4096))
        }
        try file.close()
    }

    let gibibyte = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident], scalingFactor: .one, maxDuration: .seconds(20), maxIterations: 3,
        thresholds: bulkThresholds)
    let piece = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13) }
    Benchmark("StreamProtect1GiB.RawLibcrypto", configuration: gibibyte) { benchmark in
        for _ in 0..<(1 << 14) { blackHole(RawGCM.seal(buffer, key: key)) }
    }
    Benchmark("StreamProtect1GiB.ProtectedByteStream", configuration: gibibyte) { benchmark in
        let source = AsyncStream<[UInt8]> { continuation in
            Task {
                for _ in 0..<1024 { continuation.yield(piece) }
                continuation.finish()
            }
        }
        var total = 0
        for try await sealed in try data.protect(source, owner: alice) { total += sealed.count }
        blackHole(total)
    }
}

extension RawGCM {
    static func seal(_ plaintext: [UInt8], key: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 12 + plaintext.count + 16)
        let status = output.withUnsafeMutableBufferPointer { out -> Int32 in
            let base = out.baseAddress!
            guard cidc_random_bytes(base, 12) == 1 else { return 0 }
            return plaintext.withUnsafeBufferPointer { input in
                cidc_aes256gcm_seal(key, base, nil, 0, input.baseAddress, input.count, base + 12, base + 12 + input.count)
            }
        }
        precondition(status == 1, "raw AES-256-GCM seal failed")
        return output
    }

    static func open(_ sealed: [UInt8], key: [UInt8]) -> [UInt8] {
        let length = sealed.count - 12 - 16
        var output = [UInt8](repeating: 0, count: length)
        let status = output.withUnsafeMutableBufferPointer { out -> Int32 in
            sealed.withUnsafeBufferPointer { input in
                let base = input.baseAddress!
                return cidc_aes256gcm_open(key, base, nil, 0, base + 12, length, base + 12 + length, out.baseAddress)
            }
        }
        precondition(status == 1, "raw AES-256-GCM open failed")
        return output
    }
}
