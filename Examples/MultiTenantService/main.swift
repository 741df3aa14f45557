// MultiTenantService: one service process working for several accounts at once, one of them managed.
//
//     swift run MultiTenantService                   # 16 requests over 4 accounts
//     swift run MultiTenantService --requests 200
//
// 1. Setup. alice@contoso.com is the managed account: a policy document, a PolicyManager that makes her the
//    primary user, a FileProtectionManager that asks that manager who is managed. bob, carol and a guest ("")
//    are not managed.
// 2. A service loop handles requests for all four accounts concurrently. Each handler scopes its work to the
//    request's account with IdentityContext.withThreadIdentity and then goes through legacy code (a GCD queue,
//    an OperationQueue, a Task) that writes the account's document. Every hop records the effective file
//    identity it sees. Then the account's policy decides whether a "Save as…" copy may go where it asks.
// 3. Files at rest: owner, encryption and the raw bytes of every file.
// 4. The selective wipe of alice: her files and keys go, everybody else's stay.
// 5. A summary. Every expectation is checked: any failure is printed and the exit status is 1.
// Everything happens in a temporary directory that is removed at the end. The requests and the results are the
// same on every run; only the order in which concurrent requests finish (and print) varies.
import Foundation
import IdentityPolicy
import IdentityProtection
import IdentityRuntime

// MARK: - Accounts and requests

struct Account: Sendable {
    let identity: Identity
    let label: String       // for file names and the table
    let isManaged: Bool     // what this program expects; the runtime decides it from the PolicyManager
}

enum Accounts {
    static let alice = Account(identity: "alice@contoso.com", label: "alice", isManaged: true)  // enrolled
    static let all = [
        alice,
        Account(identity: "bob@fabrikam.com", label: "bob", isManaged: false),     // a tenant without policy
        Account(identity: "carol@outlook.com", label: "carol", isManaged: false),  // a personal account
        Account(identity: .unmanaged, label: "guest", isManaged: false),           // "": explicitly no user
    ]
}

/// alice's policy, as an administrator would publish it. Read by a DirectoryPolicySource (see docs/policy.md).
let alicePolicyDocument = """
    {
      "formatVersion": 1,
      "account": "alice@contoso.com",
      "saveToLocations": ["oneDriveForBusiness", "sharePoint", "localDrive"],
      "saveToUnknownLocationAllowed": false,
      "fileEncryptionRequired": true
    }
    """

/// A "Save as…" destination, classified the way the policy sees it.
struct SaveTarget: Sendable {
    let name: String
    let location: SaveLocation
    let folder: String
    let account: Identity?          // who is signed in at the destination (account-bound locations)
    let allowedForManaged: Bool     // what alice's policy must answer; unmanaged accounts are unrestricted

    static func rotation(for owner: Identity) -> [SaveTarget] {
        [
            SaveTarget(name: "OneDrive for Business, own account", location: .oneDriveForBusiness, folder: "onedrive",
                       account: owner, allowedForManaged: true),
            SaveTarget(name: "Dropbox as personal@outlook.com", location: .dropbox, folder: "dropbox",
                       account: "personal@outlook.com", allowedForManaged: false),
            SaveTarget(name: "local drive", location: .localDrive, folder: "local",
                       account: nil, allowedForManaged: true),
            SaveTarget(name: "unknown location", location: .other, folder: "unknown",
                       account: nil, allowedForManaged: false),
        ]
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
    identity.map { $0.isUnmanaged ? "\"\"" : $0.name } ?? "nil"
}

// MARK: - What the service records

/// A file the service wrote, and the plaintext it must hold.
struct WrittenFile: Sendable {
    let path: String
    let account: Account
    let plaintext: Data
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
        var handled: [String: Int] = [:]      // by account label
        var blocked: [String: Int] = [:]
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

    /// "handler → GCD → …: alice@contoso.com; audit: nil", then every hop that saw something else.
    func summary(ledger: Ledger, request: String) -> String {
        let seen = seen.withLock { $0 }
        let asAccount = seen.filter { $0.expected != nil }.map(\.hop)
        let suppressed = seen.filter { $0.expected == nil }.map(\.hop)
        var parts = [asAccount.joined(separator: " → ") + ": " + show(account),
                     suppressed.joined(separator: ", ") + ": nil"]
        for hop in seen where hop.observed != hop.expected {
            ledger.problem("request #\(request), \(hop.hop): expected \(show(hop.expected)), saw \(show(hop.observed))")
            parts.append("✗ \(hop.hop) saw \(show(hop.observed))")
        }
        return parts.joined(separator: "; ")
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
    let ledger = Ledger()

    // The legacy infrastructure handlers go through. Identity-aware drop-in replacements of DispatchQueue and
    // OperationQueue: whatever is submitted runs under the submitter's thread identity.
    let render = IdentityDispatchQueue(label: "render", attributes: .concurrent)
    let storage = IdentityOperationQueue()
    let audit = IdentityDispatchQueue(label: "audit")

    init(root: String) throws {
        self.root = root
        let documents = root + "/documents", exports = root + "/exports"
        (self.documents, self.exports, keysDirectory) = (documents, exports, root + "/keys")
        let folders = Accounts.all.map { "\(documents)/\($0.label)" }
            + SaveTarget.rotation(for: .unmanaged).map { "\(exports)/\($0.folder)" } + [root + "/policies"]
        for folder in folders {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        try Data(alicePolicyDocument.utf8).write(to: URL(fileURLWithPath: root + "/policies/alice.json"))

        // Policies come from JSON documents in a directory. An isolated PolicyManager keeps its identities to
        // itself (PolicyManager.shared would also set IdentityContext.processIdentity).
        let source = DirectoryPolicySource(directory: root + "/policies")
        source.reload()
        policies = PolicyManager(policySource: source)
        // What EnrollmentManager does once alice is enrolled: she becomes the one managed account.
        policies.setPrimaryUser(Accounts.alice.identity)

        // The file manager asks the PolicyManager who is managed and whether their files must be encrypted,
        // and the PolicyManager's wipe deletes files through it. Each holds the other strongly: a reference
        // cycle, broken in `shutDown()`.
        files = try FileProtectionManager(
            roots: [documents, exports], keyStore: FileKeyStore(directory: keysDirectory), policy: policies,
            stateDirectory: root + "/state")
        policies.fileProtection = files
        storage.name = "storage"
        storage.maxConcurrentOperationCount = 2

        print("Working in \(root)")
        print("  policy errors: \(source.errors.isEmpty ? "none" : "\(source.errors)")")
        for account in Accounts.all {
            let managed = policies.isIdentityManaged(account.identity)
            let encryption = policies.isFileEncryptionRequired(for: account.identity)
            print("  \(pad(show(account.identity), 20)) managed: \(managed), file encryption required: \(encryption)")
            ledger.expect(managed == account.isManaged, "\(show(account.identity)) managed: \(managed)")
        }
    }

    func shutDown() {
        policies.fileProtection = nil   // breaks the PolicyManager ⇄ FileProtectionManager cycle
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

    /// One request, start to finish. Everything inside the scope runs as the request's account.
    func handle(_ request: Request) async {
        let account = request.account, me = account.identity
        await IdentityContext.withThreadIdentity(me) {
            let hops = Hops(account: me)
            hops.record("handler")        // async code in a task-group child
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

            // "Save as…": `policies.policy` is the policy of the calling task's effective identity, here the
            // request's account: alice's document for her, the unrestricted policy for everyone else.
            let target = request.saveTo
            let allowed = policies.policy.isSaveToAllowed(for: target.location, account: target.account)
            let expected = !account.isManaged || target.allowedForManaged
            ledger.expect(allowed == expected, "request #\(request.id): saving \(show(me))'s note to \(target.name) "
                + "was \(allowed ? "allowed" : "blocked"), expected \(expected ? "allowed" : "blocked")")
            let copy = "\(exports)/\(target.folder)/\(account.label)-\(request.id).txt"
            if allowed, writeError == nil {
                do {
                    _ = write(try files.readFile(atPath: path), to: copy, account: account)   // written as `me` too
                } catch {
                    ledger.problem("request #\(request.id): reading \(relative(path)): \(error)")
                }
            } else if !allowed {
                ledger.update { $0.blocked[account.label, default: 0] += 1 }
                ledger.expect(!FileManager.default.fileExists(atPath: copy), "blocked copy exists: \(relative(copy))")
            }
            ledger.update { $0.handled[account.label, default: 0] += 1 }

            print("  #\(request.id) \(show(me))  \(hops.summary(ledger: ledger, request: request.id))\n"
                + "      wrote \(relative(path))\(writeError.map { " FAILED: \($0)" } ?? ""); save to \(target.name): "
                + (allowed ? "allowed" : "BLOCKED by policy"))
        }
    }

    /// Writes through the FileProtectionManager, which records the owner (the caller's effective file identity)
    /// and encrypts when the owner's policy requires it. `account` is only what the checks later expect.
    func write(_ contents: Data, to path: String, account: Account) -> ProtectionError? {
        do {
            try files.writeFile(atPath: path, contents: contents)
            ledger.update { $0.files.append(WrittenFile(path: path, account: account, plaintext: contents)) }
            return nil
        } catch {
            ledger.problem("writing \(relative(path)): \(error)")
            return error
        }
    }

    func relative(_ path: String) -> String {
        path.hasPrefix(root + "/") ? String(path.dropFirst(root.count + 1)) : path
    }

    /// FileKeyStore keeps one `<hash>.key` file per identity that has keys (docs/protection.md).
    func keyFileCount() -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: keysDirectory)) ?? []
        return names.filter { $0.hasSuffix(".key") }.count
    }
}

func pad(_ text: String, _ width: Int) -> String {
    text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0)
}

// MARK: - The program

var requestCount = 16
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--requests", let value = arguments.popFirst().flatMap(Int.init), value > 0 {
        requestCount = value
    } else {
        print("usage: MultiTenantService [--requests N]   (N > 0, default 16)")
        exit(argument == "--help" || argument == "-h" ? 0 : 2)
    }
}

let root = FileManager.default.temporaryDirectory.path + "/MultiTenantService-\(UUID().uuidString)"
let service: Service
do {
    print("== 1. Setup")
    service = try Service(root: root)
} catch {
    print("setup failed: \(error)")
    try? FileManager.default.removeItem(atPath: root)
    exit(1)
}
let ledger = service.ledger, files = service.files

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
    ledger.expect(try files.protectionInfo(path: auditLog) == nil, "audit.log has an owner")
} catch {
    ledger.problem("audit.log: \(error)")
}

print("\n== 3. Files at rest")
var encryptedCount: [String: Int] = [:]
var backup: String?    // a raw copy of one of alice's files, kept outside the protected roots
for file in ledger.snapshot.files.sorted(by: { $0.path < $1.path }) {
    let name = service.relative(file.path), managed = file.account.isManaged
    do {
        let owner = try files.protectionInfo(path: file.path)?.owner
        let encrypted = try files.isFileEncrypted(path: file.path)
        let raw = FileManager.default.contents(atPath: file.path) ?? Data()
        let plaintextOnDisk = raw.range(of: file.plaintext) != nil     // the bytes on disk, not through the runtime
        print("  \(pad(name, 32)) owner \(show(owner)), \(encrypted ? "encrypted" : "clear"), "
            + (plaintextOnDisk ? "plaintext visible on disk" : "plaintext not on disk"))
        ledger.expect(owner == file.account.identity, "\(name): owner \(show(owner)), expected \(file.account.label)")
        ledger.expect(encrypted == managed, "\(name): encrypted: \(encrypted), expected \(managed)")
        ledger.expect(plaintextOnDisk == !managed, "\(name): plaintext on disk: \(plaintextOnDisk), expected \(!managed)")
        ledger.expect(try files.readFile(atPath: file.path) == file.plaintext, "\(name): readFile gave other bytes")
        if encrypted { encryptedCount[file.account.label, default: 0] += 1 }
        if managed, backup == nil {
            let copy = root + "/backup-of-" + (file.path as NSString).lastPathComponent
            try FileManager.default.copyItem(atPath: file.path, toPath: copy)
            backup = copy
        }
    } catch {
        ledger.problem("\(name): \(error)")
    }
}

print("\n== 4. Selective wipe of \(Accounts.alice.identity.name)")
print("  keys before: \(service.keyFileCount()) key file(s)")
let report = await service.policies.wipeData(forAccount: Accounts.alice.identity)
print("  wipeData(forAccount:) removed \(report.removedFiles.count) file(s), "
    + "error: \(report.error.map { "\($0)" } ?? "none")")
ledger.expect(report.error == nil && !report.handledByDelegate, "wipe: \(String(describing: report.error))")
print("  keys after: \(service.keyFileCount()) key file(s)")
ledger.expect(service.keyFileCount() == 0, "alice's key file survived the wipe")
var remaining: [String: Int] = [:]
for file in ledger.snapshot.files {
    let exists = FileManager.default.fileExists(atPath: file.path)
    if exists { remaining[file.account.label, default: 0] += 1 }
    let name = service.relative(file.path)
    ledger.expect(exists == !file.account.isManaged, "after the wipe, \(name) \(exists ? "exists" : "is gone")")
}
ledger.expect(FileManager.default.fileExists(atPath: auditLog), "the wipe removed audit.log, which has no owner")
if let backup {
    // Crypto-shredding: the keys are gone, so a copy the wipe could not find no longer decrypts either.
    do {
        _ = try files.readFile(atPath: backup)
        ledger.problem("a copy of alice's file outside the roots still decrypts after the wipe")
    } catch {
        print("  a copy outside the protected roots no longer decrypts: \(error)")
        if case .keyNotFound = error {} else { ledger.problem("backup copy: unexpected \(error)") }
    }
}

print("\n== 5. Summary")
let final = ledger.snapshot
var written: [String: Int] = [:]
for file in final.files { written[file.account.label, default: 0] += 1 }
let columns = [("managed", 7), ("requests", 8), ("files written", 13), ("encrypted", 9), ("saves blocked", 13),
               ("files after wipe", 16)]
print("  " + pad("account", 20) + columns.map { "  " + $0.0 }.joined())
for account in Accounts.all {
    let label = account.label
    let values = [account.isManaged ? "yes" : "no", "\(final.handled[label] ?? 0)", "\(written[label] ?? 0)",
                  "\(encryptedCount[label] ?? 0)", "\(final.blocked[label] ?? 0)", "\(remaining[label] ?? 0)"]
    let cells = zip(values, columns).map { "  " + String(repeating: " ", count: max(0, $1.1 - $0.count)) + $0 }
    print("  " + pad(show(account.identity), 20) + cells.joined())
}
let handled = final.handled.values.reduce(0, +)
ledger.expect(handled == requestCount, "handled \(handled) of \(requestCount) requests")

service.shutDown()
try? FileManager.default.removeItem(atPath: root)
let problems = ledger.snapshot.problems
if problems.isEmpty {
    print("\nAll expectations held: identities at every hop, owners, encryption, save-to rules, the wipe.")
    exit(0)
}
print("\n\(problems.count) problem(s):")
for problem in problems { print("  - \(problem)") }
exit(1)
