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
    }

    public struct Row: Sendable {
        public var api: API
        public var attempts = 0
        public var allowed = 0
        public var refused = 0
        /// Outcomes not judged: a block of an account involved changed while the call ran.
        public var undecided = 0
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
        /// Accounts blocked or unblocked while the program ran.
        public var blockChanges: Int
        public var operations: Int
        public var seconds: Double

        public var passed: Bool { violationCount == 0 && leakedBytes == 0 && foreignModifications == 0 && plaintextAtRest == 0 }

        /// The per-API table and a closing line, for printing.
        public var table: String {
            var lines = ["api                       attempts   allowed   refused undecided  violations"]
            for row in rows {
                func cell(_ value: Int, _ width: Int) -> String {
                    let text = "\(value)"
                    return String(repeating: " ", count: max(0, width - text.count)) + text
                }
                lines.append(row.api.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0)
                    + cell(row.attempts, 12) + cell(row.allowed, 10) + cell(row.refused, 10)
                    + cell(row.undecided, 10) + cell(row.violations, 12))
            }
            lines.append("\(operations) operations and \(blockChanges) block changes in \(String(format: "%.1f", seconds)) s: \(violationCount) violations, "
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
