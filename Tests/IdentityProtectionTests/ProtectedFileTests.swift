import Foundation
import IdentityProtection
import IdentityRuntime
import IdentityTesting
import Testing

@Suite("ProtectedFile: random access, encrypted in authenticated chunks")
struct ProtectedFileTests {
    @Test("managed owner: encrypted at rest; unmanaged owner: plain, same API", arguments: [alice, carol])
    func roundTrip(owner: Identity) throws {
        let f = try Fixture(chunkSize: 16)
        let path = f.path("f.bin")
        let text = Array("the quick brown fox jumps over the lazy dog".utf8)
        try IdentityContext.withThreadIdentity(owner) {
            let file = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create])
            #expect(file.owner == owner)
            #expect(file.isEncrypted == (owner == alice))
            try file.write(text)
            #expect(file.offset == UInt64(text.count))
            #expect(try file.size() == UInt64(text.count))
            #expect(try file.read(at: 4, upToCount: 5) == Array("quick".utf8))
            try file.seek(to: 0)
            #expect(try file.read(upToCount: 3) == Array("the".utf8))
            #expect(try file.readToEnd() == Array(text[3...]))
            #expect(try file.read(upToCount: 10) == [])
            try file.synchronize()
            try file.close()
        }
        let stored = try #require(bytes(of: path))
        if owner == alice {
            #expect(Data(stored).range(of: Data("quick".utf8)) == nil)
            #expect(try f.files.isFileEncrypted(atPath: path))
        } else {
            #expect(stored == text)
        }
        #expect(try f.files.protectionInfo(atPath: path)?.owner == owner)
        #expect(Array(try IdentityContext.withThreadIdentity(owner) { try f.files.readFile(atPath: path) }) == text)
    }

    @Test("random reads, writes, gaps and truncations match a plain byte array",
          arguments: [(1, alice), (7, alice), (16, alice), (4096, alice), (16, carol)] as [(Int, Identity)])
    func randomOperations(chunkSize: Int, owner: Identity) throws {
        let f = try Fixture(chunkSize: chunkSize)
        let path = f.path("model.bin")
        var model: [UInt8] = []
        var random = SplitMix64(seed: UInt64(chunkSize) &* 7919 &+ UInt64(owner.name.utf8.count))
        var file = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create], owner: owner)
        let operations = chunkSize == 1 ? 150 : 400
        for step in 0..<operations {
            let limit = chunkSize * 6 + 50
            switch random.next() % 7 {
            case 0, 1:
                let offset = Int(random.next() % UInt64(limit))
                let count = Int(random.next() % UInt64(chunkSize * 3 + 3))
                let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                try file.write(bytes, at: UInt64(offset))
                if count > 0 {
                    if model.count < offset + count { model += [UInt8](repeating: 0, count: offset + count - model.count) }
                    model.replaceSubrange(offset..<offset + count, with: bytes)
                }
            case 2:
                let offset = Int(random.next() % UInt64(limit))
                let count = Int(random.next() % UInt64(chunkSize * 3 + 3))
                let expected = offset < model.count ? Array(model[offset..<min(model.count, offset + count)]) : []
                #expect(try file.read(at: UInt64(offset), upToCount: count) == expected, "step \(step)")
            case 3:
                let length = Int(random.next() % UInt64(limit))
                try file.truncate(to: UInt64(length))
                if length < model.count { model.removeSubrange(length...) } else { model += [UInt8](repeating: 0, count: length - model.count) }
            case 4:
                let bytes = (0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                let offset = Int(file.offset)
                try file.write(bytes)
                if !bytes.isEmpty {
                    if model.count < offset + bytes.count { model += [UInt8](repeating: 0, count: offset + bytes.count - model.count) }
                    model.replaceSubrange(offset..<offset + bytes.count, with: bytes)
                }
            case 5:
                try file.seek(to: random.next() % UInt64(limit))
            default:
                // Reopen: everything must come back from disk.
                try file.close()
                file = try f.files.openProtectedFile(atPath: path, options: [.read, .write])
            }
            #expect(try file.size() == UInt64(model.count), "step \(step)")
        }
        try file.seek(to: 0)
        #expect(try file.readToEnd() == model)
        try file.close()
        // The whole-file API reads what the handle wrote, and the other way round.
        #expect(Array(try f.files.readFile(atPath: path)) == model)
    }

    @Test("encryptFile and ProtectedFile read each other's files")
    func sharedFormat() throws {
        let f = try Fixture(chunkSize: 32)
        let path = f.path("shared.bin")
        let original = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 11) }
        writeRaw(original, to: path)
        try f.files.encryptFile(atPath: path, owner: bob)
        let file = try IdentityContext.withThreadIdentity(bob) { try f.files.openProtectedFile(atPath: path) }
        #expect(file.isEncrypted && file.owner == bob)
        #expect(try file.read(at: 500, upToCount: 100) == Array(original[500..<600]))
        try file.write([1, 2, 3], at: 998)
        try file.close()
        try f.files.decryptFile(atPath: path)
        #expect(bytes(of: path) == Array(original[..<998]) + [1, 2, 3])
    }

    @Test("a rewritten chunk gets a fresh nonce, in the chunk's other slot, with the next generation")
    func freshNonce() throws {
        let f = try Fixture(chunkSize: 16)
        let path = f.path("n.bin")
        let file = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create], owner: alice)
        let headerLength = 8 + 4 + alice.name.utf8.count + 16 + 32 + 4
        let slot0 = headerLength + 96
        let slot1 = slot0 + 56
        let content = [UInt8](repeating: 0x41, count: 16)
        try file.write(content, at: 0)
        let first = try #require(bytes(of: path))
        try file.write(content, at: 0)
        let second = try #require(bytes(of: path))
        try file.write(content, at: 0)
        let third = try #require(bytes(of: path))
        #expect(Array(second[slot1..<slot1 + 8]) == [0, 0, 0, 0, 0, 0, 0, 2])
        #expect(Array(third[slot0..<slot0 + 8]) == [0, 0, 0, 0, 0, 0, 0, 3])
        let nonces = [first[slot0 + 8..<slot0 + 20], second[slot1 + 8..<slot1 + 20], third[slot0 + 8..<slot0 + 20]].map(Array.init)
        #expect(Set(nonces).count == 3)
        #expect(try file.read(at: 0, upToCount: 16) == content)
        try file.close()
    }

    @Test("a torn rewrite falls back to the chunk's previous content; both slots damaged: 102, no bytes")
    func tornRecord() throws {
        let f = try Fixture(chunkSize: 16)
        let path = f.path("t.bin")
        let old = [UInt8](repeating: 1, count: 16)
        let file = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create], owner: alice)
        try file.write(old, at: 0)
        try file.write([UInt8](repeating: 2, count: 16), at: 0)   // slot 1, generation 2
        try file.close()
        let headerLength = 8 + 4 + alice.name.utf8.count + 16 + 32 + 4
        let slot0 = headerLength + 96
        var damaged = try #require(bytes(of: path))
        damaged[slot0 + 56 + 30] ^= 0x10                            // tear the newer record
        writeRaw(damaged, to: path)
        let reopened = try f.files.openProtectedFile(atPath: path, options: [.read], owner: nil)
        #expect(try reopened.read(at: 0, upToCount: 16) == old)
        try reopened.close()
        damaged[slot0 + 30] ^= 0x10                                 // and the older one
        writeRaw(damaged, to: path)
        let broken = try f.files.openProtectedFile(atPath: path, options: [.read])
        #expect(protectionError { try broken.read(at: 0, upToCount: 16) }?.code == 102)
        try broken.close()
    }

    @Test("a chunk from another file or another position, or a dropped tail: typed errors, never bytes")
    func boundChunks() throws {
        let f = try Fixture(chunkSize: 16)
        let content = (0..<64).map { UInt8($0) }
        for name in ["a.bin", "b.bin"] {
            let file = try f.files.openProtectedFile(atPath: f.path(name), options: [.write, .create], owner: alice)
            try file.write(content)
            try file.close()
        }
        let headerLength = 8 + 4 + alice.name.utf8.count + 16 + 32 + 4
        let slot = { (index: Int) in headerLength + 96 + 2 * index * 56 }
        let a = try #require(bytes(of: f.path("a.bin")))
        let b = try #require(bytes(of: f.path("b.bin")))
        var foreign = a
        foreign.replaceSubrange(slot(1)..<slot(1) + 56, with: b[slot(1)..<slot(1) + 56])
        var moved = a
        moved.replaceSubrange(slot(2)..<slot(2) + 56, with: a[slot(1)..<slot(1) + 56])
        for (damaged, chunk) in [(foreign, 1), (moved, 2)] {
            writeRaw(damaged, to: f.path("a.bin"))
            let file = try f.files.openProtectedFile(atPath: f.path("a.bin"), options: [.read])
            #expect(try file.read(at: 0, upToCount: 16) == Array(content[..<16]))
            #expect(protectionError { try file.read(at: UInt64(chunk * 16), upToCount: 16) }?.code == 102)
            #expect(protectionError { try file.readToEnd() }?.code == 102)
            try file.close()
        }
        writeRaw(Array(a[..<slot(3)]), to: f.path("a.bin"))        // the last chunk cut off
        let cut = try f.files.openProtectedFile(atPath: f.path("a.bin"), options: [.read])
        #expect(try cut.size() == 64)
        #expect(protectionError { try cut.read(at: 48, upToCount: 16) }?.code == 100)
        try cut.close()
    }

    @Test("openFile refuses plaintext handles for files that must be encrypted (110); ProtectedFile opens them")
    func openFileHole() throws {
        let f = try Fixture()
        let path = f.path("secret.txt")
        #expect(IdentityContext.withThreadIdentity(alice) {
            protectionError { try f.files.openFile(atPath: path, options: [.write, .create]) }?.code
        } == 110)
        #expect(!FileManager.default.fileExists(atPath: path))
        try IdentityContext.withThreadIdentity(alice) { try f.files.writeFile(atPath: path, contents: Data("s".utf8)) }
        for options: FileOpenOptions in [[.read], [.write], [.read, .write, .append], [.write, .create]] {
            #expect(IdentityContext.withThreadIdentity(alice) { protectionError { try f.files.openFile(atPath: path, options: options) }?.code } == 110)
        }
        #expect(IdentityContext.withThreadIdentity(carol) { protectionError { try f.files.openFile(atPath: path, options: [.read]) }?.code } == 110)
        // A plain file whose owner requires encryption (recorded while the policy did not) is encrypted in
        // place before a writing ProtectedFile is handed out; openFile refuses it.
        let plain = f.path("legacy.txt")
        writeRaw(Array("legacy".utf8), to: plain)
        f.policy.fileEncryptionRequired = false
        try f.files.protect(atPath: plain, owner: bob)
        f.policy.fileEncryptionRequired = true
        #expect(protectionError { try f.files.openFile(atPath: plain, options: [.read, .write]) }?.code == 110)
        let file = try IdentityContext.withThreadIdentity(bob) { try f.files.openProtectedFile(atPath: plain, options: [.read, .write]) }
        #expect(file.isEncrypted)
        #expect(try file.readToEnd() == Array("legacy".utf8))
        try file.close()
        #expect(try f.files.isFileEncrypted(atPath: plain))
    }

    @Test("one handle from many tasks at once; many handles on many files at once")
    func concurrency() async throws {
        let f = try Fixture(chunkSize: 64)
        let shared = try f.files.openProtectedFile(atPath: f.path("shared.bin"), options: [.read, .write, .create], owner: alice)
        await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    let bytes = [UInt8](repeating: UInt8(worker + 1), count: 100)
                    for round in 0..<10 {
                        try shared.write(bytes, at: UInt64((round * 8 + worker) * 100))
                    }
                }
                group.addTask {
                    let file = try f.files.openProtectedFile(atPath: f.path("own-\(worker).bin"), options: [.read, .write, .create], owner: bob)
                    for round in 0..<20 { try file.write([UInt8](repeating: UInt8(round), count: 77)) }
                    try file.seek(to: 0)
                    let back = try file.readToEnd()
                    #expect(back == (0..<20).flatMap { [UInt8](repeating: UInt8($0), count: 77) })
                    try file.close()
                }
            }
        }
        let all = try shared.read(at: 0, upToCount: 8000)
        #expect(all.count == 8000)
        for index in 0..<80 { #expect(all[index * 100..<index * 100 + 100].allSatisfy { $0 == UInt8(index % 8 + 1) }) }
        try shared.close()
    }

    @Test("closed handle: 111; read-only handle: no writes (106); offsets past the format: 112")
    func misuse() throws {
        let f = try Fixture(chunkSize: 16)
        let file = try f.files.openProtectedFile(atPath: f.path("m.bin"), options: [.read, .write, .create], owner: alice)
        #expect(protectionError { try file.write([1], at: UInt64.max - 1) }?.code == 112)
        #expect(protectionError { try file.truncate(to: UInt64.max) }?.code == 112)
        // Below the format's 2^62 but past what 16-byte chunks can address inside Int64 offsets (each chunk
        // takes two 56-byte slots): refused, not an arithmetic overflow.
        #expect(protectionError { try file.write([1], at: 1 << 61) }?.code == 112)
        #expect(protectionError { try file.truncate(to: 1 << 61) }?.code == 112)
        #expect(try file.size() == 0)
        try file.write([1, 2, 3])
        try file.close()
        try file.close()
        #expect(protectionError { try file.read(upToCount: 1) }?.code == 111)
        #expect(protectionError { try file.write([1]) }?.code == 111)
        #expect(protectionError { try file.size() }?.code == 111)
        let readOnly = try f.files.openProtectedFile(atPath: f.path("m.bin"), options: [.read])
        #expect(protectionError { try readOnly.write([9]) }?.code == 106)
        #expect(protectionError { try readOnly.truncate(to: 0) }?.code == 106)
        #expect(try readOnly.readToEnd() == [1, 2, 3])
        try readOnly.close()
        #expect(protectionError { try f.files.openProtectedFile(atPath: f.path("missing"), options: [.read]) }?.code == 105)
        #expect(protectionError { try f.files.openProtectedFile(atPath: f.root, options: [.read]) }?.code == 105)
        #expect(protectionError { try f.files.openProtectedFile(atPath: f.path("m.bin"), options: [.write, .create, .exclusive]) }?.code == 106)
    }

    @Test("truncate with .truncate: new owner, empty content, fresh header")
    func truncateOption() throws {
        let f = try Fixture(chunkSize: 16)
        let path = f.path("t.bin")
        let first = try f.files.openProtectedFile(atPath: path, options: [.write, .create], owner: alice)
        try first.write([UInt8](repeating: 7, count: 100))
        try first.close()
        let second = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .truncate], owner: bob)
        #expect(second.owner == bob && second.isEncrypted)
        #expect(try second.size() == 0)
        try second.write([1])
        try second.close()
        #expect(try f.files.protectionInfo(atPath: path)?.owner == bob)
        #expect(Array(try f.files.readFile(atPath: path)) == [1])
    }

    @Test("regression (fuzzing): a forged generation of UInt64.max in a chunk's other slot does not trap a write")
    func forgedGeneration() throws {
        let f = try Fixture(chunkSize: 16)
        let path = f.path("g.bin")
        let file = try f.files.openProtectedFile(atPath: path, options: [.read, .write, .create], owner: alice)
        try file.write([UInt8](repeating: 1, count: 40))
        try file.close()
        let headerLength = 8 + 4 + alice.name.utf8.count + 16 + 32 + 4
        var damaged = try #require(bytes(of: path))
        for index in 0..<3 {
            let other = headerLength + 96 + (2 * index + 1) * 56
            if damaged.count < other + 56 { damaged += [UInt8](repeating: 0, count: other + 56 - damaged.count) }
            for i in other..<other + 56 { damaged[i] = 0xFF }
        }
        // The size record in use is in slot 1 (creation wrote slot 0, the first write slot 1): forge slot 0.
        for i in headerLength..<headerLength + 48 { damaged[i] = 0xFF }
        writeRaw(damaged, to: path)
        let reopened = try f.files.openProtectedFile(atPath: path, options: [.read, .write])
        try reopened.write([2, 2, 2], at: 5)
        try reopened.write([3], at: 45)
        try reopened.write([UInt8](repeating: 4, count: 16), at: 16)
        #expect(try reopened.read(at: 0, upToCount: 100) == [1, 1, 1, 1, 1, 2, 2, 2] + [UInt8](repeating: 1, count: 8) + [UInt8](repeating: 4, count: 16) + [UInt8](repeating: 1, count: 8) + [0, 0, 0, 0, 0, 3])
        try reopened.close()
    }
}
