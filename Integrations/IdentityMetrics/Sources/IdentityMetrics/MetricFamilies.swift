import CoreMetrics
import Synchronization

/// One counter label with fixed dimension names: a counter per combination of values, made on first use and
/// kept (the values are bounded by the callers).
final class CounterFamily: Sendable {
    let label: String
    let dimensions: [String]
    private let factory: any MetricsFactory
    private let counters = Mutex<[[String]: Counter]>([:])

    init(_ label: String, dimensions: [String], factory: any MetricsFactory) {
        self.label = label
        self.dimensions = dimensions
        self.factory = factory
    }

    /// The counter of `values` (one per dimension, in order).
    func callAsFunction(_ values: [String]) -> Counter {
        counters.withLock { counters in
            if let counter = counters[values] { return counter }
            let counter = Counter(label: label, dimensions: Array(zip(dimensions, values)), factory: factory)
            counters[values] = counter
            return counter
        }
    }
}

/// ``CounterFamily`` for timers.
final class TimerFamily: Sendable {
    let label: String
    let dimensions: [String]
    private let factory: any MetricsFactory
    private let timers = Mutex<[[String]: CoreMetrics.Timer]>([:])

    init(_ label: String, dimensions: [String], factory: any MetricsFactory) {
        self.label = label
        self.dimensions = dimensions
        self.factory = factory
    }

    func callAsFunction(_ values: [String]) -> CoreMetrics.Timer {
        timers.withLock { timers in
            if let timer = timers[values] { return timer }
            let timer = CoreMetrics.Timer(label: label, dimensions: Array(zip(dimensions, values)), factory: factory)
            timers[values] = timer
            return timer
        }
    }
}
