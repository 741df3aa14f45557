import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityProtection
import IdentityRuntime
import NIOConcurrencyHelpers

/// Answers one command per line of standard input with one line (`ok ...` or `err CODE ...`) on standard
/// output; `await-*` commands first answer `waiting` once they are registered, then the result.
///
/// | command | answer |
/// |---|---|
/// | `protect ACCOUNT BASE64` | `ok BASE64` (an envelope) |
/// | `unprotect BASE64` | `ok BASE64` (the plaintext) or `err CODE` |
/// | `write-file NAME ACCOUNT BASE64` / `read-file NAME ACCOUNT` | a file in the shared directory, through FileProtectionManager |
/// | `current ACCOUNT` / `rotate ACCOUNT` | `ok KEYID` |
/// | `destroy ACCOUNT` | `ok EPOCHMS` (after the commit) |
/// | `await-unreadable BASE64 MS` | `waiting`, then `ok EPOCHMS CODE` when the envelope stops decrypting |
/// | `await-key-change ACCOUNT OLDKEYID MS` | `waiting`, then `ok EPOCHMS NEWKEYID` |
/// | `await-policy ACCOUNT MS` | `waiting`, then `ok EPOCHMS` at the manager's `accountPoliciesDidChange` for it |
/// | `policy ACCOUNT` | `ok encryption=BOOL save=RAW` |
/// | `stress ACCOUNTS THREADS SECONDS` | `ok ops=N rotations=N mismatches=N errors=N samples=ACCOUNT:BASE64:BASE64,...` |
/// | `quit` | exits |
final class Server: Sendable {
    let fleet: PostgresFleet
    let keys: PostgresKeyStore
    let policies: PostgresPolicySource
    let manager: PolicyManager
    let data: DataProtectionManager
    let files: FileProtectionManager
    let shared: String
    let events = NIOLockedValueBox<[(time: Double, accounts: [Identity], tenants: [TenantID])]>([])
    let output = NIOLockedValueBox(())

    init(configuration: PostgresFleetConfiguration, keks: StaticKeyEncryptionKeys, sharedDirectory: String) async throws {
        fleet = PostgresFleet(configuration: configuration)
        try await fleet.waitUntilReady(timeout: 30)
        keys = PostgresKeyStore(fleet: fleet, keyEncryptionKeys: keks)
        policies = PostgresPolicySource(fleet: fleet)
        try await policies.reload()
        manager = PolicyManager(policySource: policies, keyStore: keys)
        // Every account named in a command is managed: its data is encrypted with its keys.
        let protection = AllManaged()
        data = DataProtectionManager(keyStore: keys, policy: protection)
        shared = sharedDirectory
        let state = NSTemporaryDirectory() + "identity-node-\(getpid())-\(UUID().uuidString)"
        files = try FileProtectionManager(roots: [sharedDirectory], keyStore: keys, policy: protection, stateDirectory: state, ownerStorage: .indexOnly)
        let stream = manager.events
        Task.detached { [self] in
            for await event in stream {
                if case let .accountPoliciesDidChange(accounts, tenants) = event {
                    let now = wallClockMilliseconds()
                    events.withLockedValue { $0.append((now, accounts, tenants)) }
                }
            }
        }
    }

    func say(_ line: String) {
        output.withLockedValue { _ in
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
    }

    func run() {
        say("ready")
        while let line = readLine() {
            let words = line.split(separator: " ").map(String.init)
            guard let command = words.first else { continue }
            if command == "quit" { break }
            let arguments = Array(words.dropFirst())
            if command.hasPrefix("await-") || command == "stress" {
                // Answered from a thread of its own: the loop goes on reading commands.
                Thread.detachNewThread { [self] in say(answer(command, arguments)) }
            } else {
                say(answer(command, arguments))
            }
        }
        fleet.shutdown()
    }

    func answer(_ command: String, _ arguments: [String]) -> String {
        do throws(ProtectionError) {
            switch (command, arguments.count) {
            case ("protect", 2):
                let envelope = try data.protect(decode(arguments[1]), owner: Identity(arguments[0]))
                return "ok " + envelope.base64EncodedString()
            case ("unprotect", 1):
                return "ok " + (try data.unprotect(decode(arguments[0]))).base64EncodedString()
            case ("write-file", 3):
                let path = shared + "/" + arguments[0]
                try IdentityContext.withThreadIdentity(Identity(arguments[1])) {
                    Result { () throws(ProtectionError) in try files.writeFile(atPath: path, contents: decode(arguments[2])) }
                }.get()
                return "ok encrypted=\(try files.isFileEncrypted(atPath: path))"
            case ("read-file", 2):
                let path = shared + "/" + arguments[0]
                let contents = try IdentityContext.withThreadIdentity(Identity(arguments[1])) {
                    Result { () throws(ProtectionError) in try files.readFile(atPath: path) }
                }.get()
                return "ok " + contents.base64EncodedString()
            case ("current", 1):
                return "ok \(try keys.currentKey(for: Identity(arguments[0])).id)"
            case ("rotate", 1):
                return "ok \(try keys.rotateKey(for: Identity(arguments[0])).id)"
            case ("destroy", 1):
                try keys.destroyKeys(for: Identity(arguments[0]))
                return "ok \(wallClockMilliseconds())"
            case ("await-unreadable", 2):
                let envelope = decode(arguments[0])
                let deadline = Date().addingTimeInterval((Double(arguments[1]) ?? 2000) / 1000)
                _ = try data.unprotect(envelope)  // readable now, key cached
                say("waiting")
                while Date() < deadline {
                    do throws(ProtectionError) {
                        _ = try data.unprotect(envelope)
                    } catch {
                        return "ok \(wallClockMilliseconds()) \(error.code)"
                    }
                    usleep(200)
                }
                return "err timeout still readable"
            case ("await-key-change", 3):
                let identity = Identity(arguments[0])
                let deadline = Date().addingTimeInterval((Double(arguments[2]) ?? 2000) / 1000)
                say("waiting")
                while Date() < deadline {
                    let id = try keys.currentKey(for: identity).id.description
                    if id != arguments[1] { return "ok \(wallClockMilliseconds()) \(id)" }
                    usleep(200)
                }
                return "err timeout key unchanged"
            case ("await-policy", 2):
                let identity = Identity(arguments[0])
                let deadline = Date().addingTimeInterval((Double(arguments[1]) ?? 2000) / 1000)
                let seen = events.withLockedValue { $0.count }
                say("waiting")
                while Date() < deadline {
                    let hit = events.withLockedValue { events in
                        events.dropFirst(seen).first { $0.accounts.contains(identity) }?.time
                    }
                    if let hit { return "ok \(hit)" }
                    usleep(200)
                }
                return "err timeout no event"
            case ("policy", 1):
                guard let policy = manager.policy(for: Identity(arguments[0])) as Policy? else { return "ok none" }
                return "ok encryption=\(policy.isFileEncryptionRequired) save=\(policy.allowedSaveLocations.rawValue)"
            case ("stress", 3):
                return stress(accounts: arguments[0].split(separator: ",").map { Identity(String($0)) },
                              threads: Int(arguments[1]) ?? 4, seconds: Double(arguments[2]) ?? 3)
            default:
                return "err 0 unknown command \(command) with \(arguments.count) arguments"
            }
        } catch {
            return "err \(error.code) \(error)"
        }
    }

    func decode(_ base64: String) -> Data {
        Data(base64Encoded: base64) ?? Data()
    }

    /// `threads` threads, each for `seconds`: protect random data for a random account, unprotect it and an
    /// older envelope of its own, rotate one time in ten. Any plaintext that differs is a mismatch; any error
    /// an error (there should be none while the database is up).
    func stress(accounts: [Identity], threads: Int, seconds: Double) -> String {
        struct Totals {
            var ops = 0, rotations = 0, mismatches = 0, errors = 0
            var firstError: String?
            var samples: [String] = []
        }
        let totals = NIOLockedValueBox(Totals())
        let group = DispatchGroup()
        let deadline = Date().addingTimeInterval(seconds)
        for thread in 0..<threads {
            group.enter()
            Thread.detachNewThread { [self] in
                defer { group.leave() }
                var local = Totals()
                var kept: [(Data, Data)] = []
                var generator = SystemRandomNumberGenerator()
                while Date() < deadline {
                    let account = accounts[Int.random(in: 0..<accounts.count, using: &generator)]
                    do throws(ProtectionError) {
                        if Int.random(in: 0..<10, using: &generator) == 0 {
                            try keys.rotateKey(for: account)
                            local.rotations += 1
                        }
                        let plaintext = Data((0..<Int.random(in: 1...512, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
                        let envelope = try data.protect(plaintext, owner: account)
                        if try data.unprotect(envelope) != plaintext { local.mismatches += 1 }
                        if let (oldEnvelope, oldPlaintext) = kept.randomElement(using: &generator),
                           try data.unprotect(oldEnvelope) != oldPlaintext {
                            local.mismatches += 1
                        }
                        if kept.count < 64 { kept.append((envelope, plaintext)) }
                        local.ops += 1
                    } catch {
                        local.errors += 1
                        if local.firstError == nil { local.firstError = error.description }
                    }
                }
                // One sample per thread, for another process to decrypt.
                if let (envelope, plaintext) = kept.first {
                    local.samples.append("\(envelope.base64EncodedString()):\(plaintext.base64EncodedString())")
                }
                let finished = local
                _ = thread
                totals.withLockedValue { totals in
                    totals.ops += finished.ops
                    totals.rotations += finished.rotations
                    totals.mismatches += finished.mismatches
                    totals.errors += finished.errors
                    totals.firstError = totals.firstError ?? finished.firstError
                    totals.samples += finished.samples
                }
            }
        }
        group.wait()
        let result = totals.withLockedValue { $0 }
        return "ok ops=\(result.ops) rotations=\(result.rotations) mismatches=\(result.mismatches) errors=\(result.errors) samples=\(result.samples.joined(separator: ","))"
            + (result.firstError.map { " first-error=\($0.replacingOccurrences(of: " ", with: "_"))" } ?? "")
    }
}

/// Every identity but the unmanaged one is managed and encrypted.
final class AllManaged: ManagedIdentityPolicy {
    func isManaged(_ identity: Identity) -> Bool { !identity.isUnmanaged }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { !identity.isUnmanaged }
    /// No isolation, explicitly: the fleet tests check keys and consistency across processes, and a node
    /// unprotects every account's data from no identity. (The protocol's default would isolate accounts.)
    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? { nil }
}
