import Foundation

/// A command line the harness cannot run: an unknown flag, a flag without its value, or a value out of range.
/// Printed with the usage, exit status 64; never replaced by a default.
struct UsageError: Error, CustomStringConvertible {
    let description: String
}

/// The `--name value` flags of one command, read one at a time: every value is checked, and a bad one is a
/// ``UsageError`` naming the flag and what it takes.
struct HarnessFlags {
    private var arguments: ArraySlice<String>
    let command: String

    init(_ arguments: ArraySlice<String>, command: String) {
        self.arguments = arguments
        self.command = command
    }

    /// The next flag, or `nil` at the end; an argument that is not a `--flag` is an error.
    mutating func next() throws(UsageError) -> String? {
        guard let flag = arguments.popFirst() else { return nil }
        guard flag.hasPrefix("--"), flag.count > 2 else { throw UsageError(description: "\(command): expected a --flag, got '\(flag)'") }
        return flag
    }

    /// The value of `flag`, which must follow it.
    mutating func value(of flag: String) throws(UsageError) -> String {
        guard let value = arguments.popFirst(), !value.hasPrefix("--") || Double(value) != nil else {
            throw UsageError(description: "\(command): \(flag) needs a value")
        }
        return value
    }

    /// The value of `flag` as a `T` that `isValid` accepts; `expected` says what the flag takes.
    mutating func value<T: LosslessStringConvertible>(
        of flag: String, as _: T.Type, expected: String, _ isValid: (T) -> Bool = { _ in true }
    ) throws(UsageError) -> T {
        let text = try value(of: flag)
        guard let value = T(text), isValid(value) else {
            throw UsageError(description: "\(command): \(flag) takes \(expected), got '\(text)'")
        }
        return value
    }

    /// An unknown flag's error.
    func unknown(_ flag: String) -> UsageError {
        UsageError(description: "\(command): unknown option \(flag)")
    }
}
