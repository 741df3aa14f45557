import Foundation
import GRPCCore

/// Raw UTF-8 bytes: requests are plain strings.
struct UTF8Coder: MessageSerializer, MessageDeserializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: String) throws -> Bytes {
        Bytes(message.utf8)
    }

    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> String {
        serializedMessageBytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }
}

/// JSON: responses are reports.
struct JSONCoder<Message: Codable & Sendable>: MessageSerializer, MessageDeserializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: Message) throws -> Bytes {
        Bytes(try JSONEncoder().encode(message))
    }

    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> Message {
        try serializedMessageBytes.withUnsafeBytes { try JSONDecoder().decode(Message.self, from: Data($0)) }
    }
}
