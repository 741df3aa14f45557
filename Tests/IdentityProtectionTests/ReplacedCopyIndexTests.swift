import Foundation
import IdentityProtection
import IdentityRuntime
import Testing

@Suite("A file replaced by a decrypted copy leaves no owner-index entry behind")
struct ReplacedCopyIndexTests {
    /// The keys of the owner index's entries (`"<st_dev>:<st_ino>"`).
    static func indexKeys(_ files: FileProtectionManager) throws -> Set<String> {
        let data = try #require(FileManager.default.contents(atPath: files.stateDirectory + "/owners.index"))
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let entries = try #require(document["entries"] as? [String: Any])
        return Set(entries.keys)
    }

    static func indexKey(of path: String) throws -> String {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        let device = try #require(attributes[.systemNumber] as? NSNumber)
        let inode = try #require(attributes[.systemFileNumber] as? NSNumber)
        return "\(device.uint64Value):\(inode.uint64Value)"
    }

    @Test("decryptFile(atPath:toPath:) over an owned file forgets the replaced file's entry", arguments: [true, false])
    func replacedDestinationForgotten(encrypted: Bool) throws {
        let fixture = try Fixture(ownerStorage: .indexOnly, encryptionRequired: encrypted)
        let source = fixture.path("alice.txt")
        let copy = fixture.path("copy.txt")
        try IdentityContext.withThreadIdentity(alice) {
            try fixture.files.writeFile(atPath: source, contents: Data("alice's plaintext".utf8))
            try fixture.files.writeFile(atPath: copy, contents: Data("an older copy".utf8))
        }
        let replaced = try Self.indexKey(of: copy)
        #expect(try Self.indexKeys(fixture.files).contains(replaced))

        try IdentityContext.withThreadIdentity(alice) { try fixture.files.decryptFile(atPath: source, toPath: copy) }
        #expect(bytes(of: copy) == Array("alice's plaintext".utf8))
        #expect(try Self.indexKey(of: copy) != replaced)
        #expect(try !Self.indexKeys(fixture.files).contains(replaced))
    }
}
