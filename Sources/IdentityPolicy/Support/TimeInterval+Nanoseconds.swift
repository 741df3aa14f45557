import Foundation

extension TimeInterval {
    /// These seconds in whole nanoseconds, for timers and sleeps: clamped to 0 ... 1e18 (10^9 seconds, about
    /// 31 years). A negative value, zero and NaN give 0, so that a setting nobody validated never traps in the
    /// conversion to an integer.
    var clampedNanoseconds: Int64 {
        guard self > 0 else { return 0 }
        return Int64(Swift.min(self, 1e9) * 1e9)
    }
}
