import Synchronization

/// Deliberately broken wrapper behaviour, for proving that the harness and strict mode catch it. Never set
/// outside tests and the harness's self-check.
package enum FaultInjection: UInt8, Sendable, CaseIterable {
    /// No fault.
    case none = 0
    /// Units leave their identity on the worker thread when they end (the restore is skipped).
    case skipRestore = 1
    /// Units capture the identity when they start running instead of at submission.
    case captureAtRun = 2

    private static let current = Atomic<UInt8>(0)

    /// The fault every unit in the process gets (the harness's self-check).
    package static var processWide: FaultInjection {
        get { FaultInjection(rawValue: current.load(ordering: .relaxed)) ?? .none }
        set { current.store(newValue.rawValue, ordering: .relaxed) }
    }

    /// Runs `operation` so that the units it submits get `fault`; the rest of the process is unaffected.
    package static func inject<R, Failure: Error>(
        _ fault: FaultInjection, _ operation: () throws(Failure) -> R
    ) throws(Failure) -> R {
        try DiagnosticsScope.with(fault: fault, operation)
    }
}

/// Strict mode and fault injection limited to the units one piece of code submits: task-locals, read only
/// while some scope is active anywhere (one relaxed atomic load otherwise).
enum DiagnosticsScope {
    @TaskLocal static var strict = false
    @TaskLocal static var fault = FaultInjection.none
    private static let activeScopes = Atomic<Int>(0)

    /// Whether a unit prepared now would get strict checks or a fault: three relaxed loads.
    static var isActive: Bool {
        IdentityStrictMode.isEnabled || FaultInjection.processWide != .none
            || activeScopes.load(ordering: .relaxed) > 0
    }

    /// What a unit prepared now gets: strict checks, and which fault.
    static var current: (strict: Bool, fault: FaultInjection) {
        var strict = IdentityStrictMode.isEnabled
        var fault = FaultInjection.processWide
        if activeScopes.load(ordering: .relaxed) > 0 {
            strict = strict || Self.strict
            if Self.fault != .none { fault = Self.fault }
        }
        return (strict, fault)
    }

    static func with<R, Failure: Error>(
        strict: Bool = false, fault: FaultInjection = .none, _ operation: () throws(Failure) -> R
    ) throws(Failure) -> R {
        activeScopes.add(1, ordering: .relaxed)
        defer { activeScopes.subtract(1, ordering: .relaxed) }
        return try $strict.withValue(strict || Self.strict, typed: { () throws(Failure) -> R in
            try $fault.withValue(fault == .none ? Self.fault : fault, typed: operation)
        })
    }

    static func with<R, Failure: Error>(
        strict: Bool = false, fault: FaultInjection = .none,
        isolation: isolated (any Actor)?, _ operation: () async throws(Failure) -> R
    ) async throws(Failure) -> R {
        activeScopes.add(1, ordering: .relaxed)
        defer { activeScopes.subtract(1, ordering: .relaxed) }
        return try await $strict.withValue(strict || Self.strict, isolation: isolation, typed: { () async throws(Failure) -> R in
            try await $fault.withValue(fault == .none ? Self.fault : fault, isolation: isolation, typed: operation)
        })
    }
}
