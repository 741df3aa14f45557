/// The deterministic workload of the crash-consistency harness (`identity-crash-child` and the test that kills
/// it): the child and the checking parent derive the same contents and operations from a seed.
package enum CrashWorkload {
    /// What a run of the child does over and over until it is killed.
    package enum Mode: String, Sendable, CaseIterable {
        /// `FileProtectionManager.writeFile` of a new content each step (alternately an encrypted and a plain
        /// owner, owners kept in the owner index).
        case writeFile
        /// `encryptFile` for one owner, re-encryption for another, `decryptFile`, in turn, on one content.
        case encryptFile
        /// Random writes and truncations through one `ProtectedFile`, half of them followed by `synchronize`.
        case protectedFile
    }

    /// One operation of the `protectedFile` mode.
    package enum Operation: Sendable, Equatable {
        case write(offset: Int, bytes: [UInt8], synchronize: Bool)
        case truncate(length: Int, synchronize: Bool)

        /// `content` after the operation.
        package func applied(to content: [UInt8]) -> [UInt8] {
            var result = content
            switch self {
            case let .write(offset, bytes, _):
                if result.count < offset + bytes.count {
                    result += [UInt8](repeating: 0, count: offset + bytes.count - result.count)
                }
                result.replaceSubrange(offset..<offset + bytes.count, with: bytes)
            case let .truncate(length, _):
                if length < result.count {
                    result.removeSubrange(length...)
                } else {
                    result += [UInt8](repeating: 0, count: length - result.count)
                }
            }
            return result
        }
    }

    /// The content written at `step` of the `writeFile` mode (0 ... 160 KiB).
    package static func content(seed: UInt64, step: Int) -> [UInt8] {
        var random = SplitMix64(seed: seed &* 0x9E37_79B9 &+ UInt64(step))
        let count = Int(random.next() % (160 * 1024))
        return bytes(count, &random)
    }

    /// The operation at `step` of the `protectedFile` mode (writes up to 24 KiB within the first 128 KiB).
    package static func operation(seed: UInt64, step: Int) -> Operation {
        var random = SplitMix64(seed: seed &* 0x85EB_CA6B &+ UInt64(step))
        let synchronize = random.next() % 2 == 0
        if random.next() % 8 == 0 {
            return .truncate(length: Int(random.next() % (128 * 1024)), synchronize: synchronize)
        }
        let offset = Int(random.next() % (128 * 1024))
        let count = 1 + Int(random.next() % (24 * 1024))
        return .write(offset: offset, bytes: bytes(count, &random), synchronize: synchronize)
    }

    private static func bytes(_ count: Int, _ random: inout SplitMix64) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        var index = 0
        while index < count {
            var word = random.next()
            for _ in 0..<min(8, count - index) {
                result[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
        return result
    }
}
