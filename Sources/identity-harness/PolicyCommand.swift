import Foundation
import IdentityPolicy
import IdentityRuntime

/// `identity-harness policy check DIR`: lints a policy directory for operators' CI, with the parser the
/// runtime reads it with (`DirectoryPolicySource`).
///
/// Prints one line per error, `path:line:column: "key": message` (the parts that apply: a duplicate or an
/// unreadable file has no position), then a summary naming the accounts and tenants a running manager would
/// refuse (`ProtectionError.policyUnavailable`) because of them. Exit status: 0 when every document is good,
/// 1 when any is not, 2 when the directory cannot be read.
enum PolicyCommand {
    /// The exit status of `policy ARGUMENTS`, having written its lines to `output`.
    static func run(_ arguments: ArraySlice<String>, output: (String) -> Void = { print($0) }) throws(UsageError) -> Int32 {
        guard arguments.first == "check" else {
            throw UsageError(description: "policy: expected 'check DIR', got '\(arguments.first ?? "")'")
        }
        guard arguments.count == 2, let directory = arguments.last, !directory.hasPrefix("--") else {
            throw UsageError(description: "policy check takes one directory")
        }
        return check(directory: directory, output: output)
    }

    /// Reads `directory` once and reports what the runtime would.
    static func check(directory: String, output: (String) -> Void) -> Int32 {
        let source: DirectoryPolicySource
        do {
            source = try DirectoryPolicySource(directory: directory)
        } catch {
            output("\(error)")
            output("policy check: \(directory): cannot be read")
            return 2
        }
        let errors = source.errors
        for error in errors { output("\(error)") }
        // Only the summary's count: the source has read the directory already, and a listing that fails now
        // (the directory removed since) changes no error reported above.
        let documents = (try? FileManager.default.contentsOfDirectory(atPath: directory))?.filter { $0.hasSuffix(".json") }.count
        let counted = documents.map { "\($0) document\($0 == 1 ? "" : "s")" } ?? "documents"
        guard !errors.isEmpty else {
            output("policy check: \(directory): \(counted), no errors")
            return 0
        }
        output("policy check: \(directory): \(counted), \(errors.count) error\(errors.count == 1 ? "" : "s")")
        let policies = source.policies
        if !policies.isComplete {
            output("  refused until fixed: every account without a good document of its own (a document's account or tenant cannot be read)")
        }
        let accounts = policies.unavailableAccounts.map(\.name).sorted()
        let tenants = policies.unavailableTenants.map(\.rawValue).sorted()
        if !accounts.isEmpty { output("  refused until fixed: account\(accounts.count == 1 ? "" : "s") \(accounts.joined(separator: ", "))") }
        if !tenants.isEmpty { output("  refused until fixed: every account of tenant\(tenants.count == 1 ? "" : "s") \(tenants.joined(separator: ", ")) without a document of its own") }
        return 1
    }
}
