// MultiTenantService: one service process working for many accounts of several organizations at once.
//
//     swift run MultiTenantService                   # 28 requests over 7 accounts (every account, every target)
//     swift run MultiTenantService --requests 200
//
// 1. Setup. Two organizations publish policies, read by a DirectoryPolicySource: contoso.com (save to OneDrive,
//    SharePoint or the local drive; files encrypted at rest) and fabrikam.com (OneDrive or SharePoint only;
//    files in the clear). Five managed accounts: alice, bob and dave of contoso, carol and erin of fabrikam.
//    dave is clocked out by the service (BlockAccountReason.clockedOut); erin's own document says
//    "accountBlocked": true. frank@outlook.com (no policy) and the guest "" are not managed. An AdmissionCheck
//    checks that a managed account's sign-in token is fresh.
// 2. Requests for all seven accounts, handled concurrently. Each handler enters through
//    PolicyManager.withAdmittedIdentity: dave and erin are refused there with an AdmissionError (the handler
//    never runs); the others run under their account through legacy code (a GCD queue, an OperationQueue, a
//    Task) that writes a note, every hop recording the effective file identity it sees. Then the account's
//    policy decides whether a "Save as…" copy may go where it asks.
// 3. Across accounts and tenants: which transfers the policies allow; alice's forecast read by a colleague
//    (allowed), by carol of fabrikam, an unmanaged account, the guest and code with no identity (each refused
//    with ProtectionError 108, no plaintext); carol's clear-text file refused to alice all the same; dave's
//    notes refused while he is blocked (109); a handover file re-owned from alice to bob with
//    protect(atPath:owner:), after the same handover to carol was refused.
// 4. Files at rest: owner, encryption and raw bytes of every file, each read back under its owner.
// 5. The wipe of the tenant contoso.com while five admitted uploads (four of contoso, one of fabrikam; raw
//    threads that carry the identity in an IdentitySnapshot) keep writing: afterwards no file of contoso
//    remains, the contoso uploads are refused, fabrikam's upload carries on, every other file is
//    byte-identical, and contoso's keys are gone (a copy outside the roots no longer decrypts).
// 6. A summary: one row per request (admission, identity at every hop, the note's encryption, the save-to
//    decision and the copy's encryption), one row per account. Every expectation is checked: any failure is
//    printed and the exit status is 1.
// Everything happens in a temporary directory that is removed at the end. The requests and the results are the
// same on every run; only the order in which concurrent requests finish (and print) varies.
import Foundation
import IdentityPolicy
import IdentityProtection
import IdentityRuntime

// MARK: - Organizations, accounts and requests

/// An organization with a policy document, and what this program expects that policy to answer.
struct Organization: Sendable {
    let tenant: TenantID
    let encryptsFiles: Bool
    let saveFolders: Set<String>    // the save targets (by folder) its policy allows
}

enum Organizations {
    static let contoso = Organization(tenant: "contoso.com", encryptsFiles: true, saveFolders: ["onedrive", "local"])
    static let fabrikam = Organization(tenant: "fabrikam.com", encryptsFiles: false, saveFolders: ["onedrive"])
}

/// The policy documents, as administrators would publish them (format: Sources/IdentityPolicy/IdentityPolicy.docc/AccountsAndPolicies.md).
let policyDocuments = [
    "contoso.json": """
        {
          "formatVersion": 1,
          "tenant": "contoso.com",
          "saveToLocations": ["oneDriveForBusiness", "sharePoint", "localDrive"],
          "saveToUnknownLocationAllowed": false,
          "fileEncryptionRequired": true,
          "dataTransfer": "sameTenant"
        }
        """,
    "fabrikam.json": """
        {
          "formatVersion": 1,
          "tenant": "fabrikam.com",
          "saveToLocations": ["oneDriveForBusiness", "sharePoint"],
          "fileEncryptionRequired": false,
          "dataTransfer": "sameTenant"
        }
        """,
    // erin's own document wins over her tenant's; it blocks her (BlockAccountReason.blockedByPolicy, 100).
    "erin.json": """
        {
          "formatVersion": 1,
          "account": "erin@fabrikam.com",
          "saveToLocations": ["oneDriveForBusiness", "sharePoint"],
          "fileEncryptionRequired": false,
          "accountBlocked": true
        }
        """,
]

struct Account: Sendable {
    let identity: Identity
    let label: String                       // for file names and tables
    let organization: Organization?         // nil: not managed (no policy for it)
    let blocked: BlockAccountReason?        // what this program expects; the runtime decides it
    var isManaged: Bool { organization != nil }
    var encryptsFiles: Bool { organization?.encryptsFiles ?? false }

    init(_ identity: Identity, _ label: String, _ organization: Organization?, blocked: BlockAccountReason? = nil) {
        (self.identity, self.label, self.organization, self.blocked) = (identity, label, organization, blocked)
    }
}

enum Accounts {
    static let alice = Account("alice@contoso.com", "alice", Organizations.contoso)
    static let bob = Account("bob@contoso.com", "bob", Organizations.contoso)
    static let dave = Account("dave@contoso.com", "dave", Organizations.contoso, blocked: .clockedOut)
    static let carol = Account("carol@fabrikam.com", "carol", Organizations.fabrikam)
    static let erin = Account("erin@fabrikam.com", "erin", Organizations.fabrikam, blocked: .blockedByPolicy)
    static let frank = Account("frank@outlook.com", "frank", nil)     // a personal account: no policy
    static let guest = Account(.unmanaged, "guest", nil)              // "": explicitly no user
    static let all = [alice, bob, dave, carol, erin, frank, guest]
    static let managed = all.filter(\.isManaged)
}

/// A "Save as…" destination, classified the way the policy sees it.
struct SaveTarget: Sendable {
    let name: String
    let location: SaveLocation
    let folder: String
    let account: Identity?          // who is signed in at the destination (account-bound locations)

    static func rotation(for owner: Identity) -> [SaveTarget] {
        [
            SaveTarget(name: "OneDrive, own", location: .oneDriveForBusiness, folder: "onedrive", account: owner),
            SaveTarget(name: "Dropbox, personal", location: .dropbox, folder: "dropbox",
                       account: "personal@outlook.com"),
            SaveTarget(name: "local drive", location: .localDrive, folder: "local", account: nil),
            SaveTarget(name: "unknown location", location: .other, folder: "unknown", account: nil),
        ]
    }

    /// What `account`'s policy must answer: its organization's list; accounts without a policy are unrestricted.
    func isAllowed(for account: Account) -> Bool {
        account.organization.map { $0.saveFolders.contains(folder) } ?? true
    }
}

struct Request: Sendable {
    let number: Int
    let account: Account
    let saveTo: SaveTarget
    var id: String { number < 10 ? "0\(number)" : "\(number)" }

    /// Request `number` of a deterministic stream: accounts take turns, each cycling through the save targets.
    init(_ number: Int) {
        let accounts = Accounts.all
        let account = accounts[(number - 1) % accounts.count]
        let targets = SaveTarget.rotation(for: account.identity)
        self.number = number
        self.account = account
        self.saveTo = targets[((number - 1) / accounts.count) % targets.count]
    }
}

func show(_ identity: Identity?) -> String {
    identity.map { $0.isUnmanaged ? "\"\"" : $0.name } ?? "no identity"
}

func show(_ error: AdmissionError) -> String {
    switch error.cause {
    case let .blocked(reason): "REFUSED \(error.code): blocked, \(reason)"
    case .notInAllowedAccounts: "REFUSED \(error.code): not allowed"
    case .claimed: "REFUSED \(error.code): claimed"
    case let .denied(message): "REFUSED \(error.code): \(message)"
    case let .unavailable(message): "REFUSED \(error.code): \(message)"
    }
}

// MARK: - What the service records

/// A file the service wrote, whose owner must be `account`, and the plaintext it must hold.
struct WrittenFile: Sendable {
    let path: String
    let account: Account
    let plaintext: Data
}

/// What happened to one request, for the summary table.
struct RequestRecord: Sendable {
    let request: Request
    var admission = ""
    var hops = "—"
    var note = "—"
    var saveTo = "—"
    var saveBlocked = false
    var copy = "—"
}

/// A value behind a lock. NSLock rather than Synchronization.Mutex: on Linux, Mutex parks threads with futex
/// calls that ThreadSanitizer does not see, so `--sanitize=thread` would report false races.
final class Locked<Value: Sendable>: @unchecked Sendable {   // safe: `value` is only reached under `lock`
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Handlers record here from many threads at once.
final class Ledger: Sendable {
    struct State {
        var files: [WrittenFile] = []
        var requests: [Int: RequestRecord] = [:]
        var auditLines: [String] = []
        var problems: [String] = []
    }

    private let state = Locked(State())

    var snapshot: State { state.withLock { $0 } }
    func update(_ body: (inout State) -> Void) { state.withLock(body) }

    /// An expectation that did not hold: printed now, and the run fails at the end.
    func problem(_ message: String) {
        print("  PROBLEM: \(message)")
        state.withLock { $0.problems.append(message) }
    }

    func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { problem(message()) }
    }

    /// One problem for all of `offenders` (there should be none), naming the first few.
    func expectNone(_ offenders: [String], _ what: String) {
        guard !offenders.isEmpty else { return }
        let named = offenders.prefix(3).joined(separator: ", ") + (offenders.count > 3 ? ", …" : "")
        problem("\(offenders.count) \(what): \(named)")
    }
}

/// The effective file identity seen at each hop of one request.
final class Hops: Sendable {
    let account: Identity
    private let seen = Locked<[(hop: String, expected: Identity?, observed: Identity?)]>([])

    init(account: Identity) { self.account = account }

    /// Records what this hop sees. It should see the request's account, or nothing when `suppressed`.
    func record(_ hop: String, suppressed: Bool = false) {
        let observed = IdentityContext.effectiveFileIdentity
        seen.withLock { $0.append((hop, suppressed ? nil : account, observed)) }
    }

    /// "handler → GCD → …: alice@contoso.com; audit: no identity" and the short form for the table, plus
    /// every hop that saw something else.
    func summary(ledger: Ledger, request: String) -> (line: String, cell: String) {
        let seen = seen.withLock { $0 }
        let asAccount = seen.filter { $0.expected != nil }.map(\.hop)
        let suppressed = seen.filter { $0.expected == nil }.map(\.hop)
        var parts = [asAccount.joined(separator: " → ") + ": " + show(account),
                     suppressed.joined(separator: ", ") + ": " + show(nil)]
        var wrong: [String] = []
        for hop in seen where hop.observed != hop.expected {
            ledger.problem("request #\(request), \(hop.hop): expected \(show(hop.expected)), saw \(show(hop.observed))")
            parts.append("✗ \(hop.hop) saw \(show(hop.observed))")
            wrong.append("✗ \(hop.hop): \(show(hop.observed))")
        }
        let cell = wrong.isEmpty ? "✓ account ×\(asAccount.count), audit: none" : wrong.joined(separator: ", ")
        return (parts.joined(separator: "; "), cell)
    }
}

/// The admission check: is the account's sign-in token fresh? A real service asks its token service; this one
/// knows how old each account's token is. Unmanaged accounts are never asked about (the runtime runs checks
/// for managed accounts only), nor are blocked ones (refused before any check).
final class TokenFreshnessCheck: AdmissionCheck {
    static let maximumAge: TimeInterval = 3_600
    let tokenAge: [Identity: TimeInterval] = [
        Accounts.alice.identity: 300, Accounts.bob.identity: 720, Accounts.carol.identity: 120,
        Accounts.dave.identity: 30_000, Accounts.erin.identity: 60,
    ]
    /// Every run: the account asked about and the thread identity the check ran under.
    let runs = Locked<[(account: Identity, runningAs: Identity?)]>([])

    func evaluate(account: Identity, reason: AdmissionReason) async -> AdmissionOutcome {
        runs.withLock { $0.append((account, IdentityContext.currentThreadIdentity)) }
        guard let age = tokenAge[account] else { return .unavailable("no token for \(account.name)") }
        return age <= Self.maximumAge ? .admit : .deny("token \(Int(age)) s old")
    }
}

// MARK: - The service

final class Service: Sendable {
    static let maxInFlight = 8

    let root: String
    let documents: String     // protected root: each account's documents
    let exports: String       // protected root: where "Save as…" copies land
    let keysDirectory: String
    let policies: PolicyManager
    let files: FileProtectionManager
    let tokenCheck = TokenFreshnessCheck()
    let ledger = Ledger()

    // The legacy infrastructure handlers go through. Identity-aware drop-in replacements of DispatchQueue and
    // OperationQueue: whatever is submitted runs under the submitter's thread identity.
    let render = IdentityDispatchQueue(label: "render", attributes: .concurrent)
    let storage = IdentityOperationQueue()
    let audit = IdentityDispatchQueue(label: "audit")

    init(root: String) throws {
        self.root = root
        let documents = root + "/documents", exports = root + "/exports", policyDirectory = root + "/policies"
        (self.documents, self.exports, keysDirectory) = (documents, exports, root + "/keys")
        let folders = Accounts.all.map { "\(documents)/\($0.label)" }
            + SaveTarget.rotation(for: .unmanaged).map { "\(exports)/\($0.folder)" } + [policyDirectory]
        for folder in folders {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        for (name, text) in policyDocuments {
            try Data(text.utf8).write(to: URL(fileURLWithPath: "\(policyDirectory)/\(name)"))
        }

        // Policies come from JSON documents in a directory. An isolated PolicyManager keeps its identities to
        // itself (PolicyManager.shared would also set IdentityContext.processIdentity). The settings spelled
        // out are the defaults: isolation of each account's data, and a passed admission trusted for 60 s.
        let source = try DirectoryPolicySource(directory: policyDirectory)
        source.reload()
        var settings = RuntimeSettings()
        settings.dataIsolation = true
        settings.admissionCacheDuration = 60
        policies = PolicyManager(settings: settings, policySource: source)
        // An account of a tenant with a document is managed from its first request; registered, the manager
        // also lists it (managedAccounts, blockedAccounts) and announces changes to it.
        for account in Accounts.managed { policies.registerAccount(account.identity) }
        policies.registerAdmissionCheck(tokenCheck)

        // The file manager asks the PolicyManager who is managed, whether their files must be encrypted and
        // who may read them; the PolicyManager's wipes delete files through it (it holds this file manager
        // weakly, since the file manager holds it: no reference cycle).
        files = try FileProtectionManager(
            roots: [documents, exports], keyStore: FileKeyStore(atPath: keysDirectory), policy: policies,
            stateDirectory: root + "/state")
        policies.fileProtection = files
        storage.name = "storage"
        storage.maxConcurrentOperationCount = 2

        print("Working in a temporary directory, removed at the end")
        for (name, text) in policyDocuments.sorted(by: { $0.key < $1.key }) {
            let document = try PolicyDocument(json: Data(text.utf8), path: name)
            print("  policies/\(pad(name, 14)) \(document.subject)")
        }
        print("  policy errors: \(source.errors.isEmpty ? "none" : "\(source.errors)")")
        ledger.expect(source.errors.isEmpty, "policy errors: \(source.errors)")
    }

    /// dave wrote shift notes earlier (under his own identity), then clocked out: the service blocks him.
    func clockOutDave() {
        let dave = Accounts.dave, path = "\(documents)/dave/shift-notes.txt"
        let text = Data("Shift notes of dave@contoso.com: line 3 needs a new belt.\n".utf8)
        IdentityContext.withThreadIdentity(dave.identity) { _ = write(text, to: path, account: dave) }
        policies.blockAccount(dave.identity, reason: .clockedOut)
    }

    /// The service loop: requests arrive on a stream and up to `maxInFlight` are handled at once. The receiving
    /// code has no identity; each request says which account it is for.
    func serve(_ incoming: AsyncStream<Request>) async {
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for await request in incoming {
                if inFlight == Self.maxInFlight {
                    await group.next()
                    inFlight -= 1
                }
                group.addTask { await self.handle(request) }
                inFlight += 1
            }
        }
    }

    /// One request, start to finish: admitted first, then everything runs as the request's account.
    func handle(_ request: Request) async {
        let account = request.account, me = account.identity
        let ran = Locked(false)
        var record = RequestRecord(request: request)
        do {
            let reason = AdmissionReason("POST /notes #\(request.id)")
            record = try await policies.withAdmittedIdentity(me, reason: reason) {
                ran.withLock { $0 = true }
                return await serveAdmitted(request)
            }
            ledger.expect(account.blocked == nil, "request #\(request.id): blocked \(show(me)) was admitted")
        } catch let error as AdmissionError {
            // Refused at the door: the handler never ran, nothing was written for the account.
            record.admission = show(error)
            let expected = account.blocked.map {
                AdmissionError(account: me, result: .notAllowed, cause: .blocked($0))
            }
            ledger.expect(error == expected, "request #\(request.id): \(error), expected "
                + (expected.map { "\($0)" } ?? "admission"))
            ledger.expect(!ran.withLock { $0 }, "request #\(request.id): the handler ran although it was refused")
            print("  #\(request.id) \(show(me))  refused at admission: \(error)")
        } catch {
            ledger.problem("request #\(request.id): unexpected \(error)")
        }
        let finished = record
        ledger.update { $0.requests[request.number] = finished }
    }

    /// The handler of an admitted request, running under its account.
    private func serveAdmitted(_ request: Request) async -> RequestRecord {
        let account = request.account, me = account.identity
        var record = RequestRecord(request: request, admission: "admitted")
        let hops = Hops(account: me)
        hops.record("handler")        // async code in a task-group child, inside the admission scope
        let path = "\(documents)/\(account.label)/note-\(request.id).txt"
        let text = Data("Note #\(request.number) of \(show(me)): Q3 forecast 4.2M, internal only.\n".utf8)

        // Legacy code: render on a GCD queue, store through an OperationQueue, report back from a Task.
        // Nothing passes the identity along by hand; each hop inherits it from the one that submitted it.
        let writeError: ProtectionError? = await withCheckedContinuation { done in
            self.render.async {
                hops.record("GCD")
                self.storage.addOperation {
                    hops.record("Operation")
                    // The owner is the effective file identity of this thread: the request's account.
                    let error = self.write(text, to: path, account: account)
                    Task {
                        hops.record("Task")
                        done.resume(returning: error)
                    }
                }
            }
        }
        hops.record("after await")     // the scope holds across suspension points

        // The service's own bookkeeping belongs to no account: `flow: .suppress` runs it with no identity.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            self.audit.async(flow: .suppress) {
                hops.record("audit", suppressed: true)
                self.ledger.update { $0.auditLines.append("request #\(request.id): note stored, owner recorded") }
                done.resume()
            }
        }
        if writeError == nil { record.note = encryption(of: path) }

        // "Save as…": `policies.policy` is the policy of the calling task's effective identity, here the
        // request's account: its organization's document, or the unrestricted policy without one.
        let target = request.saveTo
        let allowed = policies.policy.isSaveToAllowed(for: target.location, account: target.account)
        let expected = target.isAllowed(for: account)
        ledger.expect(allowed == expected, "request #\(request.id): saving \(show(me))'s note to \(target.name) "
            + "was \(allowed ? "allowed" : "blocked"), expected \(expected ? "allowed" : "blocked")")
        record.saveTo = "\(target.name): \(allowed ? "allowed" : "BLOCKED")"
        record.saveBlocked = !allowed
        let copy = "\(exports)/\(target.folder)/\(account.label)-\(request.id).txt"
        if allowed, writeError == nil {
            do {
                // Its own note: readable by its owner. The copy is written as `me` too.
                if write(try files.readFile(atPath: path), to: copy, account: account) == nil {
                    record.copy = encryption(of: copy)
                }
            } catch {
                ledger.problem("request #\(request.id): reading \(relative(path)): \(error)")
            }
        } else if !allowed {
            ledger.expect(!FileManager.default.fileExists(atPath: copy), "blocked copy exists: \(relative(copy))")
        }

        let (line, cell) = hops.summary(ledger: ledger, request: request.id)
        record.hops = cell
        print("  #\(request.id) \(show(me))  \(line)\n"
            + "      wrote \(relative(path))\(writeError.map { " FAILED: \($0)" } ?? ""); save to \(target.name): "
            + (allowed ? "allowed" : "BLOCKED by policy"))
        return record
    }

    /// Writes through the FileProtectionManager, which records the owner (the caller's effective file identity)
    /// and encrypts when the owner's policy requires it. `account` is only what the checks later expect.
    @discardableResult
    func write(_ contents: Data, to path: String, account: Account) -> ProtectionError? {
        do {
            try files.writeFile(atPath: path, contents: contents)
            ledger.update { $0.files.append(WrittenFile(path: path, account: account, plaintext: contents)) }
            return nil
        } catch {
            ledger.problem("writing \(relative(path)) as \(show(IdentityContext.effectiveFileIdentity)): \(error)")
            return error
        }
    }

    /// "encrypted" or "clear" (file metadata: no access check).
    func encryption(of path: String) -> String {
        do {
            return try files.isFileEncrypted(atPath: path) ? "encrypted" : "clear"
        } catch {
            ledger.problem("\(relative(path)): \(error)")
            return "?"
        }
    }

    func relative(_ path: String) -> String {
        path.hasPrefix(root + "/") ? String(path.dropFirst(root.count + 1)) : path
    }

    /// FileKeyStore keeps one `<hash>.key` file per identity that has keys (Sources/IdentityProtection/IdentityProtection.docc/DataAndFileProtection.md).
    func keyFileCount() -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: keysDirectory)) ?? []
        return names.filter { $0.hasSuffix(".key") }.count
    }

    /// Every regular file under the protected roots, sorted.
    func filesUnderRoots() -> [String] {
        var found: [String] = []
        for root in [documents, exports] {
            for sub in (try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? [] {
                let path = root + "/" + sub
                let type = (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType
                if type == .typeRegular { found.append(path) }
            }
        }
        return found.sorted()
    }

    /// Runs `body` admitted as `account` (or with no identity when `nil`).
    func acting<R>(as account: Identity?, _ reason: AdmissionReason, _ body: () throws -> R) async throws -> R {
        guard let account else { return try body() }
        return try await policies.withAdmittedIdentity(account, reason: reason) { try body() }
    }
}

func pad(_ text: String, _ width: Int) -> String {
    text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0)
}

/// Prints rows under a header, columns as wide as their widest cell; `right`: right-aligned columns.
func printTable(_ header: [String], _ rows: [[String]], right: Set<Int> = []) {
    let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
    for row in [header] + rows {
        let cells = row.enumerated().map { column, cell in
            right.contains(column) ? String(repeating: " ", count: widths[column] - cell.count) + cell
                : pad(cell, widths[column])
        }
        let line = "  " + cells.joined(separator: "  ")
        print(String(line.reversed().drop { $0 == " " }.reversed()))
    }
}

// MARK: - 3. Across accounts and tenants

/// What a read gave: the plaintext, or the protection error's code.
enum ReadOutcome: Equatable, CustomStringConvertible {
    case plaintext
    case refused(ProtectionError)

    var description: String {
        switch self {
        case .plaintext: "the plaintext"
        case let .refused(error): "refused: \(error)"
        }
    }
}

func acrossAccounts(_ service: Service) async {
    let ledger = service.ledger, files = service.files, policies = service.policies
    let (alice, bob, carol, dave) = (Accounts.alice, Accounts.bob, Accounts.carol, Accounts.dave)

    print("  Transfers the policies allow (isDataTransferAllowed(from:to:)):")
    let pairs: [(Account, Identity?, Bool, String)] = [
        (alice, bob.identity, true, "same tenant"),
        (alice, carol.identity, false, "other tenant"),
        (carol, alice.identity, false, "other tenant"),
        (alice, Accounts.frank.identity, false, "an unmanaged account"),
        (alice, .unmanaged, false, "the guest"),
        (alice, nil, false, "code with no identity"),
        (alice, dave.identity, false, "a blocked account"),
        (Accounts.frank, alice.identity, true, "unmanaged data goes anywhere"),
    ]
    for (source, target, expected, why) in pairs {
        let allowed = policies.isDataTransferAllowed(from: source.identity, to: target)
        print("    \(pad(show(source.identity), 18)) → \(pad(show(target), 18)) "
            + "\(allowed ? "allowed" : "refused") (\(why))")
        ledger.expect(allowed == expected, "isDataTransferAllowed(from: \(show(source.identity)), to: \(show(target))) "
            + "is \(allowed), expected \(expected)")
    }

    // Two documents to read across accounts, each written by its owner after admission.
    let forecast = "\(service.documents)/alice/forecast.txt", roadmap = "\(service.documents)/carol/roadmap.txt"
    let forecastText = Data("Contoso forecast: Q4 revenue 5.1M. Do not share outside contoso.com.\n".utf8)
    let roadmapText = Data("Fabrikam roadmap: launch in March. Do not share outside fabrikam.com.\n".utf8)
    do {
        _ = try await service.acting(as: alice.identity, "PUT /forecast") {
            service.write(forecastText, to: forecast, account: alice)
        }
        _ = try await service.acting(as: carol.identity, "PUT /roadmap") {
            service.write(roadmapText, to: roadmap, account: carol)
        }
    } catch {
        ledger.problem("writing the documents to share: \(error)")
        return
    }

    /// Reads `path` with readFile as `reader` (admitted first); refused reads also try decryptFile(toPath:),
    /// which must leave no copy.
    func read(_ path: String, as reader: Identity?, expecting plaintext: Data) async -> ReadOutcome? {
        let copy = service.root + "/refused-copy"
        do {
            let reason = AdmissionReason("GET \(service.relative(path))")
            return try await service.acting(as: reader, reason) { () throws -> ReadOutcome in
                do throws(ProtectionError) {
                    let bytes = try files.readFile(atPath: path)
                    ledger.expect(bytes == plaintext, "\(show(reader)) read other bytes of \(service.relative(path))")
                    return .plaintext
                } catch {
                    do throws(ProtectionError) {
                        try files.decryptFile(atPath: path, toPath: copy)
                        ledger.problem("\(show(reader)): decryptFile(toPath:) of \(service.relative(path)) worked")
                    } catch let copyError {
                        ledger.expect(copyError == error, "decryptFile(toPath:) as \(show(reader)): \(copyError)")
                    }
                    ledger.expect(!FileManager.default.fileExists(atPath: copy), "a refused copy exists")
                    return .refused(error)
                }
            }
        } catch {
            ledger.problem("reading \(service.relative(path)) as \(show(reader)): \(error)")
            return nil
        }
    }

    print("\n  alice's forecast (contoso.com: encrypted at rest), read with readFile as:")
    let readers: [(Identity?, Bool)] = [
        (alice.identity, true), (bob.identity, true), (carol.identity, false), (Accounts.frank.identity, false),
        (.unmanaged, false), (nil, false),
    ]
    for (reader, allowed) in readers {
        let outcome = await read(forecast, as: reader, expecting: forecastText)
        print("    \(pad(show(reader), 18)) \(outcome.map { "\($0)" } ?? "?")")
        let expected: ReadOutcome = allowed
            ? .plaintext : .refused(.accessDenied(identity: alice.identity, reader: reader))
        ledger.expect(outcome == expected, "alice's forecast read as \(show(reader)): "
            + "\(outcome.map { "\($0)" } ?? "?"), expected \(expected)")
        if case let .refused(error)? = outcome { ledger.expect(error.code == 108, "code \(error.code), expected 108") }
    }

    print("\n  carol's roadmap (fabrikam.com: clear at rest) read as alice@contoso.com:")
    let onDisk = FileManager.default.contents(atPath: roadmap) ?? Data()
    ledger.expect(onDisk.range(of: roadmapText) != nil, "carol's roadmap is not in the clear on disk")
    let crossTenant = await read(roadmap, as: alice.identity, expecting: roadmapText)
    print("    \(crossTenant.map { "\($0)" } ?? "?") (the bytes are in the clear on disk; the runtime hands out none)")
    ledger.expect(crossTenant == .refused(.accessDenied(identity: carol.identity, reader: alice.identity)),
                  "carol's roadmap read as alice: \(crossTenant.map { "\($0)" } ?? "?")")

    print("\n  dave's shift notes (dave is clocked out) read as alice@contoso.com, same tenant:")
    let notes = "\(service.documents)/dave/shift-notes.txt"
    let blocked = await read(notes, as: alice.identity, expecting: Data())
    print("    \(blocked.map { "\($0)" } ?? "?")")
    let reason = BlockAccountReason.clockedOut.rawValue
    ledger.expect(blocked == .refused(.accountBlocked(identity: dave.identity, reason: reason)),
                  "dave's notes read as alice: \(blocked.map { "\($0)" } ?? "?")")

    // A handover: alice gives a file of hers to a colleague. Re-owning is a transfer: the same rule decides.
    print("\n  alice hands handover.txt over with protect(atPath:owner:):")
    let handover = "\(service.documents)/alice/handover.txt"
    let handoverText = Data("Handover from alice: the Q4 deck is in the usual place.\n".utf8)
    do {
        _ = try await service.acting(as: alice.identity, "PUT /handover") {
            service.write(handoverText, to: handover, account: alice)
        }
        for recipient in [carol, bob] {
            let before = FileManager.default.contents(atPath: handover)
            var refusal: ProtectionError?
            do {
                try await service.acting(as: alice.identity, AdmissionReason("hand over to \(recipient.label)")) {
                    try files.protect(atPath: handover, owner: recipient.identity)
                }
            } catch let error as ProtectionError {
                refusal = error
            }
            let owner = try files.protectionInfo(atPath: handover)?.owner
            let unchanged = FileManager.default.contents(atPath: handover) == before
            print("    to \(pad(show(recipient.identity), 18)) "
                + (refusal.map { "refused: \($0); still alice's, unchanged: \(unchanged)" }
                    ?? "now owned by \(show(owner)), \(service.encryption(of: handover)) for its new owner"))
            if recipient.organization?.tenant == alice.organization?.tenant {
                ledger.expect(refusal == nil && owner == recipient.identity && !unchanged, "handing over to "
                    + "\(show(recipient.identity)): \(refusal.map { "\($0)" } ?? "owner \(show(owner))")")
            } else {
                ledger.expect(refusal == .accessDenied(identity: alice.identity, reader: recipient.identity),
                              "handing over to \(show(recipient.identity)): \(refusal.map { "\($0)" } ?? "done")")
                ledger.expect(owner == alice.identity && unchanged, "a refused handover changed the file")
            }
        }
        let bobReads = try await service.acting(as: bob.identity, "GET /handover") {
            try files.readFile(atPath: handover)
        }
        ledger.expect(bobReads == handoverText, "bob read other bytes of handover.txt")
        print("    bob reads it: \(bobReads == handoverText ? "the plaintext" : "other bytes")")
        ledger.update { state in
            state.files.removeAll { $0.path == handover }
            state.files.append(WrittenFile(path: handover, account: bob, plaintext: handoverText))
        }
    } catch {
        ledger.problem("handover: \(error)")
    }
}

// MARK: - 5. The tenant wipe, with uploads still writing

/// A long upload that keeps writing files for its account until told to stop: admitted before the wipe, it is
/// still writing when the wipe starts and after it ends.
final class Upload: Sendable {
    struct Progress {
        var written: [String] = []
        var refused = 0
        var unexpected: [String] = []
        var stop = false
    }

    let number: Int
    let account: Account
    let progress = Locked(Progress())

    init(_ number: Int, _ account: Account) { (self.number, self.account) = (number, account) }

    var written: Int { progress.withLock { $0.written.count } }
    var refused: Int { progress.withLock { $0.refused } }

    func run(_ service: Service) async {
        do {
            let reason = AdmissionReason("upload \(number)")
            try await service.policies.withAdmittedIdentity(account.identity, reason: reason) {
                // Legacy code on a raw thread, which inherits nothing: the identity goes along in a snapshot.
                let snapshot = IdentitySnapshot.capture()
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    Thread {
                        snapshot.run { self.writeUntilStopped(service) }
                        done.resume()
                    }.start()
                }
            }
        } catch {
            service.ledger.problem("upload \(number) of \(show(account.identity)) was not admitted: \(error)")
        }
    }

    private func writeUntilStopped(_ service: Service) {
        var part = 0
        while !progress.withLock({ $0.stop }) {
            part += 1
            let path = "\(service.documents)/\(account.label)/upload-\(number)-part-\(part).txt"
            do throws(ProtectionError) {
                try service.files.writeFile(atPath: path, contents: Data("upload \(number), part \(part)\n".utf8))
                progress.withLock { $0.written.append(path) }
            } catch .accountBlocked(account.identity, BlockAccountReason.wiped.rawValue) {
                progress.withLock { $0.refused += 1 }
                usleep(500)
            } catch {
                progress.withLock { $0.unexpected.append("\(error)") }
                usleep(500)
            }
        }
    }
}

/// Waits (polling) until `condition` holds; a problem after `seconds`.
func waitUntil(_ what: String, ledger: Ledger, seconds: Double = 5, _ condition: () -> Bool) async {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { return ledger.problem("timed out waiting until \(what)") }
        try? await Task.sleep(for: .milliseconds(1))
    }
}

/// Returns how many files each account still owns among those the ledger knows.
func tenantWipe(_ service: Service, backup: String?) async -> [String: Int] {
    let ledger = service.ledger, files = service.files, policies = service.policies
    let contoso = Organizations.contoso.tenant
    func inContoso(_ owner: Identity?) -> Bool {
        owner.map { !$0.isUnmanaged && policies.tenant(for: $0) == contoso } ?? false
    }

    // Everything that is not contoso's, byte for byte, to compare afterwards.
    var others: [String: Data] = [:]
    var contosoFiles = 0
    for path in service.filesUnderRoots() {
        if inContoso(try? files.protectionInfo(atPath: path)?.owner) {
            contosoFiles += 1
        } else {
            others[path] = FileManager.default.contents(atPath: path)
        }
    }
    let keysBefore = service.keyFileCount()
    print("  before: \(contosoFiles) file(s) of contoso.com, \(others.count) other file(s), \(keysBefore) key file(s)")
    ledger.expect(keysBefore == 3, "\(keysBefore) key files before the wipe, expected 3 (alice, bob, dave)")

    let uploads = [Upload(1, Accounts.alice), Upload(2, Accounts.alice), Upload(3, Accounts.bob),
                   Upload(4, Accounts.bob), Upload(5, Accounts.carol)]
    let contosoUploads = uploads.filter { $0.account.organization?.tenant == contoso }
    let carolsUpload = uploads[4]
    var report: TenantWipeReport?
    await withTaskGroup(of: Void.self) { group in
        for upload in uploads { group.addTask { await upload.run(service) } }
        await waitUntil("every upload has written 3 parts", ledger: ledger) { uploads.allSatisfy { $0.written >= 3 } }
        print("  5 uploads admitted and writing: alice ×2, bob ×2 (contoso.com), carol (fabrikam.com)")

        report = await policies.wipeData(forTenant: contoso)
        let carolAtWipe = carolsUpload.written
        print("  wipeData(forTenant: \"contoso.com\") returned; the uploads are still running")
        await waitUntil("the contoso uploads are refused and carol's writes on", ledger: ledger) {
            contosoUploads.allSatisfy { $0.refused >= 3 } && carolsUpload.written >= carolAtWipe + 3
        }
        for upload in uploads { upload.progress.withLock { $0.stop = true } }
        await group.waitForAll()
    }
    for upload in uploads {
        let progress = upload.progress.withLock { $0 }
        ledger.expectNone(progress.unexpected, "unexpected errors in upload \(upload.number)")
        if upload.account.organization?.tenant == contoso {
            ledger.expect(progress.refused > 0, "upload \(upload.number) of \(upload.account.label) was never refused")
            let survivors = progress.written.filter { FileManager.default.fileExists(atPath: $0) }
            ledger.expectNone(survivors.map(service.relative), "file(s) of upload \(upload.number) survived the wipe")
        } else {
            ledger.expect(progress.refused == 0, "carol's upload was refused \(progress.refused) time(s)")
            ledger.expectNone(progress.written.filter {
                (try? files.protectionInfo(atPath: $0)?.owner) != Accounts.carol.identity
            }.map(service.relative), "part(s) of carol's upload missing or not hers")
        }
    }
    let refusedAll = contosoUploads.allSatisfy { $0.refused > 0 }
    print("  alice's and bob's uploads: " + (refusedAll ? "every write after the wipe began was refused with "
        + "ProtectionError 109 (reason \(BlockAccountReason.wiped.rawValue), wiped)" : "NOT REFUSED"))
    print("  carol's upload (fabrikam.com): " + (carolsUpload.refused == 0 ? "wrote on, never refused" : "REFUSED"))

    if let report {
        let wiped = report.accounts.map(\.account)
        print("  wiped accounts: \(wiped.map(show).joined(separator: ", ")); errors: "
            + (report.accounts.contains { $0.error != nil } ? "\(report.accounts.compactMap(\.error))" : "none"))
        ledger.expect(wiped == [Accounts.alice, Accounts.bob, Accounts.dave].map(\.identity),
                      "the tenant wipe wiped \(wiped.map(show))")
        ledger.expect(report.accounts.allSatisfy { $0.error == nil && !$0.handledByDelegate }, "wipe errors")
    }

    // New requests for the wiped accounts are refused at the door.
    for account in [Accounts.alice, Accounts.bob] {
        do {
            try await policies.withAdmittedIdentity(account.identity, reason: "POST /notes") {
                ledger.problem("a request for \(show(account.identity)) was admitted after the wipe")
            }
        } catch let error as AdmissionError {
            print("  a new request for \(pad(show(account.identity), 17)) \(show(error))")
            ledger.expect(error.cause == .blocked(.wiped), "after the wipe: \(error)")
        } catch {
            ledger.problem("after the wipe: \(error)")
        }
    }

    // Nothing of contoso remains; everything else is as it was.
    let survivors = service.filesUnderRoots().filter { inContoso(try? files.protectionInfo(atPath: $0)?.owner) }
    ledger.expectNone(survivors.map(service.relative), "file(s) of contoso.com survived the wipe")
    let owners = (try? files.ownersUnderRoots()) ?? []
    ledger.expect(!owners.contains(where: inContoso), "ownersUnderRoots still lists accounts of contoso.com")
    let identical = others.filter { FileManager.default.contents(atPath: $0.key) == $0.value }.count
    print("  after: \(survivors.count) file(s) of contoso.com; \(identical) of \(others.count) other file(s) "
        + "byte-identical; \(service.keyFileCount()) key file(s)")
    ledger.expect(identical == others.count, "\(others.count - identical) other file(s) changed or vanished")
    ledger.expect(service.keyFileCount() == 0, "contoso's key files survived the wipe")
    let blocked = policies.blockedAccounts
    let reasons = blocked.map { "\(show($0)) (\(policies.blockReason(for: $0)))" }
    print("  blockedAccounts: \(reasons.joined(separator: ", "))")
    ledger.expect(blocked == ["alice@contoso.com", "bob@contoso.com", "dave@contoso.com", "erin@fabrikam.com"],
                  "blockedAccounts: \(blocked.map(show))")

    var remaining: [String: Int] = [:], wrong: [String] = []
    for file in ledger.snapshot.files {
        let exists = FileManager.default.fileExists(atPath: file.path)
        if exists { remaining[file.account.label, default: 0] += 1 }
        if exists == (file.account.organization?.tenant == contoso) {
            wrong.append("\(service.relative(file.path)) \(exists ? "exists" : "is gone")")
        }
    }
    ledger.expectNone(wrong, "file(s) the service wrote are not as the wipe should leave them")

    if let backup {
        // Crypto-shredding: a copy the wipe could not find (outside the roots) is refused while alice is
        // blocked, and once she is unblocked (say, enrolled again) it no longer decrypts: her keys are gone.
        for step in ["while alice is blocked (wiped)", "after unblockAccount(alice, reason: .wiped)"] {
            if step.hasPrefix("after") { policies.unblockAccount(Accounts.alice.identity, reason: .wiped) }
            do {
                _ = try IdentityContext.withThreadIdentity(Accounts.alice.identity) {
                    try files.readFile(atPath: backup)
                }
                ledger.problem("a copy of alice's file outside the roots still decrypts after the wipe")
            } catch let error as ProtectionError {
                // (The key ID in a keyNotFound error is random: left out, so that the output is the same every run.)
                let text = if case .keyNotFound = error { "ProtectionError 103: no key left" } else { "\(error)" }
                print("  a copy of alice's forecast outside the roots, \(step): \(text)")
                let expected: Int = step.hasPrefix("after") ? 103 : 109
                ledger.expect(error.code == expected, "backup copy \(step): \(error), expected code \(expected)")
            } catch {
                ledger.problem("backup copy \(step): \(error)")
            }
        }
    }
    return remaining
}

// MARK: - The program

var requestCount = Accounts.all.count * 4
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--requests", let value = arguments.popFirst().flatMap(Int.init), value > 0 {
        requestCount = value
    } else {
        print("usage: MultiTenantService [--requests N]   (N > 0, default \(Accounts.all.count * 4))")
        exit(argument == "--help" || argument == "-h" ? 0 : 2)
    }
}

let root = FileManager.default.temporaryDirectory.path + "/MultiTenantService-\(UUID().uuidString)"
let service: Service
do {
    print("== 1. Setup: two organizations, seven accounts")
    service = try Service(root: root)
} catch {
    print("setup failed: \(error)")
    try? FileManager.default.removeItem(atPath: root)
    exit(1)
}
let ledger = service.ledger, files = service.files, policies = service.policies
service.clockOutDave()
var accountRows: [[String]] = []
for account in Accounts.all {
    let me = account.identity
    let managed = policies.isIdentityManaged(me), reason = policies.blockReason(for: me)
    let block = reason == .notBlocked ? nil : reason
    let policy = policies.policy(for: me)
    let saves = SaveTarget.rotation(for: me).filter { policy.isSaveToAllowed(for: $0.location, account: $0.account) }
    accountRows.append([show(me), me.isUnmanaged ? "—" : policies.tenant(for: me).rawValue,
                        managed ? "yes" : "no", block.map { "\($0) (\($0.rawValue))" } ?? "no",
                        policies.isFileEncryptionRequired(for: me) ? "required" : "no",
                        managed ? "\(policy.dataTransfer)" : "—",
                        saves.count == 4 ? "anywhere" : saves.map(\.name).joined(separator: "; ")])
    ledger.expect(managed == account.isManaged, "\(show(me)) managed: \(managed)")
    ledger.expect(block == account.blocked, "\(show(me)) blocked: \(block.map { "\($0)" } ?? "no")")
    ledger.expect(policies.isFileEncryptionRequired(for: me) == account.encryptsFiles, "\(show(me)): encryption")
}
print("")
printTable(["account", "tenant", "managed", "blocked", "encryption", "data transfer", "may save to"], accountRows)
print("  managedAccounts: \(policies.managedAccounts.map(show).joined(separator: ", "))")
print("  blockedAccounts: \(policies.blockedAccounts.map(show).joined(separator: ", "))")
print("  admission check: a managed account's token must be at most \(Int(TokenFreshnessCheck.maximumAge)) s old")
ledger.expect(policies.managedAccounts == Accounts.managed.map(\.identity).sorted { $0.foldedName < $1.foldedName },
              "managedAccounts: \(policies.managedAccounts.map(show))")
ledger.expect(policies.blockedAccounts == [Accounts.dave.identity, Accounts.erin.identity],
              "blockedAccounts: \(policies.blockedAccounts.map(show))")

print("\n== 2. \(requestCount) requests, up to \(Service.maxInFlight) at once (order varies from run to run)")
let (incoming, submit) = AsyncStream.makeStream(of: Request.self)
for number in 1...requestCount { submit.yield(Request(number)) }
submit.finish()
await service.serve(incoming)
// The service's own log, written outside every identity scope: it has no owner and no wipe touches it.
let auditLog = service.documents + "/audit.log"
do {
    let lines = ledger.snapshot.auditLines.sorted()
    try files.writeFile(atPath: auditLog, contents: Data(lines.joined(separator: "\n").utf8))
    ledger.expect(try files.protectionInfo(atPath: auditLog) == nil, "audit.log has an owner")
} catch {
    ledger.problem("audit.log: \(error)")
}
// The token check ran once for each managed account that was admitted (under that account), never for
// unmanaged or blocked accounts: every other admission used the cached pass.
let checked = service.tokenCheck.runs.withLock { $0 }
let admittedManaged = Set((1...requestCount).map { Request($0).account }.filter { $0.isManaged && $0.blocked == nil }
    .map(\.identity))
print("  token check: ran once for each of \(checked.map { show($0.account) }.sorted().joined(separator: ", "))\n"
    + "  (all their other admissions used the cached pass; unmanaged and blocked accounts are never checked)")
ledger.expect(checked.count == admittedManaged.count && Set(checked.map(\.account)) == admittedManaged,
              "token check runs: \(checked.map { show($0.account) }), expected one each: \(admittedManaged.map(show))")
ledger.expect(checked.allSatisfy { $0.account == $0.runningAs }, "the token check ran under another identity")

print("\n== 3. Across accounts and tenants")
await acrossAccounts(service)

print("\n== 4. Files at rest, each read back under its owner")
var encryptedCount: [String: Int] = [:]
var backup: String?    // a raw copy of alice's forecast, kept outside the protected roots
for file in ledger.snapshot.files.sorted(by: { $0.path < $1.path }) {
    let name = service.relative(file.path), owner = file.account.identity
    do {
        let recorded = try files.protectionInfo(atPath: file.path)?.owner
        let encrypted = try files.isFileEncrypted(atPath: file.path)
        let raw = FileManager.default.contents(atPath: file.path) ?? Data()
        let plaintextOnDisk = raw.range(of: file.plaintext) != nil     // the bytes on disk, not through the runtime
        // Reading a managed account's data needs a reader its policy allows: the owner itself.
        let read: String
        do {
            let bytes = try IdentityContext.withThreadIdentity(owner) { try files.readFile(atPath: file.path) }
            read = bytes == file.plaintext ? "reads back" : "READS OTHER BYTES"
            ledger.expect(file.account.blocked == nil && bytes == file.plaintext,
                          "\(name): read back as its owner: \(read)")
        } catch let error as ProtectionError {
            read = "refused to its owner (\(error.code))"
            let expected = file.account.blocked.map {
                ProtectionError.accountBlocked(identity: owner, reason: $0.rawValue)
            }
            ledger.expect(error == expected, "\(name): read as its owner: \(error)")
        }
        print("  \(pad(name, 32)) owner \(pad(show(recorded), 18)) \(pad(encrypted ? "encrypted," : "clear,", 10)) "
            + pad(plaintextOnDisk ? "plaintext on disk," : "plaintext not on disk,", 22) + " \(read)")
        ledger.expect(recorded == owner, "\(name): owner \(show(recorded)), expected \(show(owner))")
        ledger.expect(encrypted == file.account.encryptsFiles, "\(name): encrypted: \(encrypted)")
        ledger.expect(plaintextOnDisk == !encrypted, "\(name): plaintext on disk: \(plaintextOnDisk)")
        if encrypted { encryptedCount[file.account.label, default: 0] += 1 }
        if name == "documents/alice/forecast.txt" {
            let copy = root + "/backup-of-forecast.txt"
            try FileManager.default.copyItem(atPath: file.path, toPath: copy)
            backup = copy
        }
    } catch {
        ledger.problem("\(name): \(error)")
    }
}

print("\n== 5. Wipe of the tenant contoso.com while its uploads are still writing")
let remaining = await tenantWipe(service, backup: backup)
ledger.expect(FileManager.default.fileExists(atPath: auditLog), "the wipe removed audit.log, which has no owner")

print("\n== 6. Summary")
let final = ledger.snapshot
print("  Requests (hops: handler, GCD, Operation, Task and after await as the account; audit with none):")
printTable(["#", "account", "admission", "identity at the hops", "note", "save to", "copy"],
           final.requests.keys.sorted().map { number in
               let record = final.requests[number]!
               return [record.request.id, show(record.request.account.identity), record.admission, record.hops,
                       record.note, record.saveTo, record.copy]
           })
ledger.expect(final.requests.count == requestCount, "recorded \(final.requests.count) of \(requestCount) requests")

print("\n  Accounts (files: notes, copies and documents it owns; after the wipe of contoso.com):")
var owned: [String: Int] = [:]
for file in final.files { owned[file.account.label, default: 0] += 1 }
let requestsOf = Dictionary(grouping: final.requests.values, by: { $0.request.account.label })
printTable(["account", "tenant", "standing", "requests", "admitted", "refused", "saves blocked", "files", "encrypted",
            "after wipe"],
           Accounts.all.map { account in
               let records = requestsOf[account.label] ?? []
               let admitted = records.filter { $0.admission == "admitted" }.count
               let standing = account.blocked.map { "blocked: \($0)" } ?? (account.isManaged ? "managed" : "unmanaged")
               return [show(account.identity), account.organization?.tenant.rawValue ?? "—", standing,
                       "\(records.count)", "\(admitted)", "\(records.count - admitted)",
                       "\(records.filter(\.saveBlocked).count)", "\(owned[account.label] ?? 0)",
                       "\(encryptedCount[account.label] ?? 0)",
                       "\(remaining[account.label] ?? 0)"]
           }, right: [3, 4, 5, 6, 7, 8, 9])

try? FileManager.default.removeItem(atPath: root)
let problems = ledger.snapshot.problems
if problems.isEmpty {
    print("\nAll expectations held: admission, identities at every hop, owners, encryption, save-to rules, "
        + "reads and transfers across accounts and tenants, the tenant wipe.")
    exit(0)
}
print("\n\(problems.count) problem(s):")
for problem in problems { print("  - \(problem)") }
exit(1)
