import Dispatch
import Foundation
import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Synchronization

/// A seeded, randomized check of tenant isolation (Sources/IdentityPolicy/IdentityPolicy.docc/ServiceBoundary.md), shared by the test suite and
/// `identity-harness stress --isolation`.
///
/// 64 managed accounts in 8 tenants (every tenant with its own policy document and ``DataTransferLevel``), a
/// few unmanaged accounts, `""` and "no identity" write, read, modify, transfer and re-own each other's data,
/// from raw threads and from tasks, through every protection API and its parameters (`owner:` of a truncating
/// open, writing handles with and without truncation, streams split at random with empty pieces first and in
/// between, file-to-file streams to fresh paths and over other accounts' files, copies over other files,
/// in-place decryption), while accounts are blocked and unblocked under them, and through a second manager
/// whose policy source has never loaded. Each outcome is checked against a model of the access matrix
/// (Sources/IdentityPolicy/IdentityPolicy.docc/ServiceBoundary.md) written from the configuration alone (not by asking the runtime): which refusal
/// codes (108 `accessDenied`, 109 `accountBlocked`, 115 `policyUnavailable`) the matrix gives, or none. Any other outcome, or another code, is a violation. Counted
/// apart: plaintext returned where it was not allowed (bytes), another account's data changed where the rules
/// refuse it, and plaintext at rest written by an implicit write (not `decryptFile`, which stores plaintext on
/// request) for an account whose tenant requires encryption. An outcome during which a block of an account it
/// involves changed is not judged (``Row/undecided``); the item it touched leaves the model.
///
/// Faults (``Options/faults``, one ``FaultClass`` each, switched on one by one): a key store that answers late
/// or never, cancellation of `.async` calls at their suspension points, policy documents broken, deleted and
/// restored, an entry under the root that no walk can read, and wipes of accounts and tenants while handles on
/// their files are open. Their invariants, checked against the same model: a failed or cancelled operation
/// changes no byte and no owner (``Report/lostData``); data created under management goes to its owner alone,
/// even after its owner stops being managed (``Report/withdrawnLeaks``); nothing decrypts after its keys were
/// destroyed (``Report/destroyedKeyPlaintext``); a wipe removes everything or reports what remains
/// (``Report/unreportedLeftovers``); a broken policy document refuses its accounts' data with 115
/// (``Report/brokenPolicyAllowances``).
package enum IsolationStress {
    package struct Options: Sendable {
        package var seed: UInt64 = 1
        /// Seconds to run (when ``operations`` is `nil`).
        package var duration: Double = 10
        /// Operations to run in all, instead of a duration.
        package var operations: Int?
        package var accounts = 64
        package var tenants = 8
        /// Half of them raw threads, half tasks.
        package var workers = 8
        /// ``RuntimeSettings/dataIsolation`` of the manager under test. `false` is a self-check: the program
        /// must then report violations and leaked bytes.
        package var dataIsolation = true
        /// A gate removed on purpose (self-check): the program must then report violations.
        package var fault: Fault = .none
        /// The fault classes injected while the program runs (none: the run of operations that finish).
        package var faults: Set<FaultClass> = []

        package init() {}
    }

    /// A class of faults injected into the run, each with the invariants it checks.
    package enum FaultClass: String, CaseIterable, Sendable, Comparable {
        /// The key store (a remote store's double over the file store) answers some fetches late, within its
        /// timeout, and some never: the operation is refused with `keyStoreUnavailable` (113) and must leave
        /// the file and its owner record as they were.
        case slowKeyStore = "slow-key-store"
        /// Operations go through the `.async` API, and some are cancelled after a random delay while they await
        /// the key store (which answers after a short latency): as for the slow store, nothing may change.
        case cancellation
        /// Tenants' policy documents are broken (bad JSON, a wrong type, an unknown key, an unsupported
        /// version), deleted and restored while the program runs: a document broken from its first read
        /// refuses its accounts (115); a deleted one leaves the data created under it to its owners alone.
        case brokenPolicies = "broken-policies"
        /// A directory under the root that no walk can read (its path is longer than `PATH_MAX`: a real
        /// `ENAMETOOLONG`, which stops root as it stops anyone), with files of accounts moved into it: a wipe
        /// must report what it could not remove, and a tenant wipe must still reach every other owner.
        case unwalkableEntries = "unwalkable-entries"
        /// Wipes of accounts (`PolicyManager.wipeData(forAccount:)`) and tenants (`wipeData(forTenant:)`)
        /// while `ProtectedFile` handles on their files are open, and accounts of the tenant the manager does
        /// not know: afterwards no handle, envelope or stream of theirs gives plaintext (their keys are
        /// destroyed), even once the accounts are unblocked, and no file of theirs remains unreported.
        case wipes

        package static func < (lhs: FaultClass, rhs: FaultClass) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }

        /// The classes named in `list` (comma-separated raw values, `all`, or `none`); `nil` for an unknown name.
        package static func parse(_ list: String) -> Set<FaultClass>? {
            var classes: Set<FaultClass> = []
            for name in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                switch name {
                case "all": classes.formUnion(allCases)
                case "none": continue
                default:
                    guard let value = FaultClass(rawValue: name) else { return nil }
                    classes.insert(value)
                }
            }
            return classes
        }
    }

    /// A check the protection managers skip on purpose, to prove that the program catches a missing gate.
    package enum Fault: String, CaseIterable, Sendable {
        case none
        /// Modifications (``IdentityProtection/ProtectedDataAccess/modify(writer:)``) are never refused.
        case noModifyCheck = "no-modify-check"
        /// Reads are never refused.
        case noReadCheck = "no-read-check"
        /// Transfers (re-owning) are never refused.
        case noTransferCheck = "no-transfer-check"
        /// A truncating open empties its file before it has the key (the defect of a runtime that changes a
        /// byte before everything is decided): a refused, timed-out or cancelled one loses the file's bytes.
        /// Caught by ``Report/lostData`` (with ``FaultClass/slowKeyStore``).
        case truncateBeforeKey = "truncate-before-key"
        /// The policy forgets the recorded isolation of data whose owner's document was deleted (it answers as
        /// for unmanaged data). Caught by ``Report/withdrawnLeaks`` (with ``FaultClass/brokenPolicies``).
        case forgetRecordedIsolation = "forget-recorded-isolation"
        /// The key store keeps the keys a wipe destroys. Caught by ``Report/destroyedKeyPlaintext`` (with
        /// ``FaultClass/wipes``).
        case keepDestroyedKeys = "keep-destroyed-keys"
        /// Wipe reports say nothing of what a wipe could not remove. Caught by ``Report/unreportedLeftovers``
        /// (with ``FaultClass/wipes`` and ``FaultClass/unwalkableEntries``).
        case hideWipeLeftovers = "hide-wipe-leftovers"
        /// The policy answers for an account whose document is broken as for an unmanaged one (no 115). Caught
        /// by ``Report/brokenPolicyAllowances`` (with ``FaultClass/brokenPolicies``).
        case ignoreBrokenPolicy = "ignore-broken-policy"

        /// The fault classes that must run for this self-check to have something to catch.
        package var needs: Set<FaultClass> {
            switch self {
            case .none, .noModifyCheck, .noReadCheck, .noTransferCheck: []
            case .truncateBeforeKey: [.slowKeyStore]
            case .forgetRecordedIsolation, .ignoreBrokenPolicy: [.brokenPolicies]
            case .keepDestroyedKeys: [.wipes]
            case .hideWipeLeftovers: [.wipes, .unwalkableEntries]
            }
        }
    }

    /// The APIs exercised, one row each in the report.
    package enum API: String, CaseIterable, Sendable {
        case protect, unprotect, unprotectInTask, writeFile, readFile, readFileThroughQueue, decryptFileToCopy
        case openProtectedFile, isDataTransferAllowed, reownFile
        /// `decryptFile(atPath:)` of another caller's file (a read and a modification).
        case decryptInPlace
        /// `decryptFile(atPath:toPath:)` of one file over another existing file.
        case copyOver
        /// `protect(atPath:toPath:owner:)` of a file into a stream file, for an owner of the caller's choice.
        case protectFileToStream
        /// `unprotect(atPath:toPath:)` of a stream file to a fresh path or over another existing file.
        case unprotectStreamFile
        /// Reads of existing envelopes and files through a manager whose policy source has never loaded.
        case readUnloaded
        /// Envelopes protected through a manager whose policy source has never loaded.
        case createUnloaded
        /// Reads through `ProtectedFile` handles opened earlier by other identities, after blocks changed:
        /// a handle answers to the gate on every read, for the identity that opened it.
        case heldHandle
        /// Another caller changes an existing file: `writeFile` over it, a truncating `openProtectedFile` with an
        /// `owner:` of its choice, or a writing handle without truncation.
        case modifyFile
        /// Streamed protect (in tasks), then streamed unprotect of pieces split at random, empty ones included.
        case protectStream, unprotectStream
        /// Fault episodes (``FaultClass/brokenPolicies``): a document broken, deleted, restored or fixed (allowed:
        /// a good document in force afterwards; refused: not).
        case policyChange
        /// Fault episodes (``FaultClass/wipes``): files a wipe left (refused: reported; allowed: not reported).
        case wipe
        /// Reads and writes of wiped accounts' data after the wipe (handles, envelopes): refused, or a violation.
        case wipedData

        /// The rows only a fault class fills.
        package static let faultRows: Set<API> = [.policyChange, .wipe, .wipedData]
    }

    package struct Row: Sendable {
        package var api: API
        package var attempts = 0
        package var allowed = 0
        package var refused = 0
        /// Outcomes not judged: a block of an account involved changed while the call ran.
        package var undecided = 0
        /// Refused by the fault: the key store did not answer in time, or the call was cancelled (113).
        package var interrupted = 0
        package var violations = 0
    }

    package struct Report: Sendable {
        package var rows: [Row]
        /// The first violations, described.
        package var violations: [String]
        /// Every violation by kind (its description without accounts, paths and numbers), most frequent first,
        /// with the first violation of the kind.
        package var violationKinds: [(kind: String, count: Int, example: String)]
        package var violationCount: Int
        /// Bytes of plaintext returned to a reader that may not see them.
        package var leakedBytes: Int
        /// Changes of another account's data that the rules refuse (allowed, or left behind by a refusal).
        package var foreignModifications: Int
        /// Files of an account whose tenant requires encryption found with their plaintext on disk.
        package var plaintextAtRest: Int
        /// Accounts blocked or unblocked while the program ran.
        package var blockChanges: Int
        /// Failed, timed-out or cancelled operations after which a file's bytes or its owner record had changed.
        package var lostData: Int
        /// Operations on data recorded as isolated, whose owner's document was deleted, allowed for another
        /// account than its owner.
        package var withdrawnLeaks: Int
        /// Reads that gave plaintext of data whose keys a wipe had destroyed (open handles, envelopes, streams).
        package var destroyedKeyPlaintext: Int
        /// Files of wiped accounts left under the root that the wipe's report did not mention.
        package var unreportedLeftovers: Int
        /// Operations allowed on data of (or creations for) an account whose policy document is broken.
        package var brokenPolicyAllowances: Int
        /// Fault episodes: policy documents changed, wipes of accounts and of tenants.
        package var policyChanges: Int
        package var wipes: Int
        /// `.async` calls cancelled before they had answered (the cancellation fault injected).
        package var cancellations: Int = 0
        package var operations: Int
        package var seconds: Double

        package var passed: Bool {
            violationCount == 0 && leakedBytes == 0 && foreignModifications == 0 && plaintextAtRest == 0 && lostData == 0
                && withdrawnLeaks == 0 && destroyedKeyPlaintext == 0 && unreportedLeftovers == 0 && brokenPolicyAllowances == 0
        }

        /// The per-API table and a closing line, for printing.
        package var table: String {
            var lines = ["api                       attempts   allowed   refused undecided interrupted  violations"]
            for row in rows {
                func cell(_ value: Int, _ width: Int) -> String {
                    let text = "\(value)"
                    return String(repeating: " ", count: max(0, width - text.count)) + text
                }
                lines.append(row.api.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0)
                    + cell(row.attempts, 12) + cell(row.allowed, 10) + cell(row.refused, 10)
                    + cell(row.undecided, 10) + cell(row.interrupted, 12) + cell(row.violations, 12))
            }
            lines.append("\(operations) operations, \(blockChanges) block changes, \(policyChanges) policy document changes and "
                + "\(wipes) wipes, \(cancellations) cancelled calls in \(String(format: "%.1f", seconds)) s: \(violationCount) violations, "
                + "\(leakedBytes) plaintext bytes leaked, \(foreignModifications) modifications of another account's data, "
                + "\(plaintextAtRest) files in the clear that must be encrypted, \(lostData) failed operations that changed data, "
                + "\(withdrawnLeaks) withdrawn owners' isolated data given to others, \(destroyedKeyPlaintext) reads of destroyed keys' data, "
                + "\(unreportedLeftovers) unreported wipe leftovers, \(brokenPolicyAllowances) operations allowed under a broken policy document")
            lines.append(contentsOf: violations.prefix(10).map { "  VIOLATION: \($0)" })
            if !violationKinds.isEmpty { lines.append("violations by kind:") }
            for kind in violationKinds.prefix(60) {
                lines.append("  \(kind.count) × \(kind.kind)")
                lines.append("      first: \(kind.example)")
            }
            return lines.joined(separator: "\n")
        }
    }

    /// Runs the program in a temporary directory (removed afterwards).
    package static func run(_ options: Options) async throws -> Report {
        let world = try World(options: options)
        defer { world.tearDown() }
        let start = DispatchTime.now().uptimeNanoseconds
        let deadline = start + UInt64(max(0, options.duration) * 1e9)
        let budget = options.operations.map { max(1, $0 / max(1, options.workers)) }
        // With the key-store faults, workers on threads await the `.async` API's tasks while they hold an item's
        // lock: a worker on the cooperative pool waiting for that lock would take from the pool the thread those
        // tasks need (2 on a 2-core machine) and stop the run. Every worker is then a thread.
        // (The world's fault classes: a self-check adds the classes it needs.)
        let threads = world.storeFaults ? options.workers : options.workers / 2
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<options.workers {
                let seed = options.seed &+ UInt64(worker) &* 0x9E37_79B9
                if worker < threads {
                    group.addTask {
                        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                            let thread = Thread {
                                Thread.current.threadDictionary[World.workerThreadKey] = true
                                var random = SplitMix64(seed: seed)
                                world.work(random: &random, budget: budget, deadline: deadline)
                                done.resume()
                            }
                            thread.name = World.workerThreadName
                            thread.start()
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
