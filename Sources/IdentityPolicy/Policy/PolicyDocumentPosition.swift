/// Where in a policy document an error is: the byte offset, and the line and column an editor shows.
///
/// For a key that is wrong, the position of the key; for a value that is wrong, the position of the value;
/// for text that is not JSON, the position where the reader stopped.
public struct PolicyDocumentPosition: Sendable, Hashable, CustomStringConvertible {
    /// The byte offset from the start of the document (0 is the first byte).
    public var offset: Int
    /// The line, from 1.
    public var line: Int
    /// The column, from 1, in Unicode scalars (characters of most texts).
    public var column: Int

    /// A position at byte `offset`, on `line` and `column` (both from 1).
    public init(offset: Int, line: Int, column: Int) {
        self.offset = offset
        self.line = line
        self.column = column
    }

    /// The position of the byte at `offset` in `bytes` (the end of the text when `offset` is past it).
    public init(offset: Int, in bytes: some Collection<UInt8>) {
        let end = min(max(offset, 0), bytes.count)
        var line = 1
        var lineStart = 0
        var position = 0
        for byte in bytes.prefix(end) {
            position += 1
            if byte == UInt8(ascii: "\n") {
                line += 1
                lineStart = position
            }
        }
        let prefix = Array(bytes.dropFirst(lineStart).prefix(end - lineStart))
        self.init(offset: end, line: line, column: String(decoding: prefix, as: UTF8.self).unicodeScalars.count + 1)
    }

    /// `line:column`.
    public var description: String { "\(line):\(column)" }
}
