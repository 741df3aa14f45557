import Foundation
@testable import IdentityPolicy
import IdentityProtection
import IdentityRuntime
import Testing

private let newcomer: Identity = "newcomer@contoso.com"
/// An account of a domain no policy covers.
private let olga: Identity = "olga@northwind.com"
private let contoso: TenantID = "contoso.com"
/// An account of fabrikam the manager does not know.
private let gina: Identity = "gina@fabrikam.com"

/// Waits for `semaphore` without holding a cooperative thread.
private func waitOffPool(_ semaphore: DispatchSemaphore) async {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { semaphore.wait(); continuation.resume() }
    }
}

/// Runs `body` in a task and blocks the calling (GCD) thread until it returns.
private func blockingRun<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let result = LockedValue<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        let value = await body()
        result.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLock { $0! }
}

private func describe(_ body: () throws -> Void) -> String {
    do {
        try body()
        return "ok"
    } catch {
        return describe(error)
    }
}

private func describeAsync(_ body: () async throws -> Void) async -> String {
    do {
        try await body()
        return "ok"
    } catch {
        return describe(error)
    }
}

/// A refusal as the tests compare it: `blocked NAME REASON`, `admission CAUSE`, or the error's description.
private func describe(_ error: any Error) -> String {
    switch error {
    case let ProtectionError.accountBlocked(identity, reason): "blocked \(identity.name) \(reason)"
    case let error as AdmissionError: "admission \(error.cause)"
    default: "\(error)"
    }
}

/// The owners of files under the fixture's root whose tenant is `tenant`.
private func tenantOwners(_ f: IsolationFixture, _ tenant: TenantID) throws -> Set<Identity> {
    try f.files.ownersUnderRoots().filter { !$0.isUnmanaged && f.manager.tenant(for: $0) == tenant }
}

/// A key store whose first asynchronous fetch of `gated`'s current key waits for ``release()``: an
/// asynchronous write of that account whose first round passed its check and deferred its key.
private final class DeferringKeyStore: KeyStore {
    let inner: FileKeyStore
    let gated: Identity
    let reached = DispatchSemaphore(value: 0)
    private let gate = DispatchSemaphore(value: 0)
    private let first = LockedValue(true)

    init(_ inner: FileKeyStore, gated: Identity) {
        self.inner = inner
        self.gated = gated
    }

    func release() { gate.signal() }

    func currentKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        guard identity == gated else { return try inner.currentKey(for: identity) }
        return try StoreBridge.wait(
            for: "deferring:\(identity.name)", operation: "current key", timeout: .seconds(60),
            timedOut: ProtectionError.keyStoreUnavailable(reason: "timed out")
        ) { () async throws(ProtectionError) -> ProtectionKey in
            if self.first.withLock({ let was = $0; $0 = false; return was }) {
                self.reached.signal()
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().async { self.gate.wait(); continuation.resume() }
                }
            }
            return try self.inner.currentKey(for: identity)
        }
    }

    func key(withID id: ProtectionKeyID, for identity: Identity) throws(ProtectionError) -> ProtectionKey {
        try inner.key(withID: id, for: identity)
    }

    func rotateKey(for identity: Identity) throws(ProtectionError) -> ProtectionKey { try inner.rotateKey(for: identity) }
    func destroyKeys(for identity: Identity) throws(ProtectionError) { try inner.destroyKeys(for: identity) }
}

@Suite("Attacks on a tenant's wipe", .exclusiveProcessIdentity)
struct TenantWipeAttackTests {
    // MARK: Tenant changes during the wipe

    @Test("an account registered into the tenant during its wipe is refused, and its files are wiped")
    func registeredIntoTheTenantDuringTheWipe() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        let olgaPath = try f.write("olga.txt", as: olga, "olga, before she joined contoso")
        let seen = LockedValue<[String]>([])
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            // After the search: olga was of northwind then.
            guard account == alice else { return false }
            f.manager.registerAccount(olga, tenantID: contoso)
            seen.withLock { $0.append("reason \(f.manager.blockReason(for: olga))") }
            seen.withLock { $0.append(describe { _ = try f.write("olga-during.txt", as: olga, "during") }) }
            return false
        })
        let report = await f.manager.wipeData(forTenant: contoso)

        #expect(seen.withLock { $0 } == ["reason wiped", "blocked olga@northwind.com 102"])
        #expect(report.isComplete)
        #expect(f.manager.tenant(for: olga) == contoso)
        // The report says the tenant is wiped, yet a file of an account of the tenant remains.
        let remaining = try tenantOwners(f, contoso)
        #expect(remaining.isEmpty, "files of contoso accounts remain: \(remaining)")
        #expect(!FileManager.default.fileExists(atPath: olgaPath))
    }

    @Test("an account registered out of the tenant during its wipe is not blocked by it")
    func registeredOutOfTheTenantDuringTheWipe() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        let seen = LockedValue<[String]>([])
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            guard account == alice else { return false }
            seen.withLock { $0.append("before \(f.manager.blockReason(for: newcomer))") }
            f.manager.registerAccount(newcomer, tenantID: "fabrikam.com")
            seen.withLock { $0.append("after \(f.manager.blockReason(for: newcomer))") }
            seen.withLock { $0.append(describe { _ = try f.write("newcomer.txt", as: newcomer, "x") }) }
            return false
        })
        _ = await f.manager.wipeData(forTenant: contoso)
        #expect(seen.withLock { $0 } == ["before wiped", "after notBlocked", "ok"])
        #expect(FileManager.default.fileExists(atPath: f.root + "/newcomer.txt"))
        #expect(f.manager.blockReason(for: newcomer) == .notBlocked)
    }

    // MARK: Directory owners

    @Test("a directory owned by an account of the tenant (no files): the tenant's wipe finds the account and clears the owner")
    func directoryOwnerOfTheTenantIsCleared() async throws {
        let f = try IsolationFixture()
        let directory = f.root + "/inbox"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try f.files.protectDirectory(atPath: directory, owner: newcomer)
        _ = try f.write("alice.txt", as: alice, "alice")

        let report = await f.manager.wipeData(forTenant: contoso)
        #expect(report.isComplete)
        #expect(report.accounts.map(\.account).contains(newcomer))
        #expect(try f.files.ownerOfDirectory(atPath: directory) == nil)
        // Files created there afterwards without a thread identity are not the wiped account's.
        try IdentityContext.withThreadIdentity(nil) { () throws(ProtectionError) in
            try f.files.writeFile(atPath: directory + "/note.txt", contents: Data("later".utf8))
        }
        #expect(try f.files.protectionInfo(atPath: directory + "/note.txt")?.owner != newcomer)
    }

    // MARK: Write APIs during the wipe

    @Test("every creation API refuses an account of the tenant the wipe did not find, while it runs")
    func everyCreationAPIDuringTheWipe() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        let plain = try f.write("plain.txt", as: nil, "unowned")
        let seen = LockedValue<[String: String]>([:])
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            guard account == alice else { return false }
            func note(_ name: String, _ outcome: String) { seen.withLock { $0[name] = outcome } }
            note("writeFile", describe { _ = try f.write("n1.txt", as: newcomer, "x") })
            note("encryptFile", describe { try f.files.encryptFile(atPath: plain, owner: newcomer) })
            note("protect(atPath:owner:)", describe { try f.files.protect(atPath: plain, owner: newcomer) })
            note("openProtectedFile", describe {
                let file = try f.files.openProtectedFile(atPath: f.root + "/n2.txt", options: [.create, .write], owner: newcomer)
                try file.close()
            })
            note("openFile", describe {
                try IdentityContext.withThreadIdentity(newcomer) { () throws(ProtectionError) in
                    _ = try f.files.openFile(atPath: f.root + "/n3.txt", options: [.create, .write])
                }
            })
            note("protect(toPath:)", describe { try f.files.protect(atPath: plain, toPath: f.root + "/n4.idps", owner: newcomer) })
            note("data.protect", describe { _ = try f.data.protect(Data("x".utf8), owner: newcomer) })
            note("protectDirectory", describe {
                try FileManager.default.createDirectory(atPath: f.root + "/d", withIntermediateDirectories: true)
                try f.files.protectDirectory(atPath: f.root + "/d", owner: newcomer)
            })
            note("async writeFile", blockingRun {
                await describeAsync {
                    try await IdentityContext.withThreadIdentity(newcomer) {
                        try await f.files.async.writeFile(atPath: f.root + "/n5.txt", contents: Data("x".utf8))
                    }
                }
            })
            note("async encryptFile", blockingRun {
                await describeAsync { try await f.files.async.encryptFile(atPath: plain, owner: newcomer) }
            })
            note("async data.protect", blockingRun {
                await describeAsync { _ = try await f.data.async.protect(Data("x".utf8), owner: newcomer) }
            })
            note("unmanaged writeFile", describe { _ = try f.write("u.txt", as: .unmanaged, "x") })
            note("carol writeFile", describe { _ = try f.write("c.txt", as: carol, "x") })
            return false
        })
        _ = await f.manager.wipeData(forTenant: contoso)
        let blocked = "blocked newcomer@contoso.com 102"
        let outcomes = seen.withLock { $0 }
        for name in ["writeFile", "encryptFile", "protect(atPath:owner:)", "openProtectedFile", "openFile", "protect(toPath:)",
                     "data.protect", "protectDirectory", "async writeFile", "async encryptFile", "async data.protect"] {
            #expect(outcomes[name] == blocked, "\(name): \(outcomes[name] ?? "not run")")
        }
        #expect(outcomes["unmanaged writeFile"] == "ok")
        #expect(outcomes["carol writeFile"] == "ok")
        #expect(try tenantOwners(f, contoso).isEmpty)
        #expect(try f.files.ownerOfDirectory(atPath: f.root + "/d") == nil)
    }

    @Test("an asynchronous write whose first round deferred its key when the wipe starts: waited for, nothing left")
    func asyncWriteDeferredAcrossTheWipeStart() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let keys = DeferringKeyStore(try FileKeyStore(atPath: directory.file("keys")), gated: newcomer)
        let manager = PolicyManager(policySource: StaticPolicySource(tenants: ["contoso.com": ownedPolicy("contoso")]))
        let files = try FileProtectionManager(roots: [root], keyStore: keys, policy: manager, stateDirectory: directory.file("state"))
        manager.fileProtection = files
        try IdentityContext.withThreadIdentity(alice) { () throws(ProtectionError) in
            try files.writeFile(atPath: root + "/alice.txt", contents: Data("alice".utf8))
        }
        let writer = Task.detached {
            await describeAsync {
                try await IdentityContext.withThreadIdentity(newcomer) {
                    try await files.async.writeFile(atPath: root + "/newcomer.txt", contents: Data("deferred".utf8))
                }
            }
        }
        await waitOffPool(keys.reached)
        manager.delegate = ClosureDelegate(onWipe: { account in
            if account == alice { keys.release() }
            return false
        })
        let report = await manager.wipeData(forTenant: contoso)
        let outcome = await writer.value
        #expect(report.isComplete)
        #expect(report.accounts.map(\.account) == [alice, newcomer])
        #expect(outcome == "blocked newcomer@contoso.com 102")
        #expect(!FileManager.default.fileExists(atPath: root + "/newcomer.txt"), "write: \(outcome)")
        #expect(try files.ownersUnderRoots().isEmpty)
    }

    @Test("a ProtectedFile opened before the wipe by an account the search finds stops, and its file goes")
    func handleOpenedBeforeTheWipe() async throws {
        let f = try IsolationFixture()
        let path = f.root + "/handle.txt"
        let file = try IdentityContext.withThreadIdentity(newcomer) { () throws(ProtectionError) in
            try f.files.openProtectedFile(atPath: path, options: [.create, .write, .read], owner: newcomer)
        }
        try IdentityContext.withThreadIdentity(newcomer) { () throws(ProtectionError) in try file.write(Data("before".utf8)) }
        let during = LockedValue<String>("")
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            if account == newcomer {
                during.withLock { $0 = describe { try IdentityContext.withThreadIdentity(newcomer) { () throws(ProtectionError) in try file.write(Data("during".utf8)) } } }
            }
            return false
        })
        let report = await f.manager.wipeData(forTenant: contoso)
        #expect(report.accounts.map(\.account) == [newcomer])
        #expect(during.withLock { $0 } != "ok")
        #expect(describe { try IdentityContext.withThreadIdentity(newcomer) { () throws(ProtectionError) in try file.write(Data("after".utf8)) } } != "ok")
        try? file.close()
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    // MARK: Overlapping wipes

    @Test("two overlapping wipes of a tenant, a wipe of another tenant and an account wipe")
    func overlappingWipes() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        let carolPath = try f.write("carol.txt", as: carol, "carol")
        let davePath = try f.write("dave.txt", as: dave, "dave")
        let firstInside = DispatchSemaphore(value: 0)
        let releaseFirst = DispatchSemaphore(value: 0)
        let aliceCalls = LockedValue(0)
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            if account == alice, aliceCalls.withLock({ $0 += 1; return $0 }) == 1 {
                firstInside.signal()
                releaseFirst.wait()
            }
            return false
        })
        let first = Task.detached { await f.manager.wipeData(forTenant: contoso) }
        await waitOffPool(firstInside)
        #expect(f.manager.blockReason(for: newcomer) == .wiped)

        let second = await f.manager.wipeData(forTenant: contoso)
        #expect(second.accounts.map(\.account) == [alice])
        #expect(f.manager.blockReason(for: newcomer) == .wiped, "the first wipe still runs")
        #expect(f.manager.blockReason(for: gina) == .notBlocked)

        let fabrikam = await f.manager.wipeData(forTenant: "fabrikam.com")
        #expect(fabrikam.accounts.map(\.account).contains(carol))
        #expect(!FileManager.default.fileExists(atPath: carolPath))
        #expect(f.manager.blockReason(for: gina) == .notBlocked, "fabrikam's wipe ended")
        #expect(f.manager.blockReason(for: newcomer) == .wiped)

        let daveReport = await f.manager.wipeData(forAccount: dave)
        #expect(daveReport.isComplete)
        #expect(!FileManager.default.fileExists(atPath: davePath))
        #expect(f.manager.blockReason(for: .unmanaged) == .notBlocked)
        #expect(f.manager.blockReason(for: frank) == .notBlocked)
        #expect(describe { _ = try f.write("frank.txt", as: frank, "frank") } == "ok")
        #expect(describe { _ = try f.write("gina.txt", as: gina, "gina") } == "ok")

        releaseFirst.signal()
        let firstReport = await first.value
        #expect(firstReport.isComplete)
        #expect(f.manager.blockReason(for: newcomer) == .notBlocked)
        #expect(f.manager.blockReason(for: alice) == .wiped)
        #expect(f.manager.blockReason(for: carol) == .wiped)
        #expect(f.manager.blockReason(for: dave) == .wiped)
    }

    // MARK: Events

    @Test("events: the accounts found are announced blocked, one registered meanwhile by the next search; nobody else, nothing unblocked")
    func eventsDuringTheWipe() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        f.manager.registerAccount(bob)
        let events = LockedValue<[PolicyEvent]>([])
        let stream = f.manager.events
        let collector = Task.detached {
            for await event in stream {
                events.withLock { $0.append(event) }
                if case .accountBlocked(frank, _) = event { return }
            }
        }
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            guard account == alice else { return false }
            _ = describe { _ = try f.write("n.txt", as: newcomer, "x") }
            _ = describe { _ = try f.manager.admitWithoutWaiting(newcomer) }
            f.manager.registerAccount("late@contoso.com")
            _ = f.manager.blockReason(for: newcomer)
            return false
        })
        _ = await f.manager.wipeData(forTenant: contoso)
        f.manager.blockAccount(frank, reason: .clockedOut)
        await collector.value
        let all = events.withLock { $0 }
        var blocked: [String] = []
        var unblocked: [String] = []
        var completed: [String] = []
        for event in all {
            switch event {
            case let .accountBlocked(account, reason): blocked.append("\(account.name) \(reason)")
            case let .accountUnblocked(account): unblocked.append(account.name)
            case let .wipeDidComplete(account): completed.append(account.name)
            default: break
            }
        }
        #expect(blocked == ["alice@contoso.com wiped", "bob@contoso.com wiped", "late@contoso.com wiped", "frank@northwind.example clockedOut"])
        #expect(unblocked.isEmpty)
        #expect(completed == ["alice@contoso.com", "bob@contoso.com", "late@contoso.com"])
    }

    @Test("an account's own block lifted during its tenant's wipe is announced; the tenant's block still refuses it until the wipe returns")
    func unblockedEventDuringTheWipe() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        f.manager.blockAccount(newcomer, reason: .clockedOut)
        let seen = LockedValue<[String]>([])
        let stream = f.manager.events
        let collector = Task.detached {
            for await event in stream {
                if case let .accountUnblocked(account) = event, account == newcomer { return }
            }
        }
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            guard account == alice else { return false }
            f.manager.unblockAccount(newcomer, reason: .clockedOut)
            seen.withLock { $0.append("reason \(f.manager.blockReason(for: newcomer))") }
            seen.withLock { $0.append(describe { _ = try f.write("n.txt", as: newcomer, "x") }) }
            return false
        })
        _ = await f.manager.wipeData(forTenant: contoso)
        await collector.value
        #expect(seen.withLock { $0 } == ["reason wiped", "blocked newcomer@contoso.com 102"])
        #expect(f.manager.blockReason(for: newcomer) == .notBlocked)
    }

    @Test("blockedAccounts agrees with blockReason during the wipe for a known account of the tenant")
    func blockedAccountsDuringTheWipe() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        let seen = LockedValue<[String]>([])
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            guard account == alice else { return false }
            f.manager.registerAccount("late@contoso.com")
            seen.withLock { $0.append("reason \(f.manager.blockReason(for: "late@contoso.com"))") }
            seen.withLock { $0.append("listed \(f.manager.blockedAccounts.contains("late@contoso.com"))") }
            return false
        })
        _ = await f.manager.wipeData(forTenant: contoso)
        #expect(seen.withLock { $0 } == ["reason wiped", "listed true"])
    }

    // MARK: Admission and switches

    @Test("admission: refused during the wipe, also one whose checks were running when it started; others admitted")
    func admissionDuringTheWipe() async throws {
        let f = try IsolationFixture()
        _ = try f.write("alice.txt", as: alice, "alice")
        let checkReached = DispatchSemaphore(value: 0)
        let checkGate = DispatchSemaphore(value: 0)
        f.manager.registerAdmissionCheck(ClosureAdmissionCheck { account, _ in
            if account == newcomer {
                checkReached.signal()
                await waitOffPool(checkGate)
            }
            return .admit
        })
        let ran = LockedValue(false)
        let early = Task.detached {
            await describeAsync {
                try await f.manager.withAdmittedIdentity(newcomer, reason: "early") {
                    ran.withLock { $0 = true }
                    _ = try f.write("early.txt", as: newcomer, "x")
                }
            }
        }
        await waitOffPool(checkReached)
        let seen = LockedValue<[String]>([])
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            guard account == alice else { return false }
            checkGate.signal()
            seen.withLock { $0.append("early " + blockingRun { await early.value }) }
            seen.withLock { $0.append("async " + blockingRun {
                await describeAsync { try await f.manager.withAdmittedIdentity(newcomer, reason: "during") {} }
            }) }
            seen.withLock { $0.append("now " + describe { _ = try f.manager.admitWithoutWaiting(newcomer) }) }
            seen.withLock { $0.append("carol " + blockingRun {
                await describeAsync { try await f.manager.withAdmittedIdentity(carol, reason: "during") {} }
            }) }
            seen.withLock { $0.append("unmanaged " + describe { _ = try f.manager.admitWithoutWaiting(.unmanaged) }) }
            seen.withLock { $0.append("switch " + "\(blockingRun { await switchUI(f.manager, newcomer) })") }
            return false
        })
        _ = await f.manager.wipeData(forTenant: contoso)
        let blocked = "admission \(AdmissionError.Cause.blocked(.wiped))"
        #expect(seen.withLock { $0 } == [
            "early " + blocked, "async " + blocked, "now " + blocked, "carol ok", "unmanaged ok",
            "switch \(SwitchIdentityResult.notAllowed)",
        ])
        #expect(!ran.withLock { $0 })
        #expect(!FileManager.default.fileExists(atPath: f.root + "/early.txt"))
        // After the wipe the newcomer is served again.
        #expect(await describeAsync { try await f.manager.withAdmittedIdentity(newcomer, reason: "after") {} } == "ok")
    }

    // MARK: Cancellation

    @Test("a tenant's wipe awaited from a cancelled task runs to its end, and the tenant's block ends")
    func wipeFromACancelledTask() async throws {
        let f = try IsolationFixture()
        let alicePath = try f.write("alice.txt", as: alice, "alice")
        let during = LockedValue<String>("")
        f.manager.delegate = ClosureDelegate(onWipe: { account in
            if account == alice { during.withLock { $0 = "\(f.manager.blockReason(for: newcomer))" } }
            return false
        })
        let task = Task.detached { () -> TenantWipeReport in
            withUnsafeCurrentTask { $0?.cancel() }
            return await f.manager.wipeData(forTenant: contoso)
        }
        let report = await task.value
        #expect(report.isComplete)
        #expect(report.accounts.map(\.account) == [alice])
        #expect(during.withLock { $0 } == "wiped")
        #expect(!FileManager.default.fileExists(atPath: alicePath))
        #expect(f.manager.blockReason(for: newcomer) == .notBlocked)
        #expect(f.manager.blockReason(for: alice) == .wiped)
    }

    // MARK: Many writers

    @Test("many threads write as accounts of the tenant while it is wiped: none of its files remains, fabrikam untouched")
    func manyWritersDuringTheWipe() async throws {
        let f = try IsolationFixture()
        let known: [Identity] = (0..<3).map { Identity("known\($0)@contoso.com") }
        for account in known { f.manager.registerAccount(account) }
        let viaID: Identity = "guest@partner.example"
        f.manager.registerAccount(viaID, tenantID: contoso)
        let strangers: [Identity] = (0..<6).map { Identity("stranger\($0)@contoso.com") }
        let writers = known + strangers + [viaID, alice, bob]
        // Some of them have files before the wipe; some do not.
        for (index, account) in writers.enumerated() where index.isMultiple(of: 2) {
            _ = try f.write("pre-\(index).txt", as: account, "before")
        }
        var others: [String: Data] = [:]
        for (index, account) in [carol, erin, frank, Identity.unmanaged].enumerated() {
            let path = try f.write("other-\(index).txt", as: account, "other \(index)")
            others[path] = FileManager.default.contents(atPath: path)
        }
        let stop = LockedValue(false)
        let started = LockedValue(0)
        let stoppedWriters = DispatchSemaphore(value: 0)
        let attemptsDuring = LockedValue(0)
        let markSeen = LockedValue(false)
        let carolWrites = LockedValue<[String: String]>([:])
        let threadCount = 4
        for thread in 0..<threadCount {
            Thread {
                var generator = SystemRandomNumberGenerator()
                var counter = 0
                started.withLock { $0 += 1 }
                while !stop.withLock({ $0 }) {
                    counter += 1
                    let during = markSeen.withLock { $0 }
                    if counter.isMultiple(of: 5) {
                        let name = "carol-\(thread)-\(counter).txt"
                        if (try? f.write(name, as: carol, name)) != nil { carolWrites.withLock { $0[f.root + "/" + name] = name } }
                    } else {
                        let account = writers.randomElement(using: &generator)!
                        _ = try? f.write("w-\(thread)-\(counter).txt", as: account, "racing")
                    }
                    if during { attemptsDuring.withLock { $0 += 1 } }
                }
                stoppedWriters.signal()
            }.start()
        }
        while started.withLock({ $0 }) < threadCount { await Task.yield() }
        // Writers stop once the files are removed and before the tenant's block ends (wipeDidComplete is
        // posted synchronously on the wipe's thread before wipeData returns).
        let stopOnce = LockedValue(false)
        let observer = f.manager.notificationCenter.addObserver(forName: .wipeDidComplete, object: nil, queue: nil) { _ in
            guard stopOnce.withLock({ let was = $0; $0 = true; return !was }) else { return }
            stop.withLock { $0 = true }
            for _ in 0..<threadCount { stoppedWriters.wait() }
        }
        defer { f.manager.notificationCenter.removeObserver(observer) }
        f.manager.delegate = ClosureDelegate(onWipe: { _ in
            // The first call: the tenant is marked. Let the writers try a while during it.
            if !markSeen.withLock({ let was = $0; $0 = true; return was }) {
                while attemptsDuring.withLock({ $0 }) < 200 { usleep(500) }
            }
            return false
        })
        let report = await f.manager.wipeData(forTenant: contoso)
        #expect(stop.withLock { $0 })
        let remaining = try tenantOwners(f, contoso)
        #expect(remaining.isEmpty, "files of contoso accounts remain: \(remaining.sorted { $0.name < $1.name })")
        #expect(report.leftovers.isEmpty)
        for (path, bytes) in others {
            #expect(FileManager.default.contents(atPath: path) == bytes, "\(path) changed")
        }
        for (path, text) in carolWrites.withLock({ $0 }) {
            #expect(FileManager.default.contents(atPath: path) != nil, "\(path) gone")
            #expect(try f.files.protectionInfo(atPath: path)?.owner == carol)
            _ = text
        }
    }
}
