import Dispatch
import Foundation
import IdentityRuntime

/// `identity-harness bench`: the headline pairs, raw primitive vs identity-carrying wrapper, measured
/// interleaved (A B A B ...) over several rounds in one process, printed as the median ratio wrapped/raw
/// with its spread. Run it in release mode: `swift run -c release identity-harness bench`.
enum BenchCommand {
    struct Pair {
        let name: String
        /// The most wrapped/raw may be (from the core issue's targets), or nil where only an absolute
        /// figure is targeted.
        let targetRatio: Double?
        let operations: Int
        let raw: (Int) -> Void
        let wrapped: (Int) -> Void
    }

    struct Options {
        var rounds = 9
        var scale = 1.0
    }

    static func run(arguments: ArraySlice<String>) -> Bool {
        var options = Options()
        var arguments = arguments
        while let argument = arguments.popFirst() {
            switch argument {
            case "--rounds": options.rounds = arguments.popFirst().flatMap(Int.init) ?? options.rounds
            case "--scale": options.scale = arguments.popFirst().flatMap(Double.init) ?? options.scale
            default:
                FileHandle.standardError.write(Data("bench: unknown option \(argument)\n".utf8))
                return false
            }
        }
        #if DEBUG
        print("note: debug build; run `swift run -c release identity-harness bench` for meaningful figures")
        #endif
        let pairs = makePairs(scale: options.scale)
        print("pair".padding(toLength: 46, withPad: " ", startingAt: 0)
              + "raw ns/op  wrapped ns/op  ratio (min–max)       target")
        for pair in pairs {
            // Warm up both sides once.
            pair.raw(pair.operations / 10)
            pair.wrapped(pair.operations / 10)
            var rawTimes: [Double] = []
            var wrappedTimes: [Double] = []
            var ratios: [Double] = []
            for _ in 0..<options.rounds {
                let raw = nanosecondsPerOperation(pair.operations, pair.raw)
                let wrapped = nanosecondsPerOperation(pair.operations, pair.wrapped)
                rawTimes.append(raw)
                wrappedTimes.append(wrapped)
                ratios.append(wrapped / raw)
            }
            let ratio = median(ratios)
            let target = pair.targetRatio.map { String(format: "≤ %.2fx %@", $0, ratio <= $0 ? "met" : "MISSED") } ?? ""
            print(pair.name.padding(toLength: 46, withPad: " ", startingAt: 0)
                  + String(format: "%9.1f  %13.1f  %5.2fx (%.2f–%.2f)   ",
                           median(rawTimes), median(wrappedTimes), ratio, ratios.min()!, ratios.max()!)
                  + target)
        }
        return true
    }

    static func nanosecondsPerOperation(_ operations: Int, _ body: (Int) -> Void) -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        body(operations)
        let end = DispatchTime.now().uptimeNanoseconds
        return Double(end - start) / Double(operations)
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted[sorted.count / 2]
    }

    /// State touched only on one serial queue (or under its own discipline), for capturing closures.
    final class Counter: @unchecked Sendable {
        var value = 0
    }

    @TaskLocal static var bareTaskLocal: Identity?

    static func makePairs(scale: Double) -> [Pair] {
        let n = { (base: Int) in max(1_000, Int(Double(base) * scale)) }
        let identity: Identity = "alice@contoso.com"
        let rawSerial = DispatchQueue(label: "bench.raw.serial")
        let wrappedSerial = IdentityDispatchQueue(label: "bench.wrapped.serial")
        let rawConcurrent = DispatchQueue(label: "bench.raw.concurrent", attributes: .concurrent)
        let wrappedConcurrent = IdentityDispatchQueue(label: "bench.wrapped.concurrent", attributes: .concurrent)
        let counter = Counter()

        func serialAsync(_ submit: @escaping (Int, @escaping @Sendable () -> Void) -> Void, drain: @escaping () -> Void) -> (Int) -> Void {
            { count in
                for index in 0..<count { submit(index) { counter.value &+= index } }
                drain()
            }
        }
        func concurrentAsync(
            _ submit: @escaping (DispatchGroup, @escaping @Sendable () -> Void) -> Void
        ) -> (Int) -> Void {
            { count in
                let group = DispatchGroup()
                let sink = Counter()
                for _ in 0..<count { submit(group) { _ = sink } }
                group.wait()
            }
        }

        let rawOperations = OperationQueue()
        rawOperations.maxConcurrentOperationCount = 1
        let wrappedOperations = IdentityOperationQueue()
        wrappedOperations.maxConcurrentOperationCount = 1

        return [
            Pair(name: "async, serial, submitter with identity", targetRatio: 1.25, operations: n(200_000),
                 raw: serialAsync({ _, work in rawSerial.async(execute: work) }, drain: { rawSerial.sync {} }),
                 wrapped: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         serialAsync({ _, work in wrappedSerial.async(execute: work) }, drain: { wrappedSerial.sync {} })(count)
                     }
                 }),
            Pair(name: "async, serial, submitter without identity", targetRatio: 1.05, operations: n(200_000),
                 raw: serialAsync({ _, work in rawSerial.async(execute: work) }, drain: { rawSerial.sync {} }),
                 wrapped: serialAsync({ _, work in wrappedSerial.async(execute: work) }, drain: { wrappedSerial.sync {} })),
            Pair(name: "async, concurrent, submitter with identity", targetRatio: 1.25, operations: n(100_000),
                 raw: concurrentAsync { group, work in rawConcurrent.async(group: group, execute: work) },
                 wrapped: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         concurrentAsync { group, work in wrappedConcurrent.async(group: group, execute: work) }(count)
                     }
                 }),
            Pair(name: "sync, serial, caller with identity", targetRatio: 1.3, operations: n(300_000),
                 raw: { count in for index in 0..<count { rawSerial.sync { counter.value &+= index } } },
                 wrapped: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         for index in 0..<count { wrappedSerial.sync { counter.value &+= index } }
                     }
                 }),
            Pair(name: "OperationQueue.addOperation(block), identity", targetRatio: 1.05, operations: n(50_000),
                 raw: { count in
                     for index in 0..<count { rawOperations.addOperation { counter.value &+= index } }
                     rawOperations.waitUntilAllOperationsAreFinished()
                 },
                 wrapped: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         for index in 0..<count { wrappedOperations.addOperation { counter.value &+= index } }
                     }
                     wrappedOperations.waitUntilAllOperationsAreFinished()
                 }),
            Pair(name: "effectiveFileIdentity vs bare TaskLocal read", targetRatio: nil, operations: n(2_000_000),
                 raw: { count in
                     $bareTaskLocal.withValue(identity) {
                         var hits = 0
                         for _ in 0..<count where bareTaskLocal != nil { hits &+= 1 }
                         counter.value &+= hits
                     }
                 },
                 wrapped: { count in
                     IdentityContext.withThreadIdentity(identity) {
                         var hits = 0
                         for _ in 0..<count where IdentityContext.effectiveFileIdentity != nil { hits &+= 1 }
                         counter.value &+= hits
                     }
                 }),
        ]
    }
}
