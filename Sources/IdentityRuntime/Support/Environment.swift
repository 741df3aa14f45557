#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The value of an environment variable, read without Foundation.
func getEnvironment(_ name: String) -> String? {
    guard let value = getenv(name) else { return nil }
    return String(cString: value)
}
