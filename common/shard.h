/* shard.h — Pinterest's object id layout and shard routing.
 *
 *   bit 63..62  zero
 *   bit 61..46  shard id  (16 bits)
 *   bit 45..36  type id   (10 bits)
 *   bit 35..0   local id  (36 bits)
 *
 * Keys that are not ids route by md5(key) mod the logical shard count. */
#ifndef BW_SHARD_H
#define BW_SHARD_H

#include <stddef.h>
#include <stdint.h>

#define BW_ID_SHARD_SHIFT 46
#define BW_ID_TYPE_SHIFT 36
#define BW_ID_SHARD_MASK 0xFFFFull
#define BW_ID_TYPE_MASK 0x3FFull
#define BW_ID_LOCAL_MASK 0xFFFFFFFFFull

static inline uint64_t bw_id_make(unsigned shard, unsigned type, uint64_t local) {
    return ((uint64_t)(shard & BW_ID_SHARD_MASK) << BW_ID_SHARD_SHIFT) |
           ((uint64_t)(type & BW_ID_TYPE_MASK) << BW_ID_TYPE_SHIFT) | (local & BW_ID_LOCAL_MASK);
}
static inline unsigned bw_id_shard(uint64_t id) {
    return (unsigned)((id >> BW_ID_SHARD_SHIFT) & BW_ID_SHARD_MASK);
}
static inline unsigned bw_id_type(uint64_t id) {
    return (unsigned)((id >> BW_ID_TYPE_SHIFT) & BW_ID_TYPE_MASK);
}
static inline uint64_t bw_id_local(uint64_t id) { return id & BW_ID_LOCAL_MASK; }
/* The two top bits must be zero. */
static inline int bw_id_well_formed(uint64_t id) { return id != 0 && (id >> 62) == 0; }

/* 1 to 19 decimal digits, which every id is (its two top bits are zero): 1 with their
 * value, read without strtoull; 0 for anything else (a JSON "id" string, a shard_key),
 * left to strtoull and the caller's checks. */
static inline int bw_id_digits(const char *s, size_t len, uint64_t *out) {
    uint64_t v = 0;
    if (len == 0 || len > 19) return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 1;
}

/* md5(key) mod shard_count, taking the digest's first 8 bytes as a big-endian integer. */
unsigned bw_shard_of_key(const void *key, size_t len, unsigned shard_count);

/* A shard_key that routes a create to `shard` (for a dead-lettered create, whose own key
 * the shard does not keep: sent again, it lands where it failed). For create_route "id"
 * (by_md5 0): `id` when it is on the shard, else the id of local 1 there; for "md5": the first "bw-shard-SHARD-N" (N = 0, 1, ...) whose md5 routes there.
 * Writes at most 48 bytes into out; 0, or -1 if none was found (never in practice: a
 * key is found within shard_count tries on average, and 64 times that are tried). */
int bw_shard_key_for(int by_md5, unsigned shard, unsigned shard_count, uint64_t id, char out[48]);

/* RFC 1321 MD5. */
void bw_md5(const void *data, size_t len, unsigned char digest[16]);

#endif
