// What the samples of "Migrating from the Intune App SDK" stand for; see scripts/doc-samples.py. Declarations
// only.
import Foundation
import IdentityPolicy
import IdentityRuntime

func placeholder<T>() -> T { fatalError("a name the documentation's prose stands for") }

// samples 1, 6
func writeReport(for identity: Identity? = nil) {}

// samples 2, 3, 5
func showMailbox() {}
func showAccountPicker() {}

// sample 4
func showAccount(_ identity: Identity, in window: WindowID) {}
func deleteRows(ownedBy account: Identity) {}

// sample 5
final class AppPolicyDelegate: PolicyDelegate {}
func importDocument() {}

// sample 6
func uploadReport() {}

// samples 7, 8
func uploadReportAsync() async {}

// sample 8
func store(_ result: Data) {}
final class LegacyClient: Sendable {
    func fetch(_ completion: @escaping @Sendable (Data) -> Void) {}
}
let legacyClient: LegacyClient = placeholder()
