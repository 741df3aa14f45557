import Foundation
import IdentityPolicy
import IdentityPostgres
import IdentityProtection
import IdentityRuntime

/// The speed figures: warm-cache protect/unprotect through PostgresKeyStore against FileKeyStore (interleaved
/// rounds in one run), key-fetch latency on a cache miss, and change propagation between two fleet connections
/// (separate connections, so each change travels through the server's NOTIFY as between processes).
struct Bench {
    let configuration: PostgresFleetConfiguration
    let keks: StaticKeyEncryptionKeys
    let quick: Bool

    func run() async throws {
        let fleetA = PostgresFleet(configuration: configuration)
        let fleetB = PostgresFleet(configuration: configuration)
        try await fleetA.waitUntilReady(timeout: 30)
        try await fleetB.waitUntilReady(timeout: 30)
        defer {
            fleetA.shutdown()
            fleetB.shutdown()
        }
        let keysA = PostgresKeyStore(fleet: fleetA, keyEncryptionKeys: keks)
        let keysB = PostgresKeyStore(fleet: fleetB, keyEncryptionKeys: keks)
        let account = Identity("bench-\(UUID().uuidString.prefix(8))@contoso.com")
        _ = try await keysA.currentKey(for: account, deadline: .now + .seconds(5))
        try await warmCache(keys: keysA, account: account)
        try await cacheMiss(keys: keysA, account: account)
        try await keyPropagation(from: keysA, to: keysB, account: account)
        try await policyPropagation(fleetA: fleetA, fleetB: fleetB, account: account)
    }

    private func warmCache(keys: PostgresKeyStore, account: Identity) async throws {
        let directory = NSTemporaryDirectory() + "identity-bench-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fileKeys = try FileKeyStore(atPath: directory)
        let policy = StaticManagedIdentityPolicy(managed: [account], dataIsolation: false)
        let viaFile = DataProtectionManager(keyStore: fileKeys, policy: policy)
        let viaPostgres = DataProtectionManager(keyStore: keys, policy: policy)
        for size in [64, 1024] {
            let payload = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let pairs = quick ? 2_000 : 20_000
            let rounds = quick ? 5 : 15
            func round(_ manager: DataProtectionManager) throws -> Double {
                let start = DispatchTime.now().uptimeNanoseconds
                for _ in 0..<pairs {
                    let envelope = try manager.protect(payload, owner: account)
                    guard try manager.unprotect(envelope) == payload else { fatalError("wrong plaintext") }
                }
                return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(pairs)
            }
            func asyncRound(_ manager: DataProtectionManager) async throws -> Double {
                let start = DispatchTime.now().uptimeNanoseconds
                for _ in 0..<pairs {
                    let envelope = try await manager.async.protect(payload, owner: account)
                    guard try await manager.async.unprotect(envelope) == payload else { fatalError("wrong plaintext") }
                }
                return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(pairs)
            }
            _ = try round(viaFile)
            _ = try round(viaPostgres)
            _ = try await asyncRound(viaPostgres)
            var file: [Double] = []
            var postgres: [Double] = []
            var postgresAsync: [Double] = []
            for index in 0..<rounds {
                // Rotate the order so that no variant always runs at the same place.
                for variant in 0..<3 {
                    switch (variant + index) % 3 {
                    case 0: file.append(try round(viaFile))
                    case 1: postgres.append(try round(viaPostgres))
                    default: postgresAsync.append(try await asyncRound(viaPostgres))
                    }
                }
            }
            let ratios = zip(postgres, file).map { $0 / $1 }.sorted()
            let asyncRatios = zip(postgresAsync, postgres).map { $0 / $1 }.sorted()
            print(String(
                format: "warm cache, %4d-byte payload, protect+unprotect pair: FileKeyStore median %.0f ns (best %.0f), PostgresKeyStore median %.0f ns (best %.0f); ratio of medians %.3f, median of per-round ratios %.3f, ratio of bests %.3f (%d rounds x %d pairs)",
                size, median(file), file.min()!, median(postgres), postgres.min()!, median(postgres) / median(file),
                median(ratios), postgres.min()! / file.min()!, rounds, pairs))
            print(String(
                format: "warm cache, %4d-byte payload, PostgresKeyStore through manager.async: median %.0f ns (best %.0f); against the synchronous path: ratio of medians %.3f, median of per-round ratios %.3f, ratio of bests %.3f",
                size, median(postgresAsync), postgresAsync.min()!, median(postgresAsync) / median(postgres),
                median(asyncRatios), postgresAsync.min()! / postgres.min()!))
        }
    }

    private func cacheMiss(keys: PostgresKeyStore, account: Identity) async throws {
        let key = try await keys.currentKey(for: account, deadline: .now + .seconds(5))
        let count = quick ? 200 : 1_000
        var byID: [Double] = []
        var current: [Double] = []
        for _ in 0..<count {
            keys.dropCache()
            var start = DispatchTime.now().uptimeNanoseconds
            _ = try await keys.key(withID: key.id, for: account, deadline: .now + .seconds(5))
            byID.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            keys.dropCache()
            start = DispatchTime.now().uptimeNanoseconds
            _ = try await keys.currentKey(for: account, deadline: .now + .seconds(5))
            current.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        print(String(format: "key fetch on a cache miss (query + unwrap, awaited), %d each: key(withID:) p50 %.3f ms p99 %.3f ms; currentKey p50 %.3f ms p99 %.3f ms",
                     count, percentile(byID, 0.5), percentile(byID, 0.99), percentile(current, 0.5), percentile(current, 0.99)))
    }

    private func keyPropagation(from a: PostgresKeyStore, to b: PostgresKeyStore, account: Identity) async throws {
        let deadline = { ContinuousClock.now + .seconds(5) }
        let count = quick ? 50 : 200
        var delays: [Double] = []
        for _ in 0..<count {
            _ = try await b.currentKey(for: account, deadline: deadline())  // cached in B
            let key = try await a.rotateKey(for: account, deadline: deadline())
            let committed = DispatchTime.now().uptimeNanoseconds
            let giveUp = committed + 5_000_000_000
            while try await b.currentKey(for: account, deadline: deadline()).id != key.id {
                guard DispatchTime.now().uptimeNanoseconds < giveUp else { throw BenchError.notPropagated("rotation") }
                try await Task.sleep(for: .microseconds(50))
            }
            delays.append(Double(DispatchTime.now().uptimeNanoseconds - committed) / 1e6)
        }
        print(String(format: "rotation seen by another connection's PostgresKeyStore (commit -> currentKey returns the new key), %d: p50 %.2f ms p99 %.2f ms max %.2f ms",
                     count, percentile(delays, 0.5), percentile(delays, 0.99), delays.max()!))
        var wipes: [Double] = []
        let policy = StaticManagedIdentityPolicy(managed: [account], dataIsolation: false)
        let managerB = DataProtectionManager(keyStore: b, policy: policy)
        let managerA = DataProtectionManager(keyStore: a, policy: policy)
        for _ in 0..<(count / 4) {
            let envelope = try await managerA.async.protect(Data("secret".utf8), owner: account)
            _ = try await managerB.async.unprotect(envelope)  // B has the key cached
            try await a.destroyKeys(for: account, deadline: deadline())
            let committed = DispatchTime.now().uptimeNanoseconds
            let giveUp = committed + 5_000_000_000
            while (try? await managerB.async.unprotect(envelope)) != nil {
                guard DispatchTime.now().uptimeNanoseconds < giveUp else { throw BenchError.notPropagated("wipe") }
                try await Task.sleep(for: .microseconds(50))
            }
            wipes.append(Double(DispatchTime.now().uptimeNanoseconds - committed) / 1e6)
        }
        print(String(format: "wipe (destroyKeys) -> another connection can no longer decrypt, %d: p50 %.2f ms p99 %.2f ms max %.2f ms",
                     wipes.count, percentile(wipes, 0.5), percentile(wipes, 0.99), wipes.max()!))
    }

    private func policyPropagation(fleetA: PostgresFleet, fleetB: PostgresFleet, account: Identity) async throws {
        let writer = PostgresPolicySource(fleet: fleetA)
        let reader = PostgresPolicySource(fleet: fleetB)
        let manager = PolicyManager(policySource: reader)
        let name = "bench-\(account.name)"
        let count = quick ? 50 : 200
        var delays: [Double] = []
        for index in 0..<count {
            let encrypted = index % 2 == 0
            try await writer.storeDocument(
                #"{"formatVersion": 1, "account": "\#(account.name)", "fileEncryptionRequired": \#(encrypted)}"#, named: name)
            let committed = DispatchTime.now().uptimeNanoseconds
            let giveUp = committed + 5_000_000_000
            while manager.policy(for: account).isFileEncryptionRequired != encrypted {
                guard DispatchTime.now().uptimeNanoseconds < giveUp else { throw BenchError.notPropagated("policy") }
                try await Task.sleep(for: .microseconds(50))
            }
            delays.append(Double(DispatchTime.now().uptimeNanoseconds - committed) / 1e6)
        }
        try? await writer.deleteDocument(named: name)
        print(String(format: "policy row update seen by another connection's PolicyManager, %d: p50 %.2f ms p99 %.2f ms max %.2f ms",
                     count, percentile(delays, 0.5), percentile(delays, 0.99), delays.max()!))
    }

    enum BenchError: Error {
        case notPropagated(String)
    }
}

func median(_ values: [Double]) -> Double {
    percentile(values, 0.5)
}

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let index = min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded()))
    return sorted[index]
}
