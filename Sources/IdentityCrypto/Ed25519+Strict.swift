extension Ed25519 {
    /// Whether a signature and public key pass the strict encoding rule that every Ed25519 verification of
    /// this package applies before any crypto library sees them (``PublicKey/isValidSignature(_:of:)``):
    ///
    /// - `S` (the signature's last 32 bytes, little-endian) is below the group order
    ///   L = 2^252 + 27742317777372353535851937790883648493;
    /// - `R` (the signature's first 32 bytes) and `A` (the public key) encode their y coordinate canonically:
    ///   y, the low 255 bits, is below p = 2^255 − 19;
    /// - neither `R` nor `A` is one of the 8 points of small order (the identity, the point of order 2, the
    ///   two of order 4, the four of order 8): their y is none of 0, 1, p − 1 and the two y of the points of
    ///   order 8, whatever the sign bit. With the rule above, this also refuses their non-canonical encodings
    ///   (y + p for y = 0 and 1) and the "negative zero" encodings of y = 1 and y = p − 1.
    ///
    /// libsodium 1.0.18 refuses every one of these inputs itself; libcrypto (OpenSSL 3.0) refuses `S ≥ L` and a
    /// non-canonical `R` (its recomputed `R` is always canonical) but takes a public key's y modulo p and does not
    /// look for small order, so it accepts, for example, any message signed `(R = [S]B, S)` under the identity
    /// key. After this rule both libraries must give the same answer (the differential test in
    /// IdentityAssertionsTests checks it), so the backend in use never changes what is accepted.
    ///
    /// Public data, variable time. 32-byte `publicKey`, 64-byte `signature`.
    package static func isStrictlyEncoded(signature: UnsafeRawBufferPointer, publicKey: UnsafeRawBufferPointer) -> Bool {
        guard signature.count == signatureLength, publicKey.count == keyLength else { return false }
        let r = Words(signature, at: 0)
        let s = Words(signature, at: 32)
        let a = Words(publicKey, at: 0)
        return s.isBelowGroupOrder && r.isCanonicalPoint && a.isCanonicalPoint && !r.isSmallOrderPoint && !a.isSmallOrderPoint
    }

    /// Why a public key can never pass ``isStrictlyEncoded(signature:publicKey:)``.
    package enum PublicKeyDefect: Sendable, Equatable, CustomStringConvertible {
        /// Its y (the low 255 bits) is not below p = 2^255 − 19.
        case nonCanonical
        /// It is one of the 8 points of small order.
        case smallOrder

        package var description: String {
            switch self {
            case .nonCanonical: "is not a canonical point encoding (its y is not below 2^255 - 19)"
            case .smallOrder: "is a point of small order"
            }
        }
    }

    /// The reason the 32-byte `publicKey` fails the strict rule whatever the signature, or `nil`: key sets
    /// refuse such keys when they are made.
    package static func publicKeyDefect(_ publicKey: [UInt8]) -> PublicKeyDefect? {
        precondition(publicKey.count == keyLength)
        let a = publicKey.withUnsafeBytes { Words($0, at: 0) }
        if !a.isCanonicalPoint { return .nonCanonical }
        if a.isSmallOrderPoint { return .smallOrder }
        return nil
    }

    /// ``isStrictlyEncoded(signature:publicKey:)`` over arrays.
    package static func isStrictlyEncoded(signature: [UInt8], publicKey: [UInt8]) -> Bool {
        signature.withUnsafeBytes { signature in
            publicKey.withUnsafeBytes { publicKey in isStrictlyEncoded(signature: signature, publicKey: publicKey) }
        }
    }

    /// 32 bytes as four little-endian 64-bit words, least significant first.
    private struct Words {
        var w0, w1, w2, w3: UInt64

        init(_ w0: UInt64, _ w1: UInt64, _ w2: UInt64, _ w3: UInt64) {
            (self.w0, self.w1, self.w2, self.w3) = (w0, w1, w2, w3)
        }

        init(_ bytes: UnsafeRawBufferPointer, at offset: Int) {
            w0 = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            w1 = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
            w2 = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self))
            w3 = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self))
        }

        /// L = 2^252 + 27742317777372353535851937790883648493.
        static let groupOrder = Words(0x5812_631A_5CF5_D3ED, 0x14DE_F9DE_A2F7_9CD6, 0, 0x1000_0000_0000_0000)

        /// As a 256-bit scalar: below L.
        var isBelowGroupOrder: Bool {
            let l = Words.groupOrder
            if w3 != l.w3 { return w3 < l.w3 }
            if w2 != l.w2 { return w2 < l.w2 }
            if w1 != l.w1 { return w1 < l.w1 }
            return w0 < l.w0
        }

        /// The y coordinate: the low 255 bits (the top bit is the sign of x).
        var y: Words { Words(w0, w1, w2, w3 & 0x7FFF_FFFF_FFFF_FFFF) }

        /// As a point encoding: y below p = 2^255 − 19 (the only y ≥ p are p … 2^255 − 1: every word all ones
        /// but the top bit, and the lowest word at least 2^64 − 19).
        var isCanonicalPoint: Bool {
            let y = self.y
            return !(y.w3 == 0x7FFF_FFFF_FFFF_FFFF && y.w2 == .max && y.w1 == .max && y.w0 >= 0xFFFF_FFFF_FFFF_FFED)
        }

        /// The canonical y of the 8 points of small order: 0 (order 4), 1 (the identity), p − 1 (order 2), and
        /// the two y of the four points of order 8.
        static let smallOrderY: [Words] = [
            Words(0, 0, 0, 0),
            Words(1, 0, 0, 0),
            Words(0xFFFF_FFFF_FFFF_FFEC, .max, .max, 0x7FFF_FFFF_FFFF_FFFF),
            // 26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05 (little-endian bytes)
            Words(0xB027_B2C2_8F95_E826, 0xF098_EFF2_89F4_C345, 0x3933_C6D3_05AC_DFD5, 0x05FC_536D_8802_38B1),
            // c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a
            Words(0x4FD8_4D3D_706A_17C7, 0x0F67_100D_760B_3CBA, 0xC6CC_392C_FA53_202A, 0x7A03_AC92_77FD_C74E),
        ]

        /// As a point encoding: the y of a point of small order (a canonical y; ``isCanonicalPoint`` refuses
        /// the others).
        var isSmallOrderPoint: Bool {
            let y = self.y
            for small in Words.smallOrderY where y.w0 == small.w0 && y.w1 == small.w1 && y.w2 == small.w2 && y.w3 == small.w3 {
                return true
            }
            return false
        }
    }
}
