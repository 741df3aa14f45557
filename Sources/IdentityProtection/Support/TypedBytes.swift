import Foundation

/// `withUnsafeBytes` that keeps the typed ``ProtectionError`` (Foundation's `Data.withUnsafeBytes` only
/// rethrows `any Error`).
@inline(__always)
func withRawBytes<R>(
    of data: Data, _ body: (UnsafeRawBufferPointer) throws(ProtectionError) -> R
) throws(ProtectionError) -> R {
    let result: Result<R, ProtectionError> = data.withUnsafeBytes { raw in
        do throws(ProtectionError) { return .success(try body(raw)) } catch { return .failure(error) }
    }
    return try result.get()
}

/// The same for arrays.
@inline(__always)
func withRawBytes<R>(
    of bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(ProtectionError) -> R
) throws(ProtectionError) -> R {
    let result: Result<R, ProtectionError> = bytes.withUnsafeBytes { raw in
        do throws(ProtectionError) { return .success(try body(raw)) } catch { return .failure(error) }
    }
    return try result.get()
}

/// `withUnsafeMutableBytes` of `Data` that keeps the typed ``ProtectionError``.
@inline(__always)
func withMutableRawBytes<R>(
    of data: inout Data, _ body: (UnsafeMutableRawBufferPointer) throws(ProtectionError) -> R
) throws(ProtectionError) -> R {
    let result: Result<R, ProtectionError> = data.withUnsafeMutableBytes { raw in
        do throws(ProtectionError) { return .success(try body(raw)) } catch { return .failure(error) }
    }
    return try result.get()
}
