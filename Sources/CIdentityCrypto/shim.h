/*
 * CIdentityCrypto: the system libcrypto (OpenSSL 3) for IdentityProtection on Linux, plus <sys/xattr.h>,
 * which Swift's Glibc module does not export.
 *
 * Needs the OpenSSL development headers: on Debian/Ubuntu `apt-get install libssl-dev`,
 * on Fedora/RHEL `dnf install openssl-devel`.
 *
 * The helpers below only sequence EVP calls; there is no cipher code here. Every OpenSSL return code is
 * checked. Return values: 1 success; 0 authentication failure (open only); -1 backend failure.
 */
#ifndef CIDENTITYCRYPTO_SHIM_H
#define CIDENTITYCRYPTO_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <openssl/opensslv.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <pthread.h>

/* Extended attributes (file owners) are not in Swift's Glibc module; the Linux target gets them here. */
#include <sys/types.h>
#include <sys/xattr.h>

/* Preallocation of file space (fallocate(2) with FALLOC_FL_KEEP_SIZE) is not in Swift's Glibc module either. */
#include <sys/syscall.h>
#include <unistd.h>

/// Reserves disk blocks for `[offset, offset + length)` of `fd` without changing its size (unwritten extents,
/// which read as zeros). Returns 0, or -1 with errno (EOPNOTSUPP on file systems without it).
static inline int cidc_preallocate(int fd, int64_t offset, int64_t length) {
#if defined(__linux__) && defined(SYS_fallocate)
    return (int)syscall(SYS_fallocate, fd, 0x01 /* FALLOC_FL_KEEP_SIZE */, (off_t)offset, (off_t)length);
#else
    (void)fd; (void)offset; (void)length;
    return -1;
#endif
}

#if OPENSSL_VERSION_NUMBER < 0x30000000L
#error "IdentityProtection needs OpenSSL 3 (libcrypto >= 3.0): apt-get install libssl-dev"
#endif

/// Fills `buffer` with `count` bytes from OpenSSL's CSPRNG.
static inline int cidc_random_bytes(uint8_t *buffer, size_t count) {
    if (count > INT_MAX) return -1;
    return RAND_bytes(buffer, (int)count) == 1 ? 1 : -1;
}

/// AES-256-GCM encryption. `key` is 32 bytes, `nonce` 12 bytes, `tag` receives 16 bytes, `output` has room
/// for `input_length` bytes.
static inline int cidc_aes256gcm_seal(const uint8_t *key, const uint8_t *nonce,
                                      const uint8_t *aad, size_t aad_length,
                                      const uint8_t *input, size_t input_length,
                                      uint8_t *output, uint8_t *tag) {
    if (aad_length > INT_MAX || input_length > INT_MAX) return -1;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) return -1;
    int result = -1;
    int length = 0;
    int final_length = 0;
    if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1) goto done;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) != 1) goto done;
    if (EVP_EncryptInit_ex(ctx, NULL, NULL, key, nonce) != 1) goto done;
    if (aad_length > 0 && EVP_EncryptUpdate(ctx, NULL, &length, aad, (int)aad_length) != 1) goto done;
    length = 0;
    if (input_length > 0) {
        if (EVP_EncryptUpdate(ctx, output, &length, input, (int)input_length) != 1) goto done;
    }
    if (EVP_EncryptFinal_ex(ctx, output + length, &final_length) != 1) goto done;
    if ((size_t)length + (size_t)final_length != input_length) goto done;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1) goto done;
    result = 1;
done:
    EVP_CIPHER_CTX_free(ctx);
    return result;
}

/// AES-256-GCM decryption and tag check. Returns 0 when the tag does not verify; `output` must then be
/// discarded by the caller.
static inline int cidc_aes256gcm_open(const uint8_t *key, const uint8_t *nonce,
                                      const uint8_t *aad, size_t aad_length,
                                      const uint8_t *input, size_t input_length,
                                      const uint8_t *tag, uint8_t *output) {
    if (aad_length > INT_MAX || input_length > INT_MAX) return -1;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) return -1;
    int result = -1;
    int length = 0;
    int final_length = 0;
    uint8_t tag_copy[16];
    for (int i = 0; i < 16; i++) tag_copy[i] = tag[i];
    if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1) goto done;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) != 1) goto done;
    if (EVP_DecryptInit_ex(ctx, NULL, NULL, key, nonce) != 1) goto done;
    if (aad_length > 0 && EVP_DecryptUpdate(ctx, NULL, &length, aad, (int)aad_length) != 1) goto done;
    length = 0;
    if (input_length > 0) {
        if (EVP_DecryptUpdate(ctx, output, &length, input, (int)input_length) != 1) goto done;
    }
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, tag_copy) != 1) goto done;
    /* EVP_DecryptFinal_ex returns <= 0 exactly when the tag does not verify. */
    if (EVP_DecryptFinal_ex(ctx, output + length, &final_length) != 1) {
        ERR_clear_error();
        result = 0;
        goto done;
    }
    if ((size_t)length + (size_t)final_length != input_length) goto done;
    result = 1;
done:
    EVP_CIPHER_CTX_free(ctx);
    return result;
}

/// HKDF-SHA-256 (RFC 5869), extract and expand.
static inline int cidc_hkdf_sha256(const uint8_t *ikm, size_t ikm_length,
                                   const uint8_t *salt, size_t salt_length,
                                   const uint8_t *info, size_t info_length,
                                   uint8_t *output, size_t output_length) {
    if (ikm_length > INT_MAX || salt_length > INT_MAX || info_length > INT_MAX) return -1;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
    if (ctx == NULL) return -1;
    int result = -1;
    size_t length = output_length;
    if (EVP_PKEY_derive_init(ctx) <= 0) goto done;
    if (EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) <= 0) goto done;
    if (EVP_PKEY_CTX_set1_hkdf_salt(ctx, salt, (int)salt_length) <= 0) goto done;
    if (EVP_PKEY_CTX_set1_hkdf_key(ctx, ikm, (int)ikm_length) <= 0) goto done;
    if (EVP_PKEY_CTX_add1_hkdf_info(ctx, info, (int)info_length) <= 0) goto done;
    if (EVP_PKEY_derive(ctx, output, &length) <= 0) goto done;
    if (length != output_length) goto done;
    result = 1;
done:
    EVP_PKEY_CTX_free(ctx);
    return result;
}

/* SHA-256, fetched from the default provider once: `EVP_sha256()` (and the one-shot `SHA256()`) fetch the
 * implementation again at every digest, which costs more than hashing a short input. */
static EVP_MD *cidc_sha256_fetched = NULL;
static pthread_once_t cidc_sha256_fetch_once = PTHREAD_ONCE_INIT;
static void cidc_sha256_fetch(void) { cidc_sha256_fetched = EVP_MD_fetch(NULL, "SHA256", NULL); }

/// SHA-256 of `input` into `digest` (32 bytes).
static inline int cidc_sha256(const uint8_t *input, size_t input_length, uint8_t *digest) {
    unsigned int length = 0;
    if (pthread_once(&cidc_sha256_fetch_once, cidc_sha256_fetch) != 0) return -1;
    const EVP_MD *md = cidc_sha256_fetched != NULL ? cidc_sha256_fetched : EVP_sha256();
    if (EVP_Digest(input, input_length, digest, &length, md, NULL) != 1) return -1;
    return length == 32 ? 1 : -1;
}

/* Ed25519 (RFC 8032) for signed identity assertions: 32-byte raw private keys (seeds) and public keys,
 * 64-byte signatures. */

/// A new key pair: `private_key` and `public_key` receive 32 bytes each.
static inline int cidc_ed25519_generate(uint8_t *private_key, uint8_t *public_key) {
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    if (ctx == NULL) return -1;
    EVP_PKEY *key = NULL;
    int result = -1;
    size_t private_length = 32, public_length = 32;
    if (EVP_PKEY_keygen_init(ctx) != 1) goto done;
    if (EVP_PKEY_keygen(ctx, &key) != 1) goto done;
    if (EVP_PKEY_get_raw_private_key(key, private_key, &private_length) != 1 || private_length != 32) goto done;
    if (EVP_PKEY_get_raw_public_key(key, public_key, &public_length) != 1 || public_length != 32) goto done;
    result = 1;
done:
    EVP_PKEY_free(key);
    EVP_PKEY_CTX_free(ctx);
    return result;
}

/// A libcrypto key object for the raw private key `private_key` (32 bytes), made once and used for every
/// signature: making it derives the public key (one scalar multiplication, as much work as a signature).
/// NULL on failure. Free it with `cidc_ed25519_key_free`. OpenSSL 3 allows threads to share a key object
/// that nobody modifies: the helpers below only read it.
static inline EVP_PKEY *cidc_ed25519_private_key_new(const uint8_t *private_key) {
    return EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, private_key, 32);
}

/// A libcrypto key object for the raw public key `public_key` (32 bytes), or NULL (the caller then treats
/// every signature as invalid). Free it with `cidc_ed25519_key_free`.
static inline EVP_PKEY *cidc_ed25519_public_key_new(const uint8_t *public_key) {
    EVP_PKEY *key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, public_key, 32);
    if (key == NULL) ERR_clear_error();
    return key;
}

static inline void cidc_ed25519_key_free(EVP_PKEY *key) {
    EVP_PKEY_free(key);
}

/// The raw public key (32 bytes) of a key object made by `cidc_ed25519_private_key_new`.
static inline int cidc_ed25519_raw_public_key(const EVP_PKEY *key, uint8_t *public_key) {
    size_t length = 32;
    return (EVP_PKEY_get_raw_public_key(key, public_key, &length) == 1 && length == 32) ? 1 : -1;
}

/// Signs `message` with a private key object; `signature` receives 64 bytes.
static inline int cidc_ed25519_sign(EVP_PKEY *key, const uint8_t *message, size_t message_length,
                                    uint8_t *signature) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) return -1;
    int result = -1;
    size_t length = 64;
    if (EVP_DigestSignInit(ctx, NULL, NULL, NULL, key) != 1) goto done;
    if (EVP_DigestSign(ctx, signature, &length, message, message_length) != 1 || length != 64) goto done;
    result = 1;
done:
    EVP_MD_CTX_free(ctx);
    return result;
}

/// Verifies a 64-byte `signature` of `message` under a public key object. 1: valid; 0: not valid (including a
/// public key that is not a point of the curve); -1: backend failure.
static inline int cidc_ed25519_verify(EVP_PKEY *key, const uint8_t *message, size_t message_length,
                                      const uint8_t *signature) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) return -1;
    int result = -1;
    if (EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) != 1) goto done;
    result = EVP_DigestVerify(ctx, signature, 64, message, message_length) == 1 ? 1 : 0;
    ERR_clear_error();
done:
    EVP_MD_CTX_free(ctx);
    return result;
}

#endif /* CIDENTITYCRYPTO_SHIM_H */
