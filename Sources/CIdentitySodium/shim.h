#ifndef CIDENTITYSODIUM_SHIM_H
#define CIDENTITYSODIUM_SHIM_H

// libsodium (libsodium-dev), Linux only: IdentityCrypto's Ed25519 verification (crypto_sign_verify_detached),
// behind the strict pre-check of Ed25519+Strict.swift. libcrypto stays the fallback when sodium_init() fails,
// and does everything else (keys, signatures, AES-GCM, HKDF, SHA-256).
#include <sodium.h>

#endif /* CIDENTITYSODIUM_SHIM_H */
