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
    }

    let kind: Kind
    let path: String
    let state: LockedValue<State>

    init(kind: Kind, plaintext: Data, path: String, owner: Identity?, envelope: Data) {
        self.kind = kind
        self.path = path
        state = LockedValue(State(owner: owner, envelope: envelope, plaintext: plaintext))
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

    func isManaged(_ identity: Identity) -> Bool { base.isManaged(identity) }
    func isFileEncryptionRequired(for identity: Identity) -> Bool { base.isFileEncryptionRequired(for: identity) }
    func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? {
        switch (fault, access) {
        case (.noModifyCheck, .modify), (.noReadCheck, .read), (.noTransferCheck, .transfer): return nil
        default: return base.refusal(of: access, to: owner)
        }
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
}

final class World: Sendable {
    let options: IsolationStress.Options
    let directory: String
    let root: String
    let accounts: [Identity]
    let outsiders: [Identity?]
    let model: AccessModel
    let manager: PolicyManager
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
    let queue = IdentityDispatchQueue(label: "isolation.read", attributes: .concurrent)
    let items = LockedValue<[Item]>([])
    let handles = LockedValue<[HeldHandle]>([])
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
        blockable = Array(accounts.prefix(8)) + ["guest0@personal.example"]
        var tenants: [TenantID: Policy] = [:]
        var levels: [Int: DataTransferLevel] = [:]
        for tenant in 0..<options.tenants {
            levels[tenant] = Self.levels[tenant % Self.levels.count]
            tenants[TenantID("tenant\(tenant).example")] = Policy(
                identity: nil, allowedSaveLocations: [.localDrive], isFileEncryptionRequired: tenant.isMultiple(of: 2),
                dataTransfer: Self.levels[tenant % Self.levels.count])
        }
        model = AccessModel(
            tenants: Dictionary(uniqueKeysWithValues: accounts.enumerated().map { ($1, $0 % options.tenants) }),
            levels: levels, encryptingTenants: Set((0..<options.tenants).filter { $0.isMultiple(of: 2) }))
        var settings = RuntimeSettings()
        settings.dataIsolation = options.dataIsolation
        manager = PolicyManager(settings: settings, policySource: StaticPolicySource(tenants: tenants))
        for account in accounts { manager.registerAccount(account) }
        let keys = try FileKeyStore(atPath: directory + "/keys")
        let policy: any ManagedIdentityPolicy = options.fault == .none ? manager : FaultyPolicy(base: manager, fault: options.fault)
        data = DataProtectionManager(keyStore: keys, policy: policy)
        files = try FileProtectionManager(roots: [root], keyStore: keys, policy: policy, stateDirectory: directory + "/state")
        let unloaded = PolicyManager(settings: settings, policySource: NeverLoadedSource())
        unloadedData = DataProtectionManager(keyStore: keys, policy: unloaded)
        unloadedFiles = try FileProtectionManager(roots: [root], keyStore: keys, policy: unloaded, stateDirectory: directory + "/unloaded-state")
        let probe = root + "/owner-probe"
        let (files, unloadedFiles, account) = (files, unloadedFiles, accounts[1])
        try IdentityContext.withThreadIdentity(account) { try files.writeFile(atPath: probe, contents: Data("probe".utf8)) }
        unloadedSeesOwners = (try? unloadedFiles.protectionInfo(atPath: probe)?.owner) == account
        try? FileManager.default.removeItem(atPath: probe)
    }

    func tearDown() {
        for handle in handles.withLock({ $0 }) { try? handle.file.close() }
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Judging

    /// Judges the outcome `result` of one call of `api` against the model's `refusals` (empty: allowed),
    /// unless a block of an account in `blocks` changed while it ran. Plaintext `secret` found in what an
    /// allowed-against-the-rules call returned counts as leaked.
    func judge(
        _ api: IsolationStress.API, _ what: String, refusals: Set<Int>, blocks: BlockBoard.Snapshot?, secret: Data? = nil,
        _ result: Result<Data?, any Error>
    ) -> Outcome {
        if let blocks, !self.blocks.isUnchanged(since: blocks) {
            tally(api, .undecided, violation: nil)
            return .undecided
        }
        let expected = refusals.isEmpty ? "the matrix allows it" : "the matrix gives \(refusals.sorted())"
        switch result {
        case let .success(bytes):
            guard refusals.isEmpty else {
                if let bytes, let secret, bytes.range(of: secret) != nil { leaked.add(secret.count, ordering: .relaxed) }
                tally(api, .allowed, violation: "\(what) was allowed; \(expected)")
                return .violated
            }
            tally(api, .allowed, violation: nil)
            return .allowed(bytes)
        case let .failure(error as ProtectionError) where [108, 109, 115].contains(error.code):
            let violation = refusals.contains(error.code) ? nil : "\(what) was refused with \(error.code); \(expected)"
            tally(api, .refused, violation: violation)
            return violation == nil ? .refused : .violated
        case let .failure(error):
            tally(api, .refused, violation: "\(what) failed: \(error)")
            return .violated
        }
    }

    /// The result of `body` as a `Result`.
    func attempt(_ body: () throws -> Data?) -> Result<Data?, any Error> {
        do { return .success(try body()) } catch { return .failure(error) }
    }

    /// Counts a file of an account that must be encrypted found with `plaintext` on disk.
    func checkAtRest(_ path: String, owner: Identity?, plaintext: Data, api: IsolationStress.API) {
        guard model.mustEncrypt(owner), let bytes = FileManager.default.contents(atPath: path), bytes.range(of: plaintext) != nil else { return }
        plaintextAtRest.add(1, ordering: .relaxed)
        tally(api, nil, violation: "\(api.rawValue): \(show(owner))'s file is in the clear on disk")
    }

    /// After a call that the model refused: a changed file counts as a modification of another's data.
    func checkUnchanged(_ path: String, before: Data?, _ api: IsolationStress.API, _ what: String) {
        guard FileManager.default.contents(atPath: path) != before else { return }
        foreignModifications.add(1, ordering: .relaxed)
        tally(api, nil, violation: "\(what) was refused but changed \(path)")
    }

    enum Tally { case allowed, refused, undecided }

    func tally(_ api: IsolationStress.API, _ outcome: Tally?, violation: String?) {
        rows.withLock { rows in
            var row = rows[api] ?? IsolationStress.Row(api: api)
            switch outcome {
            case .allowed: row.attempts += 1; row.allowed += 1
            case .refused: row.attempts += 1; row.refused += 1
            case .undecided: row.attempts += 1; row.undecided += 1
            case nil: break
            }
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
            blockChanges: blocks.changes, operations: operations.load(ordering: .relaxed), seconds: seconds)
    }

    func show(_ identity: Identity?) -> String {
        identity.map { $0.isUnmanaged ? "\"\"" : $0.name } ?? "no identity"
    }

    // MARK: Picking

    func anyone(_ random: inout SplitMix64) -> Identity? {
        let index = Int.random(in: 0..<(accounts.count + outsiders.count), using: &random)
        return index < accounts.count ? accounts[index] : outsiders[index - accounts.count]
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

    func add(_ item: Item) {
        items.withLock { items in
            if items.count >= 512 { items.removeFirst() }
            items.append(item)
        }
    }

    func fresh(_ name: String) -> String {
        "\(root)/\(name)-\(counter.add(1, ordering: .relaxed).newValue)"
    }

    func secret(_ what: String, _ random: inout SplitMix64) -> Data {
        Data("SECRET \(what) \(counter.add(1, ordering: .relaxed).newValue) \(random.next())".utf8)
    }
}
