import IdentityRuntime
import Testing

/// Runs a test (or every test of a suite) with a thread identity, as if it were wrapped in
/// `IdentityContext.withThreadIdentity(_:)`: its tasks inherit it, wrapped submissions capture it.
///
/// ```swift
/// @Test(.threadIdentity("alice@contoso.com"))
/// func uploadsAsAlice() async { ... }
/// ```
public struct ThreadIdentityTrait: TestTrait, SuiteTrait, TestScoping {
    /// The thread identity each test runs under (`nil`: none).
    public let identity: Identity?

    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await IdentityContext.withThreadIdentity(identity) {
            try await function()
        }
    }
}

extension Trait where Self == ThreadIdentityTrait {
    /// Runs the test with `identity` as its thread identity.
    public static func threadIdentity(_ identity: Identity?) -> Self {
        ThreadIdentityTrait(identity: identity)
    }
}

/// Runs a test with strict mode on for the units it submits, and records as a test issue every strict-mode
/// report about a unit submitted from the test's own source file while it runs.
///
/// Reports are told apart by submit site because other tests run in parallel: units the test submits
/// through helpers in other files are checked but not attributed to it.
public struct StrictModeTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let reports = LockedValue<[RuntimeIssue]>([])
        let file = test.sourceLocation.fileID
        let token = RuntimeIssues.addObserver { issue in
            if issue.site?.fileID.description == file {
                reports.withLock { $0.append(issue) }
            }
        }
        defer { RuntimeIssues.removeObserver(token) }
        try await IdentityStrictMode.checking {
            try await function()
        }
        for issue in reports.withLock({ $0 }) {
            Issue.record("identity strict mode: \(issue)")
        }
    }
}

extension Trait where Self == StrictModeTrait {
    /// Runs the test under identity strict mode; every report fails the test.
    public static var identityStrictMode: Self { StrictModeTrait() }
}

/// Runs a test (or every test of a suite, one at a time) with exclusive use of the process identity.
///
/// `IdentityContext.processIdentity` is process-wide: a test that sets it changes what "no identity" means
/// for every test running in parallel (the effective file identity of code with no thread identity falls
/// through to it). Give this trait to the tests that set it and to the tests whose outcome depends on code
/// running with no identity at all; they then never overlap.
///
/// ```swift
/// @Suite(.exclusiveProcessIdentity) struct ResolutionTests { ... }
/// ```
public struct ProcessIdentityTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // The scope is entered for the suite, the test function and each test case: hold the gate per case.
        guard testCase != nil else { return try await function() }
        await ProcessIdentityGate.shared.acquire()
        do {
            try await function()
        } catch {
            await ProcessIdentityGate.shared.release()
            throw error
        }
        await ProcessIdentityGate.shared.release()
    }
}

extension Trait where Self == ProcessIdentityTrait {
    /// Exclusive use of the process identity for the test (see ``ProcessIdentityTrait``).
    public static var exclusiveProcessIdentity: Self { ProcessIdentityTrait() }
}

/// A first-come, first-served gate for ``ProcessIdentityTrait``.
actor ProcessIdentityGate {
    static let shared = ProcessIdentityGate()
    private var held = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        guard held else {
            held = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if waiters.isEmpty {
            held = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}
