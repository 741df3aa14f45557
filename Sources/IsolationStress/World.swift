import Dispatch
import Foundation
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Synchronization

/// One piece of protected data and what it must hold. Operations on an item hold its lock, so its owner does
/// not change under a read.
final class Item: Sendable {
    enum Kind { case envelope, file, stream, streamFile }

    struct State {
        var owner: Identity?
        var envelope: Data
        /// What the data holds now (a file's changes by the model's rules update it).
        var plaintext: Data
        /// The model no longer knows what it holds (a change it could not judge): nothing is checked on it.
        var retired = false
        /// Whether the data recorded isolation when it was created (its owner was managed then); `nil`: unknown.
        var isolated: Bool?
    }

    let kind: Kind
    let path: String
    let state: LockedValue<State>

    init(kind: Kind, plaintext: Data, path: String, owner: Identity?, envelope: Data, isolated: Bool?) {
        self.kind = kind
        self.path = path
        state = LockedValue(State(owner: owner, envelope: envelope, plaintext: plaintext, isolated: isolated))
    }

    /// Runs `body` with the states of `first` and `second` locked, in an order fixed for the pair (no
    /// deadlock between two workers locking the same two items the other way round).
    static func withBoth(_ first: Item, _ second: Item, _ body: (inout State, inout State) -> Void) {
        let firstGoesFirst = ObjectIdentifier(first) < ObjectIdentifier(second)
        let (outer, inner) = firstGoesFirst ? (first, second) : (second, first)
        outer.state.withLock { outerState in
            inner.state.withLock { innerState in
                if firstGoesFirst { body(&outerState, &innerState) } else { body(&innerState, &outerState) }
            }
        }
    }
}

/// The manager under test with one gate removed on purpose (``IsolationStress/Fault``).
struct FaultyPolicy: ManagedIdentityPolicy {
    let base: PolicyManager
    let fault: IsolationStress.Fault
    /// Whether the program has deleted the policy document of `owner`'s tenant.
    let isWithdrawn: @Sendable (Identity) -> Bool

    /// For `forgetRecordedIsolation`, a withdrawn owner passes for managed: the protection managers' recorded
    /// isolation then leaves the decision to this policy, which forgets it (below).
    func isManaged(_ identity: Identity) -> Bool {
        if fault == .forgetRecordedIsolation, isWithdrawn(identity) { return true }
        return base.isManaged(identity)
    }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { base.isFileEncryptionRequired(for: identity) }
    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        let refusal = base.refusal(of: access, to: owner)
        switch (fault, access, refusal) {
        case (.noModifyCheck, .modify, _), (.noReadCheck, .read, _), (.noTransferCheck, .transfer, _): return nil
        case (.ignoreBrokenPolicy, _, .policyUnavailable?): return nil
        case (.forgetRecordedIsolation, .read, _), (.forgetRecordedIsolation, .modify, _), (.forgetRecordedIsolation, .transfer, _):
            return isWithdrawn(owner) ? nil : refusal
        default: return refusal
        }
    }
}

/// Steps share the world; a fault episode (a policy document changed, a wipe) has it to itself: it waits for
/// the steps under way to end, and new ones wait for it. Threads wait by sleeping, tasks by suspending, so an
/// episode that needs Swift's cooperative pool (a wipe) always gets it.
final class EpisodeGate: Sendable {
    private struct State {
        var steps = 0
        var episode = false
    }

    private let state = LockedValue(State())

    private func tryEnter() -> Bool {
        state.withLock { state in
            guard !state.episode else { return false }
            state.steps += 1
            return true
        }
    }

    /// Begins a step on a thread.
    func enter() {
        while !tryEnter() { usleep(200) }
    }

    /// Begins a step in a task.
    func enter() async {
        while !tryEnter() {
            do { try await Task.sleep(for: .microseconds(200)) } catch { return enterNow() }
        }
    }

    /// A cancelled waiter: takes its place at once (the program never cancels its workers).
    private func enterNow() {
        state.withLock { $0.steps += 1 }
    }

    func leave() {
        state.withLock { $0.steps -= 1 }
    }

    /// Runs `body` alone, from a thread that is in no step; `false` when another episode is under way.
    func episode(_ body: () -> Void) -> Bool {
        let mine = state.withLock { state -> Bool in
            guard !state.episode else { return false }
            state.episode = true
            return true
        }
        guard mine else { return false }
        while state.withLock({ $0.steps }) > 0 { usleep(100) }
        body()
        state.withLock { $0.episode = false }
        return true
    }
}

/// A policy source that has never loaded: its manager must refuse every operation on owned data (`ProtectionError.policyUnavailable(reason:)` (115)).
final class NeverLoadedSource: PolicySource {
    var policies: PolicySet { PolicySet() }
    var hasLoaded: Bool { false }
    func setChangeHandler(_ handler: (@Sendable () -> Void)?) {}
}

/// A `ProtectedFile` kept open by the program, to be read from later, from any identity.
struct HeldHandle: Sendable {
    let file: ProtectedFile
    /// The effective file identity of the code that opened it.
    let opener: Identity?
    /// The file's owner when it was opened.
    let owner: Identity?
    /// What the file held then.
    let plaintext: Data
    /// The isolation its data recorded.
    let isolated: Bool?
    /// A wipe destroyed its owner's keys since: no read may give plaintext any more.
    var shredded = false
}

/// What a judged call came to.
enum Outcome {
    /// Allowed, as the model says, with what it returned.
    case allowed(Data?)
    /// Refused with a code the model gives.
    case refused
    /// A block of an account involved changed while it ran: not judged.
    case undecided
    /// A violation (already counted).
    case violated
    /// Refused by an injected fault (the key store did not answer, the call was cancelled): 113.
    case interrupted
}

final class World: Sendable {
    let options: IsolationStress.Options
    let directory: String
    let root: String
    let accounts: [Identity]
    let outsiders: [Identity?]
    /// Accounts of the tenants that the manager does not know (never registered): a tenant wipe must find
    /// their files under the root (``IsolationStress/FaultClass/wipes`` only).
    let strangers: [Identity]
    let model: AccessModel
    let manager: PolicyManager
    let policyDirectory: String
    let policySource: DirectoryPolicySource
    let keyStore: any KeyStore
    let data: DataProtectionManager
    let files: FileProtectionManager
    /// Managers over a policy source that has never loaded, on the same keys and files.
    let unloadedData: DataProtectionManager
    let unloadedFiles: FileProtectionManager
    /// Whether `unloadedFiles` sees the owners `files` records (owners in extended attributes).
    let unloadedSeesOwners: Bool
    /// The accounts the program blocks and unblocks.
    let blockable: [Identity]
    let blocks = BlockBoard()
    let gate = EpisodeGate()
    /// The directory no walk can read (``IsolationStress/FaultClass/unwalkableEntries``).
    let deep: DeepDirectory?
    let queue = IdentityDispatchQueue(label: "isolation.read", attributes: .concurrent)
    let items = LockedValue<[Item]>([])
    /// Items that left the model whose files are still to be removed.
    let evictions = LockedValue<[Item]>([])
    let handles = LockedValue<[HeldHandle]>([])
    /// Envelopes and streams of wiped accounts: no read may give their plaintext any more.
    let shredded = LockedValue<[Item]>([])
    /// The document of each tenant as the program last wrote it.
    let documents = LockedValue<[Int: PolicyDocumentFile]>([:])
    /// Decisions of faults that have no worker's generator at hand.
    let dice: LockedValue<SplitMix64>
    let counter = Atomic<Int>(0)
    let operations = Atomic<Int>(0)
    let leaked = Atomic<Int>(0)
    let foreignModifications = Atomic<Int>(0)
    let plaintextAtRest = Atomic<Int>(0)
    let lostData = Atomic<Int>(0)
    let withdrawnLeaks = Atomic<Int>(0)
    let destroyedKeyPlaintext = Atomic<Int>(0)
    let unreportedLeftovers = Atomic<Int>(0)
    let brokenPolicyAllowances = Atomic<Int>(0)
    let policyChanges = Atomic<Int>(0)
    let cancellations = Atomic<Int>(0)
    let wipes = Atomic<Int>(0)
    let rows = LockedValue([IsolationStress.API: IsolationStress.Row]())
    let violations = LockedValue<(count: Int, first: [String], kinds: [String: (count: Int, example: String)])>((0, [], [:]))

    /// A violation with its accounts, paths and numbers taken out: what kind of violation it is.
    static func kind(of violation: String) -> String {
        var text = violation
        for (pattern, replacement) in [
            (#"user\d+@tenant\d+\.example"#, "ACCOUNT"), (#"stranger\d+@tenant\d+\.example"#, "STRANGER"),
            (#"guest\d+@personal\.example"#, "GUEST"), (#"/[^ ]*"#, "PATH"), (#"tenant\d+"#, "TENANT"), (#"-?\d+ (bytes|owned)"#, "N $1"),
        ] {
            text = text.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
        }
        return text
    }

    static let levels: [DataTransferLevel] = [.sameTenant, .none, .managedAccounts, .any]

    init(options: IsolationStress.Options) throws {
        var options = options
        options.faults.formUnion(options.fault.needs)
        // An entry no walk reads matters to wipes only.
        if options.faults.contains(.unwalkableEntries) { options.faults.insert(.wipes) }
        self.options = options
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("isolation-\(UUID().uuidString)").path
        root = directory + "/root"
        policyDirectory = directory + "/policies"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: policyDirectory, withIntermediateDirectories: true)
        accounts = (0..<options.accounts).map { Identity("user\($0)@tenant\($0 % options.tenants).example") }
        strangers = options.faults.contains(.wipes) ? (0..<options.tenants).map { Identity("stranger\($0)@tenant\($0).example") } : []
        outsiders = [nil, .unmanaged, "guest0@personal.example", "guest1@personal.example"]
        blockable = Array(accounts.prefix(8)) + ["guest0@personal.example"]
        var levels: [Int: DataTransferLevel] = [:]
        var documents: [Int: PolicyDocumentFile] = [:]
        for tenant in 0..<options.tenants {
            levels[tenant] = Self.levels[tenant % Self.levels.count]
            documents[tenant] = .good
        }
        var tenantOf = Dictionary(uniqueKeysWithValues: accounts.enumerated().map { ($1, $0 % options.tenants) })
        for (tenant, stranger) in strangers.enumerated() { tenantOf[stranger] = tenant }
        model = AccessModel(tenants: tenantOf, levels: levels, encryptingTenants: Set((0..<options.tenants).filter { $0.isMultiple(of: 2) }))
        for tenant in 0..<options.tenants {
            try Self.document(tenant: tenant, level: levels[tenant]!, encrypting: model.encryptingTenants.contains(tenant))
                .write(to: URL(fileURLWithPath: Self.documentPath(policyDirectory, tenant)))
        }
        self.documents.withLock { $0 = documents }
        dice = LockedValue(SplitMix64(seed: options.seed &+ 0xFA17))
        var settings = RuntimeSettings()
        settings.dataIsolation = options.dataIsolation
        policySource = try DirectoryPolicySource(directory: policyDirectory)
        manager = PolicyManager(settings: settings, policySource: policySource)
        for account in accounts { manager.registerAccount(account) }
        let database = try FileKeyStore(atPath: directory + "/keys")
        let faults = options.faults
        if faults.contains(.slowKeyStore) || faults.contains(.cancellation) || options.fault == .keepDestroyedKeys {
            // Misses and latency only where a class asks for them: a store that never answers for the slow
            // store, suspension points to cancel at for cancellation.
            // The self-check of lost data needs many interrupted truncating opens: most lookups miss.
            let eager = options.fault == .truncateBeforeKey
            let behaviour = LateKeyStore.Behaviour(
                missEvery: eager ? 2 : faults.contains(.cancellation) ? 4 : faults.contains(.slowKeyStore) ? 8 : .max,
                neverIn16: eager ? 8 : faults.contains(.slowKeyStore) ? 4 : 0, lateIn16: faults.contains(.slowKeyStore) ? 4 : 8,
                latency: .milliseconds(faults.contains(.cancellation) ? 5 : 2), timeout: .milliseconds(20))
            keyStore = LateKeyStore(database: database, behaviour: behaviour, seed: options.seed, keepsDestroyedKeys: options.fault == .keepDestroyedKeys)
        } else {
            keyStore = database
        }
        let board = blocks
        let tenantOfOwner = model.tenants
        let policy: any ManagedIdentityPolicy = options.fault == .none ? manager : FaultyPolicy(base: manager, fault: options.fault) { owner in
            tenantOfOwner[owner].map { board.tenant($0) == .withdrawn } ?? false
        }
        data = DataProtectionManager(keyStore: keyStore, policy: policy)
        files = try FileProtectionManager(roots: [root], keyStore: keyStore, policy: policy, stateDirectory: directory + "/state")
        manager.fileProtection = files
        let unloaded = PolicyManager(settings: settings, policySource: NeverLoadedSource())
        unloadedData = DataProtectionManager(keyStore: keyStore, policy: unloaded)
        unloadedFiles = try FileProtectionManager(roots: [root], keyStore: keyStore, policy: unloaded, stateDirectory: directory + "/unloaded-state")
        deep = faults.contains(.unwalkableEntries) ? try DeepDirectory(under: root) : nil
        let probe = root + "/owner-probe"
        let (files, unloadedFiles, account) = (files, unloadedFiles, accounts[1])
        try IdentityContext.withThreadIdentity(account) { try files.writeFile(atPath: probe, contents: Data("probe".utf8)) }
        // A failed lookup (none recorded) is the answer "no".
        unloadedSeesOwners = (try? unloadedFiles.protectionInfo(atPath: probe)?.owner) == account
        try FileManager.default.removeItem(atPath: probe)
    }

    func tearDown() {
        // Closing a handle whose file a wipe removed may fail; the directory goes anyway.
        for handle in handles.withLock({ $0 }) { try? handle.file.close() }
        deep?.remove()
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Policy documents

    static func documentPath(_ directory: String, _ tenant: Int) -> String {
        "\(directory)/tenant\(tenant).json"
    }

    /// The good document of `tenant`.
    static func document(tenant: Int, level: DataTransferLevel, encrypting: Bool) -> Data {
        let name = switch level {
        case .none: "none"
        case .sameTenant: "sameTenant"
        case .managedAccounts: "managedAccounts"
        case .any: "any"
        }
        return Data("""
            {"formatVersion": 1, "tenant": "tenant\(tenant).example", "saveToLocations": ["localDrive"], \
            "fileEncryptionRequired": \(encrypting), "dataTransfer": "\(name)"}
            """.utf8)
    }

    // MARK: Judging

    /// Judges the outcome `result` of one call of `api` against the model's `expect`, unless a block of an
    /// account in `blocks` changed while it ran. Plaintext `secret` found in what an allowed-against-the-rules
    /// call returned counts as leaked. `owner` (the owner of the data, or of the data created) and `isolated`
    /// (what that data recorded) sort a wrong allowance into its invariant.
    func judge(
        _ api: IsolationStress.API, _ what: String, refusals expect: Expect, blocks: BlockBoard.Snapshot?, secret: Data? = nil,
        owner: Identity?? = nil, isolated: Bool? = nil, also: (owner: Identity?, isolated: Bool?)? = nil,
        _ result: Result<Data?, any Error>
    ) -> Outcome {
        if let blocks, !self.blocks.isUnchanged(since: blocks) {
            tally(api, .undecided, violation: nil)
            return .undecided
        }
        switch result {
        case let .success(bytes):
            guard expect.mayAllow else {
                if let bytes, let secret, bytes.range(of: secret) != nil { leaked.add(secret.count, ordering: .relaxed) }
                let note = blocks.flatMap { blocks in
                    owner.flatMap { classifyAllowance(owner: $0, isolated: isolated, blocks) }
                        ?? also.flatMap { classifyAllowance(owner: $0.owner, isolated: $0.isolated, blocks) }
                }
                tally(api, .allowed, violation: "\(what) was allowed; \(expect.description)" + (note.map { " (\($0))" } ?? ""))
                return .violated
            }
            tally(api, .allowed, violation: nil)
            return .allowed(bytes)
        case let .failure(error as ProtectionError) where error.code == 113 && storeFaults:
            tally(api, .interrupted, violation: nil)
            return .interrupted
        case let .failure(error as ProtectionError) where [108, 109, 115].contains(error.code):
            let violation = expect.codes.contains(error.code) ? nil : "\(what) was refused with \(error.code); \(expect.description)"
            tally(api, .refused, violation: violation)
            return violation == nil ? .refused : .violated
        case let .failure(error):
            tally(api, .refused, violation: "\(what) failed: \(error)")
            return .violated
        }
    }

    /// Whether a key store that answers late or never, or cancellation, is injected: 113 is then a refusal.
    var storeFaults: Bool {
        options.faults.contains(.slowKeyStore) || options.faults.contains(.cancellation)
    }

    /// Counts an allowance against the rules under the invariant it breaks, if it is one of the faults', and
    /// says which.
    func classifyAllowance(owner: Identity?, isolated: Bool?, _ blocks: BlockBoard.Snapshot) -> String? {
        let tenant = owner.flatMap { model.tenants[$0] }
        switch model.standing(owner, blocks) {
        case .unknown:
            brokenPolicyAllowances.add(1, ordering: .relaxed)
            return "tenant\(tenant ?? -1)'s policy document is broken"
        case .unmanaged:
            guard tenant != nil, isolated != false else { return nil }
            withdrawnLeaks.add(1, ordering: .relaxed)
            return "tenant\(tenant ?? -1)'s document was deleted; the data was created under it"
                + (isolated == nil ? " (or its isolation is unknown to the model)" : "")
        case .managed:
            return nil
        }
    }

    /// The result of `body` as a `Result`.
    func attempt(_ body: () throws -> Data?) -> Result<Data?, any Error> {
        do { return .success(try body()) } catch { return .failure(error) }
    }

    /// Counts a file of an account that must be encrypted found with `plaintext` on disk.
    func checkAtRest(_ path: String, owner: Identity?, plaintext: Data, api: IsolationStress.API) {
        guard model.mustEncrypt(owner, blocks.snapshot([])), let bytes = FileManager.default.contents(atPath: path), bytes.range(of: plaintext) != nil else { return }
        plaintextAtRest.add(1, ordering: .relaxed)
        tally(api, nil, violation: "\(api.rawValue): \(show(owner))'s file is in the clear on disk")
    }

    /// After a call that the model refused: a changed file counts as a modification of another's data.
    func checkUnchanged(_ path: String, before: Data?, _ api: IsolationStress.API, _ what: String) {
        guard FileManager.default.contents(atPath: path) != before else { return }
        foreignModifications.add(1, ordering: .relaxed)
        tally(api, nil, violation: "\(what) was refused but changed \(path)")
    }

    /// A file's bytes and recorded owner, to compare before and after a call.
    struct Snapshot: Equatable {
        let bytes: Data?
        let owner: Identity?
    }

    func snapshot(_ path: String) -> Snapshot {
        // No owner readable is part of what is compared: it must be the same before and after.
        Snapshot(bytes: FileManager.default.contents(atPath: path), owner: try? files.protectionInfo(atPath: path)?.owner)
    }

    /// After a call that an injected fault interrupted (113): the file and its owner must be as they were.
    func checkIntact(_ path: String, before: Snapshot, _ api: IsolationStress.API, _ what: String) {
        let after = snapshot(path)
        guard after != before else { return }
        lostData.add(1, ordering: .relaxed)
        tally(api, nil, violation: "\(what) was interrupted (113) but changed the file: \(before.bytes?.count ?? -1) bytes owned by "
            + "\(show(before.owner)) before, \(after.bytes?.count ?? -1) owned by \(show(after.owner)) after")
    }

    enum Tally { case allowed, refused, undecided, interrupted }

    func tally(_ api: IsolationStress.API, _ outcome: Tally?, violation: String?) {
        rows.withLock { rows in
            var row = rows[api] ?? IsolationStress.Row(api: api)
            switch outcome {
            case .allowed: row.attempts += 1; row.allowed += 1
            case .refused: row.attempts += 1; row.refused += 1
            case .undecided: row.attempts += 1; row.undecided += 1
            case .interrupted: row.attempts += 1; row.interrupted += 1
            case nil: break
            }
            if violation != nil { row.violations += 1 }
            rows[api] = row
        }
        if let violation {
            let kind = Self.kind(of: violation)
            violations.withLock { state in
                state.count += 1
                if state.first.count < 20 { state.first.append(violation) }
                state.kinds[kind, default: (0, violation)].count += 1
            }
        }
    }

    func report(seconds: Double) -> IsolationStress.Report {
        let rows = rows.withLock { rows in IsolationStress.API.allCases.map { rows[$0] ?? IsolationStress.Row(api: $0) } }
        let (count, first, kinds) = violations.withLock { ($0.count, $0.first, $0.kinds) }
        return IsolationStress.Report(
            rows: rows, violations: first,
            violationKinds: kinds.sorted { ($1.value.count, $0.key) < ($0.value.count, $1.key) }.map { ($0.key, $0.value.count, $0.value.example) },
            violationCount: count, leakedBytes: leaked.load(ordering: .relaxed),
            foreignModifications: foreignModifications.load(ordering: .relaxed), plaintextAtRest: plaintextAtRest.load(ordering: .relaxed),
            blockChanges: blocks.changes, lostData: lostData.load(ordering: .relaxed), withdrawnLeaks: withdrawnLeaks.load(ordering: .relaxed),
            destroyedKeyPlaintext: destroyedKeyPlaintext.load(ordering: .relaxed),
            unreportedLeftovers: unreportedLeftovers.load(ordering: .relaxed),
            brokenPolicyAllowances: brokenPolicyAllowances.load(ordering: .relaxed), policyChanges: policyChanges.load(ordering: .relaxed),
            wipes: wipes.load(ordering: .relaxed), cancellations: cancellations.load(ordering: .relaxed),
            operations: operations.load(ordering: .relaxed), seconds: seconds)
    }

    func show(_ identity: Identity?) -> String {
        identity.map { $0.isUnmanaged ? "\"\"" : $0.name } ?? "no identity"
    }

    // MARK: Picking

    func anyone(_ random: inout SplitMix64) -> Identity? {
        let index = Int.random(in: 0..<(accounts.count + outsiders.count + strangers.count), using: &random)
        if index < accounts.count { return accounts[index] }
        if index < accounts.count + outsiders.count { return outsiders[index - accounts.count] }
        return strangers[index - accounts.count - outsiders.count]
    }

    func pick(_ random: inout SplitMix64, _ kinds: Set<Item.Kind>) -> Item? {
        items.withLock { items in
            let matching = items.filter { kinds.contains($0.kind) }
            return matching.isEmpty ? nil : matching[Int.random(in: 0..<matching.count, using: &random)]
        }
    }

    /// An item of one of `kinds` whose owner matches `owner`, or `nil` when there is none.
    func pick(_ random: inout SplitMix64, _ kinds: Set<Item.Kind>, ownedBy owner: (Identity?) -> Bool) -> Item? {
        // The list first, then each item's lock: never an item's lock inside the list's (add() nests them the
        // other way round).
        let matching = items.withLock { $0 }.filter { kinds.contains($0.kind) && owner($0.state.withLock { $0.owner }) }
        return matching.isEmpty ? nil : matching[Int.random(in: 0..<matching.count, using: &random)]
    }

    /// Adds `item`; the oldest of 512 leaves the model, and its file the root at the next step (a wipe walks
    /// what remains; the caller may hold the evicted item's lock).
    func add(_ item: Item) {
        let evicted = items.withLock { items -> Item? in
            items.append(item)
            return items.count > 512 ? items.removeFirst() : nil
        }
        guard let evicted, !evicted.path.isEmpty else { return }
        evictions.withLock { $0.append(evicted) }
    }

    /// Removes the files of evicted items; called holding no item's lock.
    func removeEvicted() {
        for evicted in evictions.withLock({ list in defer { list = [] }; return list }) {
            evicted.state.withLock { state in
                state.retired = true
                // Already gone (a wipe): nothing to remove.
                try? FileManager.default.removeItem(atPath: evicted.path)
            }
        }
    }

    func fresh(_ name: String) -> String {
        "\(root)/\(name)-\(counter.add(1, ordering: .relaxed).newValue)"
    }

    func secret(_ what: String, _ random: inout SplitMix64) -> Data {
        Data("SECRET \(what) \(counter.add(1, ordering: .relaxed).newValue) \(random.next())".utf8)
    }
}
