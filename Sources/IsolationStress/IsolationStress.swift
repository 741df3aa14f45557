import Dispatch
import Foundation
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Synchronization

/// A seeded, randomized check of tenant isolation (docs/service-boundary.md), shared by the test suite and
/// `identity-harness stress --isolation`.
///
/// 64 managed accounts in 8 tenants (every tenant with its own policy document and ``DataTransferLevel``), a
/// few unmanaged accounts, `""` and "no identity" write, read, modify, transfer and re-own each other's data,
/// from raw threads and from tasks, through every protection API and its parameters (`owner:` of a truncating
/// open, writing handles with and without truncation, streams split at random with empty pieces first and in
/// between). Each outcome is checked against a model of the rules written from the configuration alone (not by
/// asking the runtime): a read, a modification or a transfer is allowed exactly when the data is unmanaged, the
/// caller (or the recipient) is the owner, or the owner's tenant level lets it go there; a modification that
/// gives the data a new owner needs both. Any other outcome is a violation. Counted apart: plaintext returned
/// where it was not allowed (bytes), another account's data changed where the rules refuse it, and plaintext
/// at rest in a file of an account whose tenant requires encryption.
public enum IsolationStress {
    public struct Options: Sendable {
        public var seed: UInt64 = 1
        /// Seconds to run (when ``operations`` is `nil`).
        public var duration: Double = 10
        /// Operations to run in all, instead of a duration.
        public var operations: Int?
        public var accounts = 64
        public var tenants = 8
        /// Half of them raw threads, half tasks.
        public var workers = 8
        /// ``RuntimeSettings/dataIsolation`` of the manager under test. `false` is a self-check: the program
        /// must then report violations and leaked bytes.
        public var dataIsolation = true
        /// A gate removed on purpose (self-check): the program must then report violations.
        public var fault: Fault = .none

        public init() {}
    }

    /// A check the protection managers skip on purpose, to prove that the program catches a missing gate.
    public enum Fault: String, CaseIterable, Sendable {
        case none
        /// Modifications (``IdentityProtection/ProtectedDataAccess/modify(writer:)``) are never refused.
        case noModifyCheck = "no-modify-check"
        /// Reads are never refused.
        case noReadCheck = "no-read-check"
        /// Transfers (re-owning) are never refused.
        case noTransferCheck = "no-transfer-check"
    }

    /// The APIs exercised, one row each in the report.
    public enum API: String, CaseIterable, Sendable {
        case protect, unprotect, unprotectInTask, writeFile, readFile, readFileThroughQueue, decryptFileToCopy
        case openProtectedFile, isDataTransferAllowed, reownFile
        /// Another caller changes an existing file: `writeFile` over it, a truncating `openProtectedFile` with an
        /// `owner:` of its choice, or a writing handle without truncation.
        case modifyFile
        /// Streamed protect (in tasks), then streamed unprotect of pieces split at random, empty ones included.
        case protectStream, unprotectStream
    }

    public struct Row: Sendable {
        public var api: API
        public var attempts = 0
        public var allowed = 0
        public var refused = 0
        public var violations = 0
    }

    public struct Report: Sendable {
        public var rows: [Row]
        /// The first violations, described.
        public var violations: [String]
        public var violationCount: Int
        /// Bytes of plaintext returned to a reader that may not see them.
        public var leakedBytes: Int
        /// Changes of another account's data that the rules refuse (allowed, or left behind by a refusal).
        public var foreignModifications: Int
        /// Files of an account whose tenant requires encryption found with their plaintext on disk.
        public var plaintextAtRest: Int
        public var operations: Int
        public var seconds: Double

        public var passed: Bool { violationCount == 0 && leakedBytes == 0 && foreignModifications == 0 && plaintextAtRest == 0 }

        /// The per-API table and a closing line, for printing.
        public var table: String {
            var lines = ["api                       attempts   allowed   refused  violations"]
            for row in rows {
                func cell(_ value: Int, _ width: Int) -> String {
                    let text = "\(value)"
                    return String(repeating: " ", count: max(0, width - text.count)) + text
                }
                lines.append(row.api.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0)
                    + cell(row.attempts, 12) + cell(row.allowed, 10) + cell(row.refused, 10) + cell(row.violations, 12))
            }
            lines.append("\(operations) operations in \(String(format: "%.1f", seconds)) s: \(violationCount) violations, "
                + "\(leakedBytes) plaintext bytes leaked, \(foreignModifications) modifications of another account's data, "
                + "\(plaintextAtRest) files in the clear that must be encrypted")
            lines.append(contentsOf: violations.prefix(10).map { "  VIOLATION: \($0)" })
            return lines.joined(separator: "\n")
        }
    }

    /// Runs the program in a temporary directory (removed afterwards).
    public static func run(_ options: Options) async throws -> Report {
        let world = try World(options: options)
        defer { world.tearDown() }
        let start = DispatchTime.now().uptimeNanoseconds
        let deadline = start + UInt64(max(0, options.duration) * 1e9)
        let budget = options.operations.map { max(1, $0 / max(1, options.workers)) }
        let threads = options.workers / 2
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<options.workers {
                let seed = options.seed &+ UInt64(worker) &* 0x9E37_79B9
                if worker < threads {
                    group.addTask {
                        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                            Thread {
                                var random = SplitMix64(seed: seed)
                                world.work(random: &random, budget: budget, deadline: deadline)
                                done.resume()
                            }.start()
                        }
                    }
                } else {
                    group.addTask {
                        var random = SplitMix64(seed: seed)
                        await world.workInTasks(random: &random, budget: budget, deadline: deadline)
                    }
                }
            }
        }
        return world.report(seconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
    }
}

/// One piece of protected data and what it must hold. Operations on an item hold its lock, so its owner does
/// not change under a read.
final class Item: Sendable {
    enum Kind { case envelope, file, stream }

    struct State {
        var owner: Identity?
        var envelope: Data
        /// What the data holds now (a file's changes by the model's rules update it).
        var plaintext: Data
    }

    let kind: Kind
    let path: String
    let state: LockedValue<State>

    init(kind: Kind, plaintext: Data, path: String, owner: Identity?, envelope: Data) {
        self.kind = kind
        self.path = path
        state = LockedValue(State(owner: owner, envelope: envelope, plaintext: plaintext))
    }
}

/// The manager under test with one gate removed on purpose (``IsolationStress/Fault``).
struct FaultyPolicy: ManagedIdentityPolicy {
    let base: PolicyManager
    let fault: IsolationStress.Fault

    func isManaged(_ identity: Identity) -> Bool { base.isManaged(identity) }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { base.isFileEncryptionRequired(for: identity) }
    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        switch (fault, access) {
        case (.noModifyCheck, .modify), (.noReadCheck, .read), (.noTransferCheck, .transfer): return nil
        default: return base.refusal(of: access, to: owner)
        }
    }
}

final class World: Sendable {
    let options: IsolationStress.Options
    let directory: String
    let root: String
    let accounts: [Identity]
    let outsiders: [Identity?]
    let manager: PolicyManager
    let data: DataProtectionManager
    let files: FileProtectionManager
    let queue = IdentityDispatchQueue(label: "isolation.read", attributes: .concurrent)
    let items = LockedValue<[Item]>([])
    let counter = Atomic<Int>(0)
    let operations = Atomic<Int>(0)
    let leaked = Atomic<Int>(0)
    let foreignModifications = Atomic<Int>(0)
    let plaintextAtRest = Atomic<Int>(0)
    let rows = LockedValue([IsolationStress.API: IsolationStress.Row]())
    let violations = LockedValue<(count: Int, first: [String])>((0, []))

    static let levels: [DataTransferLevel] = [.sameTenant, .none, .managedAccounts, .any]

    init(options: IsolationStress.Options) throws {
        self.options = options
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("isolation-\(UUID().uuidString)").path
        root = directory + "/root"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        accounts = (0..<options.accounts).map { Identity("user\($0)@tenant\($0 % options.tenants).example") }
        outsiders = [nil, .unmanaged, "guest0@personal.example", "guest1@personal.example"]
        var tenants: [TenantID: Policy] = [:]
        for tenant in 0..<options.tenants {
            tenants[TenantID("tenant\(tenant).example")] = Policy(
                identity: nil, allowedSaveLocations: [.localDrive], isFileEncryptionRequired: tenant.isMultiple(of: 2),
                dataTransfer: Self.levels[tenant % Self.levels.count])
        }
        var settings = RuntimeSettings()
        settings.dataIsolation = options.dataIsolation
        manager = PolicyManager(settings: settings, policySource: StaticPolicySource(tenants: tenants))
        for account in accounts { manager.registerAccount(account) }
        let keys = try FileKeyStore(directory: directory + "/keys")
        let policy: any ManagedIdentityPolicy = options.fault == .none ? manager : FaultyPolicy(base: manager, fault: options.fault)
        data = DataProtectionManager(keyStore: keys, policy: policy)
        files = try FileProtectionManager(roots: [root], keyStore: keys, policy: policy, stateDirectory: directory + "/state")
    }

    func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: The model

    func tenant(of identity: Identity) -> Int? {
        accounts.firstIndex(of: identity).map { $0 % options.tenants }
    }

    /// Whether data of `owner` may reach `reader` (or be given to it), from the configuration alone.
    func allowed(owner: Identity?, reader: Identity?) -> Bool {
        guard let owner, let ownerTenant = tenant(of: owner) else { return true }   // unmanaged data
        if reader == owner { return true }
        let readerTenant = reader.flatMap(tenant(of:))
        switch Self.levels[ownerTenant % Self.levels.count] {
        case .none: return false
        case .sameTenant: return readerTenant == ownerTenant
        case .managedAccounts: return readerTenant != nil
        case .any: return true
        }
    }

    /// Whether `caller` may change `owner`'s data into data of `newOwner`: it may modify it (as a reader), and
    /// when the owner changes, the data may go to the new owner.
    func mayModify(owner: Identity?, by caller: Identity?, newOwner: Identity?) -> Bool {
        allowed(owner: owner, reader: caller) && (newOwner == owner || allowed(owner: owner, reader: newOwner))
    }

    /// Whether files of `owner` must be encrypted at rest, from the configuration alone.
    func mustEncrypt(_ owner: Identity?) -> Bool {
        guard let owner, let tenant = tenant(of: owner) else { return false }
        return tenant.isMultiple(of: 2)
    }

    /// Counts a file of an account that must be encrypted found with `plaintext` on disk.
    func checkAtRest(_ path: String, owner: Identity?, plaintext: Data, api: IsolationStress.API) {
        guard mustEncrypt(owner), let bytes = FileManager.default.contents(atPath: path), bytes.range(of: plaintext) != nil else { return }
        plaintextAtRest.add(1, ordering: .relaxed)
        tally(api, allowed: true, violation: "\(api.rawValue): \(show(owner))'s file is in the clear on disk")
    }

    // MARK: Working

    func anyone(_ random: inout SplitMix64) -> Identity? {
        let index = Int.random(in: 0..<(accounts.count + outsiders.count), using: &random)
        return index < accounts.count ? accounts[index] : outsiders[index - accounts.count]
    }

    func pick(_ random: inout SplitMix64, _ kind: Item.Kind) -> Item? {
        items.withLock { items in
            let matching = items.filter { $0.kind == kind }
            return matching.isEmpty ? nil : matching[Int.random(in: 0..<matching.count, using: &random)]
        }
    }

    func keepGoing(_ done: Int, budget: Int?, deadline: UInt64) -> Bool {
        if let budget { return done < budget }
        return DispatchTime.now().uptimeNanoseconds < deadline
    }

    /// A worker on a raw thread: every operation synchronous.
    func work(random: inout SplitMix64, budget: Int?, deadline: UInt64) {
        var done = 0
        while keepGoing(done, budget: budget, deadline: deadline) {
            step(&random)
            done += 1
        }
    }

    /// A worker in a task: reads of envelopes happen in child tasks; streams are protected and read here.
    func workInTasks(random: inout SplitMix64, budget: Int?, deadline: UInt64) async {
        var done = 0
        while keepGoing(done, budget: budget, deadline: deadline) {
            switch Int.random(in: 0..<8, using: &random) {
            case 0, 1:
                operations.add(1, ordering: .relaxed)
                if let item = pick(&random, .envelope) {
                    let reader = anyone(&random)
                    await IdentityContext.withThreadIdentity(reader) {
                        await Task { self.read(item, by: reader, api: .unprotectInTask) }.value
                    }
                }
            case 2:
                operations.add(1, ordering: .relaxed)
                await createStream(by: anyone(&random), &random)
            case 3:
                operations.add(1, ordering: .relaxed)
                if let item = pick(&random, .stream) { await readStream(item, by: anyone(&random), &random) }
            default:
                step(&random)
            }
            done += 1
        }
    }

    /// Protects a new stream as `writer`, in pieces of random sizes.
    func createStream(by writer: Identity?, _ random: inout SplitMix64) async {
        let number = counter.add(1, ordering: .relaxed).newValue
        let plaintext = Data("SECRET stream \(number) of \(show(writer)) \(random.next()) ".utf8) + Data(repeating: 0x2E, count: Int(random.next() % 200))
        let pieces = Self.split(Array(plaintext), &random)
        let chunkSize = 1 + Int(random.next() % 64)
        do {
            let sealed = try await IdentityContext.withThreadIdentity(writer) {
                try await data.protect(Self.stream(pieces), chunkSize: chunkSize).collect()
            }
            tally(.protectStream, allowed: true, violation: nil)
            add(Item(kind: .stream, plaintext: plaintext, path: "", owner: writer, envelope: Data(sealed)))
        } catch {
            tally(.protectStream, allowed: false, violation: "protect of a stream as \(show(writer)) failed: \(error)")
        }
    }

    /// Unprotects a stream as `reader`, split at random (empty pieces first and in between), against the model.
    func readStream(_ item: Item, by reader: Identity?, _ random: inout SplitMix64) async {
        let (owner, envelope, plaintext) = item.state.withLock { ($0.owner, $0.envelope, $0.plaintext) }
        let expected = allowed(owner: owner, reader: reader)
        let what = "unprotectStream of \(show(owner))'s data by \(show(reader))"
        let pieces = [[]] + Self.split(Array(envelope), &random)
        do {
            let bytes = try await IdentityContext.withThreadIdentity(reader) { try await data.unprotect(Self.stream(pieces)).collect() }
            if !expected {
                if Data(bytes).range(of: plaintext.prefix(24)) != nil { leaked.add(plaintext.count, ordering: .relaxed) }
                return tally(.unprotectStream, allowed: true, violation: "\(what) was allowed; the rules refuse it")
            }
            tally(.unprotectStream, allowed: true, violation: Data(bytes) == plaintext ? nil : "\(what) gave other bytes")
        } catch ProtectionError.accessDenied {
            tally(.unprotectStream, allowed: false, violation: expected ? "\(what) was refused; the rules allow it" : nil)
        } catch {
            tally(.unprotectStream, allowed: false, violation: "\(what) failed: \(error)")
        }
    }

    /// `bytes` cut into pieces of random sizes, empty ones included.
    static func split(_ bytes: [UInt8], _ random: inout SplitMix64) -> [[UInt8]] {
        var pieces: [[UInt8]] = []
        var offset = 0
        while offset < bytes.count {
            let count = min(bytes.count - offset, Int(random.next() % 48))
            pieces.append(Array(bytes[offset..<offset + count]))
            offset += count
        }
        return pieces
    }

    static func stream(_ pieces: [[UInt8]]) -> AsyncStream<[UInt8]> {
        AsyncStream { continuation in
            for piece in pieces { continuation.yield(piece) }
            continuation.finish()
        }
    }

    func step(_ random: inout SplitMix64) {
        operations.add(1, ordering: .relaxed)
        let roll = Int.random(in: 0..<100, using: &random)
        switch roll {
        case 0..<12: createEnvelope(by: anyone(&random), &random)
        case 12..<24: createFile(by: anyone(&random), &random)
        case 24..<70:
            let reader = anyone(&random)
            let apis: [IsolationStress.API] = [.unprotect, .readFile, .readFileThroughQueue, .decryptFileToCopy, .openProtectedFile]
            let api = apis[Int.random(in: 0..<apis.count, using: &random)]
            guard let item = pick(&random, api == .unprotect ? .envelope : .file) else { return }
            if api == .readFileThroughQueue {
                let group = DispatchGroup()
                IdentityContext.withThreadIdentity(reader) {
                    queue.async(group: group) { self.read(item, by: reader, api: api) }
                }
                group.wait()
            } else {
                IdentityContext.withThreadIdentity(reader) { read(item, by: reader, api: api) }
            }
        case 70..<80:
            guard let item = pick(&random, .file) else { return }
            modify(item, by: anyone(&random), &random)
        case 80..<88:
            let source = anyone(&random), target = anyone(&random)
            let expected = allowed(owner: source, reader: target)
            let answer = manager.isDataTransferAllowed(from: source, to: target)
            tally(.isDataTransferAllowed, allowed: answer, violation: answer != expected
                ? "isDataTransferAllowed(from: \(show(source)), to: \(show(target))) = \(answer), expected \(expected)" : nil)
        default:
            guard let item = pick(&random, .file), let target = anyone(&random) else { return }
            reown(item, to: target)
        }
    }

    func createEnvelope(by writer: Identity?, _ random: inout SplitMix64) {
        let number = counter.add(1, ordering: .relaxed).newValue
        let plaintext = Data("SECRET envelope \(number) of \(show(writer)) \(random.next())".utf8)
        do {
            let envelope = try IdentityContext.withThreadIdentity(writer) { try data.protect(plaintext) }
            let owner = try data.protectionInfo(envelope)?.owner
            let violation = owner != (writer ?? .unmanaged) ? "protect as \(show(writer)) gave owner \(show(owner))" : nil
            tally(.protect, allowed: true, violation: violation)
            add(Item(kind: .envelope, plaintext: plaintext, path: "", owner: owner, envelope: envelope))
        } catch {
            tally(.protect, allowed: false, violation: "protect as \(show(writer)) failed: \(error)")
        }
    }

    func createFile(by writer: Identity?, _ random: inout SplitMix64) {
        let number = counter.add(1, ordering: .relaxed).newValue
        let path = "\(root)/file-\(number).txt"
        let plaintext = Data("SECRET file \(number) of \(show(writer)) \(random.next())".utf8)
        do {
            try IdentityContext.withThreadIdentity(writer) { try files.writeFile(atPath: path, contents: plaintext) }
            tally(.writeFile, allowed: true, violation: nil)
            checkAtRest(path, owner: writer, plaintext: plaintext, api: .writeFile)
            add(Item(kind: .file, plaintext: plaintext, path: path, owner: writer, envelope: Data()))
        } catch {
            tally(.writeFile, allowed: false, violation: "writeFile as \(show(writer)) failed: \(error)")
        }
    }

    func add(_ item: Item) {
        items.withLock { items in
            if items.count >= 512 { items.removeFirst() }
            items.append(item)
        }
    }

    /// `caller` changes the file `item` one of three ways, checked against the model; a refused change must
    /// leave the file's bytes as they were.
    func modify(_ item: Item, by caller: Identity?, _ random: inout SplitMix64) {
        let number = counter.add(1, ordering: .relaxed).newValue
        let replacement = Data("SECRET change \(number) by \(show(caller)) \(random.next())".utf8)
        let way = Int.random(in: 0..<3, using: &random)
        let named: Identity? = [nil, caller, anyone(&random)][Int.random(in: 0..<3, using: &random)]
        item.state.withLock { state in
            let before = FileManager.default.contents(atPath: item.path)
            // The owner of the result: the caller for writeFile, the named owner (else the caller) for a
            // truncating open, the recorded owner for a writing handle that does not truncate.
            let newOwner: Identity? = switch way {
            case 0: caller
            case 1: named ?? caller
            default: state.owner
            }
            let expected = mayModify(owner: state.owner, by: caller, newOwner: newOwner)
            let what = ["writeFile over", "openProtectedFile(.truncate, owner: \(show(named))) of", "openProtectedFile(.write) of"][way]
                + " \(show(state.owner))'s file by \(show(caller))"
            do {
                try IdentityContext.withThreadIdentity(caller) {
                    switch way {
                    case 0:
                        try files.writeFile(atPath: item.path, contents: replacement)
                    case 1:
                        let file = try files.openProtectedFile(atPath: item.path, options: [.read, .write, .truncate], owner: named)
                        try file.write(replacement)
                        try file.close()
                    default:
                        let file = try files.openProtectedFile(atPath: item.path, options: [.read, .write])
                        try file.write(replacement, at: 0)
                        try file.truncate(to: UInt64(replacement.count))
                        try file.close()
                    }
                }
                if !expected {
                    foreignModifications.add(1, ordering: .relaxed)
                    return tally(.modifyFile, allowed: true, violation: "\(what) was allowed; the rules refuse it")
                }
                state.owner = newOwner
                state.plaintext = replacement
                let owner = try files.protectionInfo(path: item.path)?.owner
                let reread = try IdentityContext.withThreadIdentity(newOwner) { try files.readFile(atPath: item.path) }
                checkAtRest(item.path, owner: newOwner, plaintext: replacement, api: .modifyFile)
                tally(.modifyFile, allowed: true, violation: owner != newOwner || reread != replacement
                    ? "\(what): the file is \(show(owner))'s, holding other bytes" : nil)
            } catch ProtectionError.accessDenied {
                let changed = FileManager.default.contents(atPath: item.path) != before
                if changed { foreignModifications.add(1, ordering: .relaxed) }
                tally(.modifyFile, allowed: false, violation: expected ? "\(what) was refused; the rules allow it"
                    : changed ? "\(what) was refused but changed the file" : nil)
            } catch {
                tally(.modifyFile, allowed: false, violation: "\(what) failed: \(error)")
            }
        }
    }

    /// One read of `item` by the current thread identity `reader`, checked against the model.
    func read(_ item: Item, by reader: Identity?, api: IsolationStress.API) {
        item.state.withLock { state in
            let plaintext = state.plaintext
            let expected = allowed(owner: state.owner, reader: reader)
            let what = "\(api.rawValue) of \(show(state.owner))'s data by \(show(reader))"
            do {
                let bytes: Data?
                switch api {
                case .unprotect, .unprotectInTask:
                    bytes = try data.unprotect(state.envelope)
                case .readFile, .readFileThroughQueue:
                    bytes = try files.readFile(atPath: item.path)
                case .decryptFileToCopy:
                    let copy = item.path + ".copy-\(counter.add(1, ordering: .relaxed).newValue)"
                    defer { try? FileManager.default.removeItem(atPath: copy) }
                    try files.decryptFile(path: item.path, toCopyPath: copy)
                    bytes = FileManager.default.contents(atPath: copy)
                case .openProtectedFile:
                    let file = try files.openProtectedFile(atPath: item.path, options: [.read])
                    defer { try? file.close() }
                    bytes = Data(try file.readToEnd())
                default:
                    bytes = nil
                }
                if !expected {
                    if let bytes, bytes.range(of: plaintext) != nil { leaked.add(plaintext.count, ordering: .relaxed) }
                    return tally(api, allowed: true, violation: "\(what) was allowed; the rules refuse it")
                }
                if let bytes, bytes != plaintext {
                    return tally(api, allowed: true, violation: "\(what) gave other bytes")
                }
                tally(api, allowed: true, violation: nil)
            } catch ProtectionError.accessDenied {
                tally(api, allowed: false, violation: expected ? "\(what) was refused; the rules allow it" : nil)
            } catch {
                tally(api, allowed: false, violation: "\(what) failed: \(error)")
            }
        }
    }

    /// Gives the file `item` to `target`, checked against the model.
    func reown(_ item: Item, to target: Identity) {
        item.state.withLock { state in
            let expected = allowed(owner: state.owner, reader: target)
            let what = "re-owning \(show(state.owner))'s file to \(show(target))"
            do {
                // The owner hands its file over (the caller must be allowed to see the data, too).
                try IdentityContext.withThreadIdentity(state.owner) { try files.protect(path: item.path, identity: target) }
                let owner = try files.protectionInfo(path: item.path)?.owner
                if !expected { return tally(.reownFile, allowed: true, violation: "\(what) was allowed; the rules refuse it") }
                if owner != target { return tally(.reownFile, allowed: true, violation: "\(what): the owner is \(show(owner))") }
                state.owner = target
                tally(.reownFile, allowed: true, violation: nil)
            } catch ProtectionError.accessDenied {
                tally(.reownFile, allowed: false, violation: expected ? "\(what) was refused; the rules allow it" : nil)
            } catch {
                tally(.reownFile, allowed: false, violation: "\(what) failed: \(error)")
            }
        }
    }

    func tally(_ api: IsolationStress.API, allowed: Bool, violation: String?) {
        rows.withLock { rows in
            var row = rows[api] ?? IsolationStress.Row(api: api)
            row.attempts += 1
            if allowed { row.allowed += 1 } else { row.refused += 1 }
            if violation != nil { row.violations += 1 }
            rows[api] = row
        }
        if let violation {
            violations.withLock { state in
                state.count += 1
                if state.first.count < 20 { state.first.append(violation) }
            }
        }
    }

    func report(seconds: Double) -> IsolationStress.Report {
        let rows = rows.withLock { rows in IsolationStress.API.allCases.map { rows[$0] ?? IsolationStress.Row(api: $0) } }
        let (count, first) = violations.withLock { ($0.count, $0.first) }
        return IsolationStress.Report(
            rows: rows, violations: first, violationCount: count, leakedBytes: leaked.load(ordering: .relaxed),
            foreignModifications: foreignModifications.load(ordering: .relaxed), plaintextAtRest: plaintextAtRest.load(ordering: .relaxed),
            operations: operations.load(ordering: .relaxed), seconds: seconds)
    }

    func show(_ identity: Identity?) -> String {
        identity.map { $0.isUnmanaged ? "\"\"" : $0.name } ?? "no identity"
    }
}
