import Foundation
import IdentityProtection
import IdentityRuntime

/// `identity-harness wipe-child STATE ROOT KEYS ACCOUNT`: the child process of the crash-during-wipe test.
/// It opens a `FileProtectionManager` on the given state directory (finishing any interrupted wipe first),
/// prints `ready`, and wipes `ACCOUNT`'s files under `ROOT`; the test kills it with SIGKILL at a random
/// moment. Not for interactive use.
enum WipeChildCommand {
    static func run(_ arguments: ArraySlice<String>) -> Bool {
        let values = Array(arguments)
        guard values.count == 4 else {
            FileHandle.standardError.write(Data("usage: identity-harness wipe-child STATE ROOT KEYS ACCOUNT\n".utf8))
            return false
        }
        let account = Identity(values[3])
        do {
            let files = try FileProtectionManager(
                roots: [values[1]], keyStore: FileKeyStore(atPath: values[2]),
                policy: StaticManagedIdentityPolicy(managed: [account]), stateDirectory: values[0])
            FileHandle.standardOutput.write(Data("ready\n".utf8))   // unbuffered: the test waits for it
            // The account removes its own files (a modification of its own data).
            let removed = try IdentityContext.withThreadIdentity(account) { try files.removeFiles(ownedBy: account) }
            print("removed \(removed.count)")
            return true
        } catch {
            print("wipe-child: \(error)")
            return false
        }
    }
}
