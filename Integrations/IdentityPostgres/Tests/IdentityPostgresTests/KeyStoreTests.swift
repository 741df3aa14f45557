import Foundation
import IdentityPostgres
import IdentityProtection
import IdentityRuntime
import PostgresNIO
import NIOConcurrencyHelpers
import Testing

extension FleetTests {
    @Suite("PostgresKeyStore and the schema")
    struct KeyStoreTests {
        /// Two instances (separate fleets: separate connections) on a fresh database.
        struct Pair {
            let configuration: PostgresFleetConfiguration
            let keks: StaticKeyEncryptionKeys
            let fleetA: PostgresFleet
            let fleetB: PostgresFleet
            let a: PostgresKeyStore
            let b: PostgresKeyStore

            init(_ adjust: (inout PostgresFleetConfiguration) -> Void = { _ in }) async throws {
                var configuration = try await TestDatabase.make()
                adjust(&configuration)
                self.configuration = configuration
                keks = try StaticKeyEncryptionKeys(text: TestDatabase.makeKEKText())
                fleetA = PostgresFleet(configuration: configuration)
                fleetB = PostgresFleet(configuration: configuration)
                try await fleetA.waitUntilReady(timeout: 20)
                try await fleetB.waitUntilReady(timeout: 20)
                a = PostgresKeyStore(fleet: fleetA, keyEncryptionKeys: keks)
                b = PostgresKeyStore(fleet: fleetB, keyEncryptionKeys: keks)
            }

            func shutdown() {
                fleetA.shutdown()
                fleetB.shutdown()
            }
        }

        @Test("migrations: instances starting together apply each migration once; starting again changes nothing")
        func migrations() async throws {
            let configuration = try await TestDatabase.make()
            let fleets = (0..<4).map { _ in PostgresFleet(configuration: configuration) }
            await withTaskGroup(of: Void.self) { group in
                for fleet in fleets {
                    group.addTask { await #expect(throws: Never.self) { try await fleet.waitUntilReady(timeout: 20) } }
                }
            }
            fleets.forEach { $0.shutdown() }
            let again = PostgresFleet(configuration: configuration)
            try await again.waitUntilReady(timeout: 20)
            again.shutdown()
            let versions = try await TestDatabase.admin(configuration) { connection in
                var versions: [Int] = []
                for try await version in try await connection.query("SELECT version FROM identity_schema_migrations", logger: TestDatabase.logger).decode(Int.self) {
                    versions.append(version)
                }
                return versions
            }
            #expect(versions == [1])
        }

        @Test("the first key is created once when instances race for it; both get the same key")
        func firstKeyRace() async throws {
            let pair = try await Pair()
            defer { pair.shutdown() }
            let account = Identity("Race@Contoso.com")
            let ids = NIOLockedValueBox<Set<String>>([])
            DispatchQueue.concurrentPerform(iterations: 16) { index in
                let store = index % 2 == 0 ? pair.a : pair.b
                if let key = try? store.currentKey(for: account) { ids.withLockedValue { _ = $0.insert(key.id.description) } }
            }
            #expect(ids.withLockedValue { $0.count } == 1)
            #expect(try pair.b.currentKey(for: Identity("race@contoso.com")) == pair.a.currentKey(for: account))
            #expect(throws: ProtectionError.self) { try pair.a.currentKey(for: .unmanaged) }
        }

        @Test("rotation in one instance is seen by the other within 1 s; old keys stay readable; one current key")
        func rotation() async throws {
            let pair = try await Pair()
            defer { pair.shutdown() }
            let account = Identity("rotate@contoso.com")
            // The key store is under test, not access: the managers read from no identity.
            let policy = StaticManagedIdentityPolicy(managed: [account], dataIsolation: false)
            let managerA = DataProtectionManager(keyStore: pair.a, policy: policy)
            let managerB = DataProtectionManager(keyStore: pair.b, policy: policy)
            let old = try managerA.protect(Data("before".utf8), owner: account)
            let first = try pair.b.currentKey(for: account)
            let rotated = try pair.a.rotateKey(for: account)
            #expect(rotated.id != first.id)
            #expect(TestDatabase.eventually(within: 1) { (try? pair.b.currentKey(for: account).id) == rotated.id })
            let new = try managerB.protect(Data("after".utf8), owner: account)
            #expect(try managerA.unprotect(new) == Data("after".utf8))
            #expect(try managerB.unprotect(old) == Data("before".utf8))
            #expect(try managerB.protectionInfo(new)?.keyID == rotated.id)
            let (accounts, keys) = try await TestDatabase.admin(pair.configuration) { connection in
                let accounts = try await connection.query("SELECT count(*) FROM identity_key_accounts", logger: TestDatabase.logger).collect().first!.decode(Int.self)
                let keys = try await connection.query("SELECT count(*) FROM identity_keys", logger: TestDatabase.logger).collect().first!.decode(Int.self)
                return (accounts, keys)
            }
            #expect(accounts == 1)
            #expect(keys == 2)
        }

        @Test("destroyKeys in one instance: the other cannot decrypt within 1 s (103), and the rows are gone")
        func shredding() async throws {
            let pair = try await Pair()
            defer { pair.shutdown() }
            let account = Identity("wipe@contoso.com")
            let policy = StaticManagedIdentityPolicy(managed: [account], dataIsolation: false)
            let managerA = DataProtectionManager(keyStore: pair.a, policy: policy)
            let managerB = DataProtectionManager(keyStore: pair.b, policy: policy)
            let envelope = try managerA.protect(Data("secret".utf8), owner: account)
            try pair.a.rotateKey(for: account)
            let newer = try managerA.protect(Data("secret 2".utf8), owner: account)
            #expect(try managerB.unprotect(envelope) == Data("secret".utf8))
            #expect(try managerB.unprotect(newer) == Data("secret 2".utf8))
            try pair.a.destroyKeys(for: account)
            #expect(TestDatabase.eventually(within: 1) {
                (try? managerB.unprotect(envelope)) == nil && (try? managerB.unprotect(newer)) == nil
            })
            let error = try #require(throws: ProtectionError.self) { try managerB.unprotect(envelope) }
            #expect(error.code == 103)
            #expect((try #require(throws: ProtectionError.self) { try managerA.unprotect(newer) }).code == 103)
            let rows = try await TestDatabase.admin(pair.configuration) { connection in
                try await connection.query("SELECT count(*) FROM identity_keys", logger: TestDatabase.logger).collect().first!.decode(Int.self)
            }
            #expect(rows == 0)
            #expect(pair.b.statistics.invalidations >= 1)
        }

        @Test("no plaintext key bytes in any table (hex, base64 or raw), and a row moved to another account does not unwrap")
        func noPlaintextKeys() async throws {
            let pair = try await Pair()
            defer { pair.shutdown() }
            var materials: [[UInt8]] = []
            for index in 0..<3 {
                let account = Identity("scan\(index)@contoso.com")
                materials.append(try pair.a.currentKey(for: account).material)
                materials.append(try pair.a.rotateKey(for: account).material)
                materials.append(try pair.b.rotateKey(for: account).material)
            }
            let (tableCount, texts, blobs) = try await TestDatabase.admin(pair.configuration) { connection in
                var tables: [String] = []
                for try await name in try await connection.query(
                    "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'", logger: TestDatabase.logger
                ).decode(String.self) { tables.append(name) }
                var texts: [String] = []
                for table in tables {
                    for try await text in try await connection.query(
                        PostgresQuery(unsafeSQL: "SELECT row_to_json(t)::text FROM \(table) t"), logger: TestDatabase.logger
                    ).decode(String.self) { texts.append(text) }
                }
                var blobs: [Data] = []
                for try await (id, wrapped) in try await connection.query(
                    "SELECT key_id, wrapped_key FROM identity_keys", logger: TestDatabase.logger
                ).decode((Data, Data).self) { blobs += [id, wrapped] }
                return (tables.count, texts, blobs)
            }
            #expect(tableCount == 4)
            #expect(blobs.count == 18)
            for material in materials {
                let hex = material.map { String(format: "%02x", $0) }.joined()
                let base64 = Data(material).base64
                for text in texts {
                    #expect(!text.lowercased().contains(hex))
                    #expect(!text.contains(base64))
                }
                for blob in blobs { #expect(!blob.contains(Data(material))) }
            }
            // Moving a wrapped key to another account's row: it no longer unwraps there.
            try await TestDatabase.admin(pair.configuration) { connection in
                _ = try await connection.query("""
                    UPDATE identity_keys SET wrapped_key = (SELECT wrapped_key FROM identity_keys WHERE account = 'scan0@contoso.com' LIMIT 1)
                    WHERE account = 'scan1@contoso.com'
                    """, logger: TestDatabase.logger)
            }
            #expect(TestDatabase.eventually(within: 1) {
                (try? pair.b.currentKey(for: Identity("scan1@contoso.com"))) == nil
            })
            #expect(throws: ProtectionError.authenticationFailed) { try pair.b.currentKey(for: Identity("scan1@contoso.com")) }
        }

        @Test("a slow database: a cache miss times out with 113; cached keys keep working; it recovers")
        func slowDatabase() async throws {
            let pair = try await Pair { $0.queryTimeout = 0.5 }
            defer { pair.shutdown() }
            let cached = Identity("cached@contoso.com")
            let fresh = Identity("fresh@contoso.com")
            _ = try pair.a.currentKey(for: cached)
            // Creating the key notifies every instance, this one too: wait for that, then cache it again.
            #expect(TestDatabase.eventually(within: 2) { pair.a.statistics.invalidations >= 1 })
            let key = try pair.a.currentKey(for: cached)
            let outcome = try await TestDatabase.admin(pair.configuration) { connection in
                _ = try await connection.query("BEGIN", logger: TestDatabase.logger)
                _ = try await connection.query("LOCK TABLE identity_key_accounts IN ACCESS EXCLUSIVE MODE", logger: TestDatabase.logger)
                let result = await withCheckedContinuation { continuation in
                    Thread.detachNewThread {
                        let miss = Result { () throws(ProtectionError) in try pair.a.currentKey(for: fresh) }
                        let hit = Result { () throws(ProtectionError) in try pair.a.currentKey(for: cached) }
                        continuation.resume(returning: (miss, hit))
                    }
                }
                _ = try await connection.query("ROLLBACK", logger: TestDatabase.logger)
                return result
            }
            guard case let .failure(error) = outcome.0 else {
                Issue.record("a query blocked by a lock returned instead of timing out")
                return
            }
            #expect(error.code == 113)
            #expect(error.description.contains("timed out"))
            #expect(try outcome.1.get() == key)
            #expect(TestDatabase.eventually(within: 10) { (try? pair.a.currentKey(for: fresh)) != nil })
        }

        @Test("in-process concurrency: 8 threads over two instances rotating, protecting, unprotecting, dropping caches")
        func concurrency() async throws {
            let pair = try await Pair()
            defer { pair.shutdown() }
            let accounts = (0..<4).map { Identity("c\($0)@contoso.com") }
            let policy = StaticManagedIdentityPolicy(managed: Set(accounts), dataIsolation: false)
            let managers = [DataProtectionManager(keyStore: pair.a, policy: policy), DataProtectionManager(keyStore: pair.b, policy: policy)]
            let counts = NIOLockedValueBox((ops: 0, mismatches: 0, errors: [String]()))
            let deadline = Date().addingTimeInterval(3)
            DispatchQueue.concurrentPerform(iterations: 8) { thread in
                var kept: [(Data, Data)] = []
                var operations = 0
                while Date() < deadline {
                    let account = accounts[(thread + operations) % accounts.count]
                    let manager = managers[(thread + operations) % 2]
                    let store = (thread + operations) % 2 == 0 ? pair.a : pair.b
                    do throws(ProtectionError) {
                        switch operations % 11 {
                        case 0: try store.rotateKey(for: account)
                        case 5: store.dropCache()
                        default: break
                        }
                        let plaintext = Data("\(thread)-\(operations)".utf8)
                        let envelope = try manager.protect(plaintext, owner: account)
                        let other = managers[(thread + operations + 1) % 2]
                        if try other.unprotect(envelope) != plaintext { counts.withLockedValue { $0.mismatches += 1 } }
                        if let (old, oldPlaintext) = kept.randomElement(), try manager.unprotect(old) != oldPlaintext {
                            counts.withLockedValue { $0.mismatches += 1 }
                        }
                        if kept.count < 32 { kept.append((envelope, plaintext)) }
                    } catch {
                        counts.withLockedValue { $0.errors.append(error.description) }
                    }
                    operations += 1
                }
                let done = operations
                counts.withLockedValue { $0.ops += done }
            }
            let result = counts.withLockedValue { $0 }
            #expect(result.ops > 50)
            #expect(result.mismatches == 0)
            #expect(result.errors.isEmpty, "\(result.errors.prefix(3))")
        }
    }
}
