import Foundation
import IdentityRuntime

extension DataProtectionManager {
    /// Protects a payload that arrives in pieces, for payloads larger than memory: the result yields the
    /// protected-stream envelope (<doc:DataAndFileProtection#Stream-format,-version-1>) piece by piece as `source` is consumed.
    ///
    /// ```swift
    /// let sealed = try manager.protect(upload.bytesInChunks, owner: "alice@contoso.com")
    /// for try await piece in sealed { try output.write(piece) }
    /// ```
    /// Memory stays bounded whatever the size: the sequence holds at most one chunk (`chunkSize` bytes) plus
    /// the piece `source` just yielded. For a managed owner the body is encrypted in authenticated records of
    /// `chunkSize` bytes; otherwise the body follows the header in the clear.
    ///
    /// - Parameters:
    ///   - source: the plaintext, in pieces of any size.
    ///   - owner: the owner; `nil` means the caller's `IdentityContext.effectiveFileIdentity` at this call,
    ///     and if that is `nil` too, `Identity.unmanaged`.
    ///   - chunkSize: plaintext bytes per record, 1 byte ... 16 MiB.
    /// - Throws: at the call, the policy's refusal to create data for the owner, ``ProtectionError/invalidIdentity(reason:)`` (104) an owner whose name `Identity(validating:)` rejects, with no key made, ``ProtectionError/invalidEnvelope(reason:)`` (100) a
    ///   chunk size out of range, ``ProtectionError/keyNotFound(identity:keyID:)`` (103) or ``ProtectionError/cryptoBackendFailure(_:)`` (107) key or crypto failures. While iterating: what `source` throws, ``ProtectionError/cryptoBackendFailure(_:)`` (107).
    public func protect<Source: AsyncSequence>(
        _ source: Source, owner: Identity? = nil, chunkSize: Int = 64 * 1024
    ) throws(ProtectionError) -> ProtectedByteStream<Source> where Source.Element: Sequence<UInt8> {
        ProtectedByteStream(base: source, transform: .seal(try makeSealer(owner: owner, chunkSize: chunkSize)))
    }

    /// The plaintext of a protected stream that arrives in pieces, authenticated record by record: no byte of
    /// a record is yielded before its tag verified. Input that is not a stream envelope is yielded unchanged.
    ///
    /// The reader is the caller's `IdentityContext.effectiveFileIdentity` at this call; the policy's access
    /// check runs as soon as the header naming the owner has arrived, before any plaintext is yielded.
    /// Memory stays bounded: at most one record plus the piece `source` just yielded.
    /// > Warning: Bytes of earlier records have been yielded by the time a later record fails; a consumer
    /// > that must not act on a partial payload writes to a temporary place until the sequence ends without
    /// > an error (``FileProtectionManager/unprotect(atPath:toPath:)`` does that).
    /// - Throws while iterating: what `source` throws; the policy's refusal; ``ProtectionError/invalidEnvelope(reason:)`` (100) malformed, truncated or
    ///   trailing bytes; ``ProtectionError/unsupportedVersion(_:)`` (101) version; ``ProtectionError/authenticationFailed`` (102) tampered, reordered or dropped record; ``ProtectionError/keyNotFound(identity:keyID:)`` (103) key missing; ``ProtectionError/invalidIdentity(reason:)`` (104) owner
    ///   field.
    public func unprotect<Source: AsyncSequence>(
        _ source: Source
    ) -> ProtectedByteStream<Source> where Source.Element: Sequence<UInt8> {
        ProtectedByteStream(base: source, transform: .open(makeOpener(reader: IdentityContext.effectiveFileIdentity)))
    }

    // MARK: Internals

    func makeSealer(owner identity: Identity?, chunkSize: Int) throws(ProtectionError) -> StreamSealer {
        try StreamEndpoints(keyStore: keyStore, policy: policy)
            .sealer(owner: identity ?? IdentityContext.effectiveFileIdentity ?? .unmanaged, chunkSize: chunkSize)
    }

    func makeOpener(reader: Identity?) -> StreamOpener {
        StreamEndpoints(keyStore: keyStore, policy: policy).opener(reader: reader)
    }
}

/// The result of streamed ``DataProtectionManager/protect(_:owner:chunkSize:)`` and
/// ``DataProtectionManager/unprotect(_:)-(Source)``: an `AsyncSequence` of byte pieces, produced as the base
/// sequence is consumed (nothing runs before iteration starts). Each iterator works on its own copy of the
/// state: iterate once.
public struct ProtectedByteStream<Base: AsyncSequence>: AsyncSequence where Base.Element: Sequence<UInt8> {
    public typealias Element = [UInt8]
    public typealias Failure = any Error

    /// A sealer or an opener, mutated in place (no copy of its buffer per piece).
    struct Transform: Sendable {
        var sealer: StreamSealer?
        var opener: StreamOpener?

        static func seal(_ sealer: StreamSealer) -> Transform { Transform(sealer: sealer, opener: nil) }
        static func open(_ opener: StreamOpener) -> Transform { Transform(sealer: nil, opener: opener) }

        mutating func append(_ bytes: UnsafeRawBufferPointer) throws(ProtectionError) -> [UInt8] {
            if sealer != nil { return try sealer!.append(bytes) }
            return try opener!.append(bytes)
        }

        mutating func finish() throws(ProtectionError) -> [UInt8] {
            if sealer != nil { return try sealer!.finish() }
            return try opener!.finish()
        }

        /// Whether the key is settled: a sealer has it from the start, an opener once it read the header.
        var isSettled: Bool { opener?.isSettled ?? true }
    }

    let base: Base
    let transform: Transform

    /// Produces the pieces.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        var transform: Transform
        var finished = false
        /// Whether a sealer got its own salt: every iteration seals a new stream (a second iteration of the
        /// same sequence must not reuse the first one's stream key and nonces).
        var resalted = false

        /// The next piece; `nil` at the end.
        ///
        /// Until the opener has read the header, a key the store must fetch is awaited, never waited for on the
        /// thread (`StoreBridge.withoutBlocking`): the piece stays buffered and the header is read again once
        /// the key is at hand.
        public mutating func next() async throws -> [UInt8]? {
            if !resalted, let sealer = transform.sealer {
                transform.sealer = try sealer.resalted()
                resalted = true
            }
            while !finished {
                if let piece = try await base.next() {
                    let output: [UInt8]
                    if transform.isSettled {
                        output = try Self.feed(piece, into: &transform)
                    } else {
                        var buffered = false
                        output = try await StoreBridge.withoutBlocking { () throws -> [UInt8] in
                            if buffered { return try transform.append(UnsafeRawBufferPointer(start: nil, count: 0)) }
                            buffered = true
                            return try Self.feed(piece, into: &transform)
                        }
                    }
                    if !output.isEmpty { return output }
                } else {
                    finished = true
                    let output = transform.isSettled
                        ? try transform.finish()
                        : try await StoreBridge.withoutBlocking { () throws(ProtectionError) in try transform.finish() }
                    if !output.isEmpty { return output }
                }
            }
            return nil
        }

        private static func feed(_ piece: Base.Element, into transform: inout Transform) throws -> [UInt8] {
            if let output = try piece.withContiguousStorageIfAvailable({ buffer in
                try transform.append(UnsafeRawBufferPointer(buffer))
            }) {
                return output
            }
            let copy = Array(piece)
            return try withRawBytes(of: copy) { (raw) throws(ProtectionError) in try transform.append(raw) }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), transform: transform)
    }
}

extension ProtectedByteStream {
    /// Every piece concatenated (for payloads that fit in memory).
    public func collect() async throws -> [UInt8] {
        var result: [UInt8] = []
        for try await piece in self { result.append(contentsOf: piece) }
        return result
    }
}

extension ProtectedByteStream: Sendable where Base: Sendable {}
