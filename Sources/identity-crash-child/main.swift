// The child process of the crash-consistency harness (Tests/IdentityProtectionTests/CrashConsistencyTests):
// it writes through encryptFile, writeFile or a ProtectedFile in a loop, reporting each step on standard output
// before and after it, until the parent kills it with SIGKILL.
//
//     identity-crash-child MODE DIRECTORY SEED
//
// DIRECTORY holds keys/, state/ and root/ (made by the parent). Lines: "ready", "begin N", "done N".
import Foundation
import IdentityProtection
import IdentityRuntime
import IdentityTesting

let arguments = CommandLine.arguments
guard arguments.count == 4, let mode = CrashWorkload.Mode(rawValue: arguments[1]), let seed = UInt64(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: identity-crash-child writeFile|encryptFile|protectedFile DIRECTORY SEED\n".utf8))
    exit(2)
}
let directory = arguments[2]
let alice: Identity = "alice@contoso.com"
let bob: Identity = "bob@contoso.com"
let carol: Identity = "carol@fabrikam.com"

/// One `write(2)` per line: a line is never torn by the kill.
func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

do {
    let files = try FileProtectionManager(
        roots: [directory + "/root"], keyStore: try FileKeyStore(atPath: directory + "/keys"),
        // The workload rewrites one path as alice and as carol and reads from no identity: crash consistency,
        // not isolation, is under test here, so the policy opts out of it.
        policy: StaticManagedIdentityPolicy(managed: [alice, bob], fileEncryptionRequired: true, dataIsolation: false),
        stateDirectory: directory + "/state", ownerStorage: mode == .writeFile ? .indexOnly : .automatic,
        chunkSize: 4096)
    let path = directory + "/root/" + mode.rawValue + ".bin"
    switch mode {
    case .writeFile:
        say("ready")
        for step in 1... {
            say("begin \(step)")
            try IdentityContext.withThreadIdentity(step % 2 == 1 ? alice : carol) {
                try files.writeFile(atPath: path, contents: Data(CrashWorkload.content(seed: seed, step: step)))
            }
            say("done \(step)")
        }
    case .encryptFile:
        say("ready")
        for step in 1... {
            say("begin \(step)")
            switch step % 3 {
            case 0: try files.decryptFile(atPath: path)
            case 1: try files.encryptFile(atPath: path, owner: alice)
            default: try files.encryptFile(atPath: path, owner: bob)
            }
            say("done \(step)")
        }
    case .protectedFile:
        let file = try files.openProtectedFile(atPath: path, options: [.read, .write, .create], owner: alice)
        say("ready")
        for step in 1... {
            say("begin \(step)")
            switch CrashWorkload.operation(seed: seed, step: step) {
            case let .write(offset, bytes, synchronize):
                try file.write(bytes, at: UInt64(offset))
                if synchronize { try file.synchronize() }
            case let .truncate(length, synchronize):
                try file.truncate(to: UInt64(length))
                if synchronize { try file.synchronize() }
            }
            say("done \(step)")
        }
    }
} catch {
    say("error \(error)")
    exit(1)
}
