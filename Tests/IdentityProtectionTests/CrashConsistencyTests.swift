import Foundation
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

/// The crash-consistency harness: `identity-crash-child` writes through `writeFile`, `encryptFile` or a
/// `ProtectedFile` in a loop and is killed with SIGKILL at a random moment, over and over on the same files;
/// after every kill the files are checked from the outside:
/// - an atomic operation left the old or the new file (content, owner, encryption), never a torn one;
/// - a `ProtectedFile` kept every completed (and so every synchronized) write, and each chunk holds either
///   its content before the operation in flight or after it; a chunk that cannot be read is a typed error;
/// - the owner index stays readable (a fresh manager loads it from disk after every kill).
///
/// 100 kills per mode (300 in all) in a normal run, 30 per mode under ThreadSanitizer, 400 per mode (1,200)
/// with `IDENTITY_LONG_TESTS=1`.
@Suite("Crash consistency: SIGKILL at random points")
struct CrashConsistencyTests {
    static let kills = longTests ? 400 : (Sanitizers.isThreadSanitizerActive ? 30 : 100)
    static let chunkSize = 4096

    /// `identity-crash-child`, built beside the test runner.
    static var childPath: String? {
        let runner = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var directory = URL(fileURLWithPath: runner).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("identity-crash-child").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    /// What the child reported before it died.
    struct Report {
        var begun = 0
        var done = 0
        var error: String?
    }

    /// Starts the child, waits until it has begun step `step` (so the kill lands after `step - 1` completed
    /// steps whatever the machine's speed), lets it run `delay` microseconds more, and kills it.
    static func runAndKill(_ child: String, mode: CrashWorkload.Mode, directory: String, seed: UInt64, step: Int, delay: UInt32) throws -> Report {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: child)
        process.arguments = [mode.rawValue, directory, String(seed)]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let reader = pipe.fileHandleForReading
        var output = Data()
        let awaited = "begin \(step)\n"
        while true {
            let text = String(decoding: output, as: UTF8.self)
            if text.contains(awaited) || text.contains("error") { break }
            let piece = reader.availableData
            if piece.isEmpty { break }
            output.append(piece)
        }
        usleep(delay)
        kill(process.processIdentifier, SIGKILL)
        output.append(reader.readDataToEndOfFile())
        process.waitUntilExit()
        var report = Report()
        for line in String(decoding: output, as: UTF8.self).split(separator: "\n") {
            if line.hasPrefix("begin "), let step = Int(line.dropFirst(6)) { report.begun = step }
            if line.hasPrefix("done "), let step = Int(line.dropFirst(5)) { report.done = step }
            if line.hasPrefix("error ") { report.error = String(line) }
        }
        return report
    }

    /// A manager over the fixture's directories, loading the owner index from disk afresh.
    static func freshManager(_ f: Fixture, storage: OwnerStorage) throws -> FileProtectionManager {
        try FileProtectionManager(
            roots: [f.root], keyStore: try FileKeyStore(atPath: f.directory + "/keys"),
            policy: StaticManagedIdentityPolicy(managed: [alice, bob], fileEncryptionRequired: true, dataIsolation: false),
            stateDirectory: f.directory + "/state", ownerStorage: storage, chunkSize: chunkSize)
    }

    /// Removes the temporary files a killed atomic write left behind (`.NAME.idp-*.tmp`) with the manager's
    /// own sweep, and checks that none is left.
    static func removeTemporaryFiles(_ files: FileProtectionManager, _ f: Fixture) throws {
        try files.removeInterruptedWrites(olderThan: 0)
        for directory in [f.root, f.directory + "/state"] {
            let left = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".tmp") }
            #expect(left.isEmpty, "temporary files left in \(directory): \(left)")
        }
    }

    @Test("after every SIGKILL: old or new file, synchronized writes kept, owner index readable",
          arguments: CrashWorkload.Mode.allCases)
    func killRepeatedly(mode: CrashWorkload.Mode) throws {
        let child = try #require(Self.childPath, "identity-crash-child is built with the tests (swift build --build-tests)")
        let storage: OwnerStorage = mode == .writeFile ? .indexOnly : .automatic
        let f = try Fixture(ownerStorage: storage, chunkSize: Self.chunkSize)
        _ = try f.keys.currentKey(for: alice)
        _ = try f.keys.currentKey(for: bob)
        let path = f.path(mode.rawValue + ".bin")
        var random = SplitMix64(seed: 0xC0FFEE &+ UInt64(mode.rawValue.utf8.count))
        let constant = CrashWorkload.content(seed: 7, step: 7)
        // The state the previous kill left: content, owner, encrypted.
        var base: (content: [UInt8], owner: Identity?, encrypted: Bool)?
        switch mode {
        case .writeFile:
            base = nil
        case .encryptFile:
            writeRaw(constant, to: path)
            base = (constant, nil, false)
        case .protectedFile:
            let file = try f.files.openProtectedFile(atPath: path, options: [.write, .create], owner: alice)
            try file.close()
            base = ([], alice, true)
        }
        var steps = 0
        var killsInFlight = 0
        var unreadableChunks = 0
        for iteration in 0..<Self.kills {
            let seed = random.next()
            let report = try Self.runAndKill(
                child, mode: mode, directory: f.directory, seed: seed, step: 1 + Int(random.next() % 3),
                delay: UInt32(random.next() % 30_000))
            try #require(report.error == nil, "child failed: \(report.error ?? "")")
            steps += report.done
            let files = try Self.freshManager(f, storage: storage)
            let inFlight = report.begun > report.done ? report.begun : nil
            if inFlight != nil { killsInFlight += 1 }
            switch mode {
            case .writeFile:
                var allowed: [(content: [UInt8], owner: Identity?, encrypted: Bool)?] = []
                allowed.append(report.done == 0 ? base : (CrashWorkload.content(seed: seed, step: report.done), report.done % 2 == 1 ? alice : carol, report.done % 2 == 1))
                if let inFlight { allowed.append((CrashWorkload.content(seed: seed, step: inFlight), inFlight % 2 == 1 ? alice : carol, inFlight % 2 == 1)) }
                guard FileManager.default.fileExists(atPath: path) else {
                    #expect(allowed.contains { $0 == nil }, "iteration \(iteration): the file vanished")
                    continue
                }
                let content = Array(try files.readFile(atPath: path))
                let info = try files.protectionInfo(atPath: path)
                let observed = (content: content, owner: info?.owner, encrypted: info?.isEncrypted ?? false)
                #expect(allowed.contains { $0.map { $0 == observed } ?? false },
                        "iteration \(iteration): neither the old nor the new file (done \(report.done), begun \(report.begun))")
                base = observed
            case .encryptFile:
                func state(_ step: Int) -> (Bool, Identity?) {
                    switch step % 3 {
                    case 1: return (true, alice)
                    case 2: return (true, bob)
                    default: return (false, nil)
                    }
                }
                var allowed = [report.done == 0 ? (base!.encrypted, base!.encrypted ? base!.owner : nil) : state(report.done)]
                if let inFlight { allowed.append(state(inFlight)) }
                #expect(Array(try files.readFile(atPath: path)) == constant, "iteration \(iteration)")
                let info = try files.protectionInfo(atPath: path)
                let encrypted = info?.isEncrypted ?? false
                let observed = (encrypted, encrypted ? info?.owner : nil)
                #expect(allowed.contains { $0 == observed }, "iteration \(iteration): \(observed) not in \(allowed)")
                base = (constant, observed.1, encrypted)
            case .protectedFile:
                var before = base!.content
                for step in stride(from: 1, through: report.done, by: 1) {
                    before = CrashWorkload.operation(seed: seed, step: step).applied(to: before)
                }
                let after = inFlight.map { CrashWorkload.operation(seed: seed, step: $0).applied(to: before) } ?? before
                let file = try files.openProtectedFile(atPath: path, options: [.read])
                defer { try? file.close() }
                let size = Int(try file.size())
                #expect(size == before.count || size == after.count, "iteration \(iteration): size \(size)")
                var observed: [UInt8] = []
                var readable = true
                for start in stride(from: 0, to: size, by: Self.chunkSize) {
                    let range = start..<min(size, start + Self.chunkSize)
                    do throws(ProtectionError) {
                        let bytes = try file.read(at: UInt64(start), upToCount: range.count)
                        let matches = [before, after].contains { $0.count >= range.upperBound && Array($0[range]) == bytes }
                        #expect(matches, "iteration \(iteration): chunk at \(start) is neither its old nor its new content")
                        observed += bytes
                    } catch {
                        // A torn chunk: a typed error, and only where the write in flight was.
                        #expect(inFlight != nil && [100, 102].contains(error.code), "iteration \(iteration): \(error)")
                        unreadableChunks += 1
                        readable = false
                    }
                }
                if readable {
                    base = (observed, alice, true)
                } else {
                    // Start over from an empty file (never seen so far: a torn record falls back to its other slot).
                    let fresh = try f.files.openProtectedFile(atPath: path, options: [.write, .truncate], owner: alice)
                    try fresh.close()
                    base = ([], alice, true)
                }
            }
            try Self.removeTemporaryFiles(files, f)
        }
        print("crash harness, \(mode.rawValue): \(Self.kills) kills, \(killsInFlight) during an operation, \(steps) operations completed, \(unreadableChunks) unreadable chunks")
        #expect(steps > 0, "the child never completed a step before being killed")
        #expect(unreadableChunks == 0)
    }
}
