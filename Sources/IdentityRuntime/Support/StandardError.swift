#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Unbuffered writes to file descriptor 2, usable from any thread without Foundation.
package enum StandardError {
    package static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            guard var pointer = bytes.baseAddress else { return }
            var remaining = bytes.count
            while remaining > 0 {
                let written = systemWrite(2, pointer, remaining)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                pointer += written
                remaining -= written
            }
        }
    }
}

#if canImport(Darwin)
private let systemWrite = Darwin.write
#elseif canImport(Musl)
private let systemWrite = Musl.write
#else
private let systemWrite = Glibc.write
#endif
