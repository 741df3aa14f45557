import Foundation
import IdentityPostgres
import IdentityProtection
import IdentityRuntime
import Testing

/// The server's data directory and binaries, exported by scripts/with-postgres.sh, to kill and restart it.
enum ServerControl {
    static let environment = ProcessInfo.processInfo.environment
    static var isAvailable: Bool { environment["IDENTITY_PG_DATA"] != nil && environment["IDENTITY_PG_BIN"] != nil }

    /// The postmaster's pid and the pids of the processes it started.
    static func processes() throws -> (postmaster: Int32, children: [Int32]) {
        let data = try #require(environment["IDENTITY_PG_DATA"])
        let pidText = try String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8)
        let postmaster = try #require(pidText.split(separator: "\n").first.flatMap { Int32($0) })
        var children: [Int32] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == postmaster { children.append(pid) }
        }
        return (postmaster, children)
    }

    /// SIGSTOP (`stop: true`) or SIGCONT to the postmaster and every process it started: a database that stops
    /// answering while its sockets stay open (the kernel still accepts connections), then goes on.
    static func freeze(_ stop: Bool, _ pids: (postmaster: Int32, children: [Int32])) {
        for pid in [pids.postmaster] + pids.children { Glibc.kill(pid, stop ? SIGSTOP : SIGCONT) }
    }

    /// SIGKILL to the postmaster and every process it started: a crash, not a shutdown.
    static func kill() throws {
        let data = try #require(environment["IDENTITY_PG_DATA"])
        let (postmaster, children) = try processes()
        Glibc.kill(postmaster, SIGKILL)
        for child in children { Glibc.kill(child, SIGKILL) }
        // Wait until the postmaster is gone or a zombie (its parent may be a reaper that is slow to reap it).
        for _ in 0..<500 where isAlive(postmaster) { usleep(10_000) }
        for child in children { for _ in 0..<500 where isAlive(child) { usleep(10_000) } }
        // A zombie still answers kill(pid, 0), which makes a new postmaster think the old one is running: the
        // lock file of a postmaster known dead is stale, remove it (crash recovery runs all the same).
        try? FileManager.default.removeItem(atPath: data + "/postmaster.pid")
        // So is the lock file of its Unix socket (scripts/with-postgres.sh puts the socket beside the data directory).
        let socketDirectory = (data as NSString).deletingLastPathComponent
        for name in (try? FileManager.default.contentsOfDirectory(atPath: socketDirectory)) ?? [] where name.hasPrefix(".s.PGSQL.") && name.hasSuffix(".lock") {
            try? FileManager.default.removeItem(atPath: socketDirectory + "/" + name)
        }
    }

    /// Whether `pid` exists and is not a zombie.
    static func isAlive(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else {
            return false
        }
        return stat[stat.index(after: close)...].split(separator: " ").first != "Z"
    }

    /// `pg_ctl start` (crash recovery runs first), as the cluster's owner; waits up to 3 minutes, since recovery
    /// on a loaded machine can be slow.
    static func start() throws {
        let data = try #require(environment["IDENTITY_PG_DATA"])
        let bin = try #require(environment["IDENTITY_PG_BIN"])
        let log = environment["IDENTITY_PG_LOG"] ?? "/dev/null"
        let runAs = (environment["IDENTITY_PG_RUNAS"] ?? "").split(separator: " ").map(String.init)
        let command = (runAs + [bin + "/pg_ctl", "-D", data, "-l", log, "-w", "-t", "180", "start"])
            .map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        // system(3) rather than Foundation's Process, whose waitUntilExit was seen to miss this child's exit.
        let status = system(command + " >/dev/null")
        let tail = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").suffix(8).joined(separator: "\n")
        #expect(status == 0, "pg_ctl start failed; server log:\n\(tail)")
    }
}

extension FleetTests {
    @Suite("The database killed and restarted mid-run", .enabled(if: ServerControl.isAvailable, "needs scripts/with-postgres.sh's IDENTITY_PG_DATA to kill the server"))
    struct KillRestartTests {
        @Test("SIGKILL: cached keys work within the grace, misses and writes refuse with 113, never wrong plaintext; after restart nothing is lost")
        func killAndRestart() async throws {
            var configuration = try await TestDatabase.make()
            configuration.connectTimeout = 0.5
            configuration.queryTimeout = 0.5
            configuration.disconnectedGrace = 30
            var strict = configuration
            strict.disconnectedGrace = 1
            let keks = try StaticKeyEncryptionKeys(text: TestDatabase.makeKEKText())
            let fleet = PostgresFleet(configuration: configuration)
            let strictFleet = PostgresFleet(configuration: strict)
            defer {
                fleet.shutdown()
                strictFleet.shutdown()
            }
            try await fleet.waitUntilReady(timeout: 20)
            try await strictFleet.waitUntilReady(timeout: 20)
            let keys = PostgresKeyStore(fleet: fleet, keyEncryptionKeys: keks)
            let strictKeys = PostgresKeyStore(fleet: strictFleet, keyEncryptionKeys: keks)
            let hot = Identity("hot@contoso.com")
            let cold = Identity("cold@contoso.com")
            let policy = StaticManagedIdentityPolicy(managed: [hot, cold], dataIsolation: false)
            let manager = DataProtectionManager(keyStore: keys, policy: policy)
            let strictManager = DataProtectionManager(keyStore: strictKeys, policy: policy)
            var expected: [(Data, Data)] = []
            for index in 0..<5 {
                let plaintext = Data("hot \(index)".utf8)
                expected.append((try manager.protect(plaintext, owner: hot), plaintext))
                let coldText = Data("cold \(index)".utf8)
                expected.append((try manager.protect(coldText, owner: cold), coldText))
                try keys.rotateKey(for: hot)
            }
            let flushes = keys.statistics.flushes
            // This instance's own writes notify it too: let those notifications arrive before caching.
            var invalidations = -1
            while invalidations != keys.statistics.invalidations + strictKeys.statistics.invalidations {
                invalidations = keys.statistics.invalidations + strictKeys.statistics.invalidations
                usleep(300_000)
            }
            keys.dropCache()
            strictKeys.dropCache()
            let hotEnvelope = try manager.protect(Data("hot now".utf8), owner: hot)   // caches hot's current key
            expected.append((hotEnvelope, Data("hot now".utf8)))
            _ = try strictManager.unprotect(hotEnvelope)

            try ServerControl.kill()
            #expect(TestDatabase.eventually(within: 5) { !fleet.status.isListening })

            // Cached: still works, right plaintext. Not cached: 113, never 103 and never wrong plaintext.
            #expect(try manager.unprotect(hotEnvelope) == Data("hot now".utf8))
            let during = try manager.protect(Data("during".utf8), owner: hot)
            expected.append((during, Data("during".utf8)))
            for (envelope, plaintext) in expected {
                do throws(ProtectionError) {
                    #expect(try manager.unprotect(envelope) == plaintext)
                } catch {
                    #expect(error.code == 113, "\(error)")
                }
            }
            #expect((try #require(throws: ProtectionError.self) { try keys.rotateKey(for: hot) }).code == 113)
            #expect((try #require(throws: ProtectionError.self) { try manager.protect(Data("x".utf8), owner: cold) }).code == 113)
            // Past the grace, the cache is not used any more.
            #expect(TestDatabase.eventually(within: 5) {
                (try? strictManager.unprotect(hotEnvelope)) == nil
            })
            #expect((try #require(throws: ProtectionError.self) { try strictManager.unprotect(hotEnvelope) }).code == 113)

            try ServerControl.start()
            #expect(TestDatabase.eventually(within: 30) { (try? keys.rotateKey(for: hot)) != nil })
            #expect(TestDatabase.eventually(within: 10) { fleet.status.isListening && strictFleet.status.isListening })
            #expect(TestDatabase.eventually(within: 30) { (try? strictKeys.rotateKey(for: cold)) != nil })
            #expect(keys.statistics.flushes > flushes)
            // Nothing lost: every envelope made before and during the outage decrypts, on both instances.
            for (envelope, plaintext) in expected {
                #expect(try manager.unprotect(envelope) == plaintext)
                #expect(try strictManager.unprotect(envelope) == plaintext)
            }
        }
    }
}
