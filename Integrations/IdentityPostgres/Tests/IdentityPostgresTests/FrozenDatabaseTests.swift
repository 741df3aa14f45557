import Dispatch
import Foundation
import IdentityPostgres
import IdentityProtection
import IdentityRuntime
import NIOConcurrencyHelpers
import Testing

extension FleetTests {
    @Suite("The database frozen (SIGSTOP), then killed and restarted, under 64 concurrent cache misses", .enabled(if: ServerControl.isAvailable, "needs scripts/with-postgres.sh's IDENTITY_PG_DATA to signal the server"))
    struct FrozenDatabaseTests {
        /// Every identity but `""` is managed and encrypted; no isolation (the test reads every account's data).
        final class EveryAccountManaged: ManagedIdentityPolicy {
            func isManaged(_ identity: Identity) -> Bool { !identity.isUnmanaged }
            func isFileEncryptionRequired(for identity: Identity) -> Bool { !identity.isUnmanaged }
            func refusal(of access: ProtectedDataAccess, to owner: Identity) -> ProtectionError? { nil }
        }

        /// How late a task on the global executor wakes from a 10 ms sleep, by phase. The sleep asks for 1 ms of
        /// tolerance: without one, the runtime's timer may coalesce the wake-up with other timers of the process
        /// (seen here: exactly 250 ms, the fleet's maintenance period), which measures timer slack, not threads
        /// held by the runtime.
        final class Heartbeat: Sendable {
            private let state = NIOLockedValueBox<(phase: String, worst: [String: Double], beats: [String: Int], stop: Bool, since: ContinuousClock.Instant, slow: [String])>(("before", [:], [:], false, .now, []))

            func start() -> Task<Void, Never> {
                Task.detached { [self] in
                    while !state.withLockedValue({ $0.stop }) {
                        let target = ContinuousClock.now + .milliseconds(10)
                        try? await Task.sleep(until: target, tolerance: .milliseconds(1), clock: .continuous)
                        let late = target.duration(to: .now)
                        let milliseconds = Double(late.components.seconds) * 1000 + Double(late.components.attoseconds) / 1e15
                        state.withLockedValue { state in
                            state.worst[state.phase] = max(state.worst[state.phase] ?? 0, milliseconds)
                            if milliseconds > 50 { state.slow.append("\(state.phase)+\(state.since.duration(to: target)): \(Int(milliseconds)) ms") }
                            state.beats[state.phase, default: 0] += 1
                        }
                    }
                }
            }

            func enter(_ phase: String) { state.withLockedValue { $0.phase = phase; $0.since = .now } }
            /// The beats more than 50 ms late: phase, time into the phase, lateness.
            var slowBeats: [String] { state.withLockedValue { $0.slow } }
            func stop() { state.withLockedValue { $0.stop = true } }
            func worst(_ phase: String) -> Double { state.withLockedValue { $0.worst[phase] ?? .infinity } }
            func beats(_ phase: String) -> Int { state.withLockedValue { $0.beats[phase] ?? 0 } }
        }

        /// What one protect call did.
        struct Outcome: Sendable {
            var account: Identity
            var plaintext: Data
            var envelope: Data?
            var errorCode: Int?
            var errorText: String?
            var seconds: Double
        }

        /// 64 concurrent `async` protects for fresh accounts (every one a cache miss), each timed.
        static func burst(_ manager: DataProtectionManager, phase: String) async -> [Outcome] {
            await withTaskGroup(of: Outcome.self) { group in
                for index in 0..<64 {
                    group.addTask {
                        let account = Identity("\(phase)-\(index)-\(UUID().uuidString.prefix(8))@contoso.com")
                        let plaintext = Data("\(account.name) secret".utf8)
                        let start = ContinuousClock.now
                        var outcome = Outcome(account: account, plaintext: plaintext, seconds: 0)
                        do throws(ProtectionError) {
                            outcome.envelope = try await manager.async.protect(plaintext, owner: account)
                        } catch {
                            outcome.errorCode = error.code
                            outcome.errorText = error.description
                        }
                        let took = start.duration(to: .now)
                        outcome.seconds = Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
                        return outcome
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }

        /// Whether one call succeeds within `seconds`, tried again after each typed refusal: a server just
        /// thawed or restarted (crash recovery, a pool reconnecting) on a loaded machine may take longer than
        /// one call's deadline to answer its first query. The burst that follows is then judged.
        static func answers(_ manager: DataProtectionManager, within seconds: Double) async -> Bool {
            await eventually(within: seconds) {
                let probe = Identity("probe-\(UUID().uuidString.prefix(8))@contoso.com")
                return (try? await manager.async.protect(Data("probe".utf8), owner: probe)) != nil
            }
        }

        /// Polls `condition` every 10 ms (suspending) until it holds or `seconds` passed.
        static func eventually(within seconds: Double, _ condition: () async -> Bool) async -> Bool {
            let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
            while ContinuousClock.now < deadline {
                if await condition() { return true }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return await condition()
        }

        @Test("the heartbeat stays within 250 ms; calls fail typed by their deadline or succeed; nothing hangs, nothing is wrong or lost")
        func frozenThenKilled() async throws {
            var configuration = try await TestDatabase.make()
            configuration.connectTimeout = 1
            configuration.queryTimeout = 1
            configuration.callTimeout = 1
            let fleet = PostgresFleet(configuration: configuration)
            defer { fleet.shutdown() }
            try await fleet.waitUntilReady(timeout: 20)
            let keys = PostgresKeyStore(fleet: fleet, keyEncryptionKeys: try StaticKeyEncryptionKeys(text: TestDatabase.makeKEKText()))
            let manager = DataProtectionManager(keyStore: keys, policy: EveryAccountManaged())
            let heartbeat = Heartbeat()
            let beating = heartbeat.start()
            var made: [Outcome] = []

            // Before: the database answers; every call succeeds.
            heartbeat.enter("before")
            let before = await Self.burst(manager, phase: "before")
            #expect(before.allSatisfy { $0.envelope != nil }, "\(before.compactMap(\.errorText).prefix(3))")
            made += before

            // Frozen for 5 s: its sockets accept, nothing answers.
            // The server's processes are found first (a walk of /proc, on a GCD thread), then stopped at once.
            let server = try await onDispatchThread { Result { try ServerControl.processes() } }.get()
            heartbeat.enter("frozen")
            ServerControl.freeze(true, server)
            let frozenStart = ContinuousClock.now
            // A synchronous call on a GCD thread meanwhile: it blocks that thread only, and ends typed.
            let gcd = Task.detached {
                await withCheckedContinuation { (continuation: CheckedContinuation<Int?, Never>) in
                    DispatchQueue.global().async {
                        do throws(ProtectionError) {
                            _ = try manager.protect(Data("gcd".utf8), owner: Identity("gcd-\(UUID().uuidString.prefix(8))@contoso.com"))
                            continuation.resume(returning: nil)
                        } catch {
                            continuation.resume(returning: error.code)
                        }
                    }
                }
            }
            let frozen = await Self.burst(manager, phase: "frozen")
            let gcdCode = await gcd.value
            let remaining = frozenStart.duration(to: .now)
            if remaining < .seconds(5) { try await Task.sleep(for: .seconds(5) - remaining) }
            ServerControl.freeze(false, server)
            for outcome in frozen {
                if let code = outcome.errorCode {
                    #expect(code == 113, "\(outcome.errorText ?? "")")
                }
                // Every call ended by its deadline (1 s), with slack for a loaded machine: nothing waited for the thaw.
                #expect(outcome.seconds < 3, "\(outcome.account.name) took \(outcome.seconds) s")
            }
            #expect(frozen.contains { $0.errorCode == 113 })
            #expect(gcdCode == 113 || gcdCode == nil)
            made += frozen

            // After: the same connections recover; every call succeeds again.
            heartbeat.enter("after")
            #expect(await Self.eventually(within: 20) { fleet.status.isConnected && fleet.status.isListening })
            #expect(await Self.answers(manager, within: 20))
            let after = await Self.burst(manager, phase: "after")
            #expect(after.allSatisfy { $0.envelope != nil }, "\(after.compactMap(\.errorText).prefix(3))")
            made += after

            // Killed: typed refusals at once or by the deadline; restarted: everything works again.
            heartbeat.enter("killed")
            try ServerControl.kill()
            let killed = await Self.burst(manager, phase: "killed")
            for outcome in killed {
                if let code = outcome.errorCode { #expect(code == 113, "\(outcome.errorText ?? "")") }
                #expect(outcome.seconds < 3)
            }
            made += killed
            try ServerControl.start()
            heartbeat.enter("restarted")
            #expect(await Self.eventually(within: 30) { fleet.status.isConnected && fleet.status.isListening })
            #expect(await Self.answers(manager, within: 30))
            let restarted = await Self.burst(manager, phase: "restarted")
            #expect(restarted.allSatisfy { $0.envelope != nil }, "\(restarted.compactMap(\.errorText).prefix(3))")
            made += restarted

            // Nothing lost and nothing wrong: every envelope made in any phase decrypts to its plaintext, from
            // the database (the cache dropped first).
            keys.dropCache()
            for outcome in made {
                guard let envelope = outcome.envelope else { continue }
                #expect(try await manager.async.unprotect(envelope) == outcome.plaintext)
            }
            heartbeat.stop()
            await beating.value

            print("frozen-database heartbeat: beats more than 50 ms late: \(heartbeat.slowBeats)")
            let phases = ["before", "frozen", "after", "killed", "restarted"]
            for phase in phases {
                let succeeded = [before, frozen, after, killed, restarted][phases.firstIndex(of: phase)!].filter { $0.envelope != nil }.count
                print("frozen-database heartbeat: \(phase): worst lateness \(String(format: "%.1f", heartbeat.worst(phase))) ms over \(heartbeat.beats(phase)) beats; calls succeeded \(succeeded)/64")
                #expect(heartbeat.worst(phase) <= 250, "heartbeat \(heartbeat.worst(phase)) ms late while \(phase)")
            }
        }
    }
}
