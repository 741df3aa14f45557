import Foundation
import IdentityPostgres
import IdentityProtection
import IdentityRuntime
import Testing

extension FleetTests {
    @Suite("Several processes share one database")
    struct MultiProcessTests {
        struct Fleet {
            let configuration: PostgresFleetConfiguration
            let shared: String
            let nodes: [NodeProcess]

            init(count: Int) async throws {
                configuration = try await TestDatabase.make()
                // Migrate once before the children start.
                let fleet = PostgresFleet(configuration: configuration)
                try await fleet.waitUntilReady(timeout: 20)
                fleet.shutdown()
                shared = NSTemporaryDirectory() + "identity-shared-\(UUID().uuidString)"
                try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
                let kek = try TestDatabase.makeKEKText()
                var nodes: [NodeProcess] = []
                for _ in 0..<count { nodes.append(try NodeProcess(configuration: configuration, kek: kek, shared: shared)) }
                self.nodes = nodes
            }

            func stop() {
                nodes.forEach { $0.stop() }
                try? FileManager.default.removeItem(atPath: shared)
            }
        }

        /// Milliseconds between `start` and the time in `answer` (`EPOCHMS ...`).
        static func delay(_ answer: String, since start: Double) -> Double {
            (Double(answer.split(separator: " ")[0]) ?? .infinity) - start
        }

        @Test("a file protected by one process is read by the others; a rotation in one is seen by all within 1 s")
        func filesAndRotation() async throws {
            let fleet = try await Fleet(count: 3)
            defer { fleet.stop() }
            let (a, b, c) = (fleet.nodes[0], fleet.nodes[1], fleet.nodes[2])
            let account = "erin@contoso.com"
            let contents = Data("shared file contents".utf8).base64
            #expect(try a.ok("write-file report.txt \(account) \(contents)") == "encrypted=true")
            #expect(try b.ok("read-file report.txt \(account)") == contents)
            #expect(try c.ok("read-file report.txt \(account)") == contents)

            let before = try a.ok("current \(account)")
            #expect(try b.ok("current \(account)") == before)
            for node in [b, c] { #expect(try node.ask("await-key-change \(account) \(before) 3000") == "waiting") }
            let rotated = try a.ok("rotate \(account)")
            let committed = Date().timeIntervalSince1970 * 1000
            for node in [b, c] {
                let answer = try node.ok("", timeout: 10)
                #expect(answer.hasSuffix(rotated))
                #expect(Self.delay(answer, since: committed) <= 1000, "rotation seen after \(answer)")
            }
            // The old file still reads everywhere after the rotation; a new one uses the new key.
            #expect(try c.ok("read-file report.txt \(account)") == contents)
        }

        @Test("a wipe in one process makes the account's data undecryptable in all within 1 s")
        func wipe() async throws {
            let fleet = try await Fleet(count: 3)
            defer { fleet.stop() }
            let (a, b, c) = (fleet.nodes[0], fleet.nodes[1], fleet.nodes[2])
            let account = "frank@contoso.com"
            let envelope = try a.ok("protect \(account) \(Data("to be shredded".utf8).base64)")
            for node in [b, c] {
                #expect(try node.ok("unprotect \(envelope)") == Data("to be shredded".utf8).base64)
                #expect(try node.ask("await-unreadable \(envelope) 3000") == "waiting")
            }
            let committed = Double(try a.ok("destroy \(account)")) ?? 0
            for node in [b, c] {
                let answer = try node.ok("", timeout: 10)
                #expect(answer.hasSuffix(" 103"))
                #expect(Self.delay(answer, since: committed) <= 1000, "wipe seen after \(answer)")
            }
            #expect(try a.ask("unprotect \(envelope)").hasPrefix("err 103"))
        }

        @Test("a policy row update reaches every process's PolicyManager within 1 s")
        func policyUpdate() async throws {
            let fleet = try await Fleet(count: 3)
            defer { fleet.stop() }
            let writerFleet = PostgresFleet(configuration: fleet.configuration)
            defer { writerFleet.shutdown() }
            try await writerFleet.waitUntilReady(timeout: 20)
            let writer = PostgresPolicySource(fleet: writerFleet)
            let account = "grace@contoso.com"
            for node in fleet.nodes { #expect(try node.ask("await-policy \(account) 3000") == "waiting") }
            try await writer.storeDocument(#"{"formatVersion": 1, "account": "\#(account)", "fileEncryptionRequired": false, "saveToLocations": ["localDrive"]}"#, named: "grace")
            let committed = Date().timeIntervalSince1970 * 1000
            for node in fleet.nodes {
                let answer = try node.ok("", timeout: 10)
                #expect(Self.delay(answer, since: committed) <= 1000, "policy seen after \(answer)")
                #expect(try node.ok("policy \(account)").hasPrefix("encryption=false"))
            }
        }

        @Test("8 processes × 4 threads rotating and protecting at once: no mismatch, no error, every sample readable elsewhere, one current key")
        func stress() async throws {
            let fleet = try await Fleet(count: 8)
            defer { fleet.stop() }
            let accounts = (0..<3).map { "s\($0)@contoso.com" }.joined(separator: ",")
            for node in fleet.nodes { try node.send("stress \(accounts) 4 4") }
            var samples: [[(String, String)]] = []
            for node in fleet.nodes {
                let answer = try node.ok("", timeout: 120)
                let fields = Dictionary(uniqueKeysWithValues: answer.split(separator: " ").compactMap { field -> (String, String)? in
                    guard let equals = field.firstIndex(of: "=") else { return nil }
                    return (String(field[..<equals]), String(field[field.index(after: equals)...]))
                })
                #expect(Int(fields["ops"] ?? "") ?? 0 > 0, "\(answer.prefix(200))")
                #expect(fields["mismatches"] == "0")
                #expect(fields["errors"] == "0", "\(fields["first-error"] ?? "")")
                samples.append((fields["samples"] ?? "").split(separator: ",").map { pair in
                    let parts = pair.split(separator: ":")
                    return (String(parts[0]), String(parts.count > 1 ? parts[1] : ""))
                })
            }
            for (index, node) in fleet.nodes.enumerated() {
                for (envelope, plaintext) in samples[(index + 1) % samples.count] {
                    #expect(try node.ok("unprotect \(envelope)") == plaintext)
                }
            }
            let rows = try await TestDatabase.admin(fleet.configuration) { connection in
                try await connection.query("SELECT count(*) FROM identity_key_accounts", logger: TestDatabase.logger).collect().first!.decode(Int.self)
            }
            #expect(rows == 3)
        }
    }
}
