#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What the running process was built with, for tests that size their work to the machine they run on.
public enum Sanitizers {
    /// Whether ThreadSanitizer instruments this process (`swift test --sanitize=thread`,
    /// `swift run --sanitize=thread`): its runtime's entry point is linked in.
    ///
    /// Code under ThreadSanitizer runs 5 to 15 times slower and every thread's memory accesses are tracked,
    /// so a stress test that floods the machine in a plain build should do less there.
    public static let isThreadSanitizerActive: Bool = {
        guard let process = dlopen(nil, RTLD_LAZY) else { return false }
        defer { dlclose(process) }
        return dlsym(process, "__tsan_init") != nil
    }()
}
