import Dispatch
import Foundation
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Synchronization

/// A seeded, randomized check of tenant isolation (DESIGN §4b), shared by the test suite and
/// `identity-harness stress --isolation`.
///
/// 64 managed accounts in 8 tenants (every tenant with its own policy document and ``DataTransferLevel``), a
/// few unmanaged accounts, `""` and "no identity" write, read, transfer and re-own each other's data, from
/// raw threads and from tasks, through every protection API. Each outcome is checked against a model of the
/// rules written from the configuration alone (not by asking the runtime): a read or a transfer is allowed
/// exactly when the data is unmanaged, the reader is the owner, or the owner's tenant level lets it go there.
/// Any other outcome is a violation; plaintext returned where it was not allowed is counted in bytes.
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

        public init() {}
    }

    /// The APIs exercised, one row each in the report.
    public enum API: String, CaseIterable, Sendable {
        case protect, unprotect, unprotectInTask, writeFile, readFile, readFileThroughQueue, decryptFileToCopy
        case openProtectedFile, isDataTransferAllowed, reownFile
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
        public var operations: Int
        public var seconds: Double

        public var passed: Bool { violationCount == 0 && leakedBytes == 0 }

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
                + "\(leakedBytes) plaintext bytes leaked")
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
    enum Kind { case envelope, file }

    struct State {
        var owner: Identity?
        var envelope: Data
    }

    let kind: Kind
    let plaintext: Data
    let path: String
    let state: LockedValue<State>

    init(kind: Kind, plaintext: Data, path: String, owner: Identity?, envelope: Data) {
        self.kind = kind
        self.plaintext = plaintext
        self.path = path
        state = LockedValue(State(owner: owner, envelope: envelope))
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
        data = DataProtectionManager(keyStore: keys, policy: manager)
        files = try FileProtectionManager(roots: [root], keyStore: keys, policy: manager, stateDirectory: directory + "/state")
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

    /// A worker in a task: reads of envelopes happen in child tasks.
    func workInTasks(random: inout SplitMix64, budget: Int?, deadline: UInt64) async {
        var done = 0
        while keepGoing(done, budget: budget, deadline: deadline) {
            if Int.random(in: 0..<4, using: &random) == 0, let item = pick(&random, .envelope) {
                let reader = anyone(&random)
                await IdentityContext.withThreadIdentity(reader) {
                    await Task { self.read(item, by: reader, api: .unprotectInTask) }.value
                }
            } else {
                step(&random)
            }
            done += 1
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
        case 70..<85:
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

    /// One read of `item` by the current thread identity `reader`, checked against the model.
    func read(_ item: Item, by reader: Identity?, api: IsolationStress.API) {
        item.state.withLock { state in
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
                    if let bytes, bytes.range(of: item.plaintext) != nil { leaked.add(item.plaintext.count, ordering: .relaxed) }
                    return tally(api, allowed: true, violation: "\(what) was allowed; the rules refuse it")
                }
                if let bytes, bytes != item.plaintext {
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
            operations: operations.load(ordering: .relaxed), seconds: seconds)
    }

    func show(_ identity: Identity?) -> String {
        identity.map { $0.isUnmanaged ? "\"\"" : $0.name } ?? "no identity"
    }
}
