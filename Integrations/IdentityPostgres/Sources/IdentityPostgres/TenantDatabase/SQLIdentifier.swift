/// A plain SQL identifier, checked and double-quoted: the only way names reach the statements
/// ``TenantDatabase`` writes. Values never do; they are bound parameters.
struct SQLIdentifier: Sendable, Hashable, CustomStringConvertible {
    /// The name as given (quoted, so it is matched exactly, case included).
    let name: String

    /// PostgreSQL's `NAMEDATALEN - 1`: longer names are truncated by the server, so two could collide.
    static let maximumLength = 63

    init(_ name: String) throws(TenantDatabaseError) {
        let bytes = Array(name.utf8)
        func isStart(_ byte: UInt8) -> Bool {
            (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x5F
        }
        func isPart(_ byte: UInt8) -> Bool {
            isStart(byte) || (0x30...0x39).contains(byte) || byte == 0x24
        }
        // Quoting alone would make any name safe; refusing the odd ones as well keeps a typo or a hostile
        // name from becoming a table nobody meant.
        guard let first = bytes.first, isStart(first), bytes.count <= Self.maximumLength, bytes.allSatisfy(isPart) else {
            throw .invalidIdentifier(name)
        }
        self.name = name
    }

    /// `"name"`: no character of a valid name needs escaping inside double quotes.
    var quoted: String { "\"\(name)\"" }

    var description: String { quoted }
}

/// A table name, optionally qualified by its schema (`app.documents`).
struct SQLTableName: Sendable, Hashable, CustomStringConvertible {
    let schema: SQLIdentifier?
    let table: SQLIdentifier

    init(_ name: String) throws(TenantDatabaseError) {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        switch parts.count {
        case 1:
            schema = nil
            table = try SQLIdentifier(name)
        case 2:
            do {
                schema = try SQLIdentifier(String(parts[0]))
                table = try SQLIdentifier(String(parts[1]))
            } catch {
                throw .invalidIdentifier(name)
            }
        default:
            throw .invalidIdentifier(name)
        }
    }

    var quoted: String { schema.map { "\($0.quoted).\(table.quoted)" } ?? table.quoted }

    var description: String { quoted }
}
