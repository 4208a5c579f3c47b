/* test_shard.c — the Pinterest id layout, RFC 1321 MD5 and md5-mod-N routing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "shard.h"

START_TEST(id_round_trip_edges) {
    const unsigned shards[] = {0, 1, 4095, 32768, 65535};
    const unsigned types[] = {0, 1, 2, 512, 1023};
    const uint64_t locals[] = {0, 1, 0x123456789ull, (1ull << 35), (1ull << 36) - 1};
    for (size_t s = 0; s < BW_ARRAY_LEN(shards); s++)
        for (size_t t = 0; t < BW_ARRAY_LEN(types); t++)
            for (size_t l = 0; l < BW_ARRAY_LEN(locals); l++) {
                uint64_t id = bw_id_make(shards[s], types[t], locals[l]);
                ck_assert_uint_eq(bw_id_shard(id), shards[s]);
                ck_assert_uint_eq(bw_id_type(id), types[t]);
                ck_assert_uint_eq(bw_id_local(id), locals[l]);
                ck_assert_uint_eq(id >> 62, 0);
            }
}
END_TEST

START_TEST(id_bit_positions) {
    /* each part lands exactly where the layout says */
    ck_assert_uint_eq(bw_id_make(1, 0, 0), 1ull << 46);
    ck_assert_uint_eq(bw_id_make(0, 1, 0), 1ull << 36);
    ck_assert_uint_eq(bw_id_make(0, 0, 1), 1ull);
    ck_assert_uint_eq(bw_id_make(65535, 1023, (1ull << 36) - 1), (1ull << 62) - 1);
    ck_assert_uint_eq(bw_id_make(65535, 0, 0), 0xFFFFull << 46);
    ck_assert_uint_eq(bw_id_make(0, 1023, 0), 0x3FFull << 36);
    /* out-of-range parts are masked, never spill into a neighbour */
    ck_assert_uint_eq(bw_id_make(65536, 0, 0), 0);
    ck_assert_uint_eq(bw_id_make(0, 1024, 0), 0);
    ck_assert_uint_eq(bw_id_make(0, 0, 1ull << 36), 0);
    /* a known id decomposes */
    uint64_t id = (7ull << 46) | (2ull << 36) | 99;
    ck_assert_uint_eq(bw_id_shard(id), 7);
    ck_assert_uint_eq(bw_id_type(id), 2);
    ck_assert_uint_eq(bw_id_local(id), 99);
}
END_TEST

START_TEST(id_well_formed) {
    ck_assert(!bw_id_well_formed(0));
    ck_assert(bw_id_well_formed(1));
    ck_assert(bw_id_well_formed(bw_id_make(65535, 1023, (1ull << 36) - 1)));
    ck_assert(!bw_id_well_formed(1ull << 62));
    ck_assert(!bw_id_well_formed(1ull << 63));
    ck_assert(!bw_id_well_formed(UINT64_MAX));
    ck_assert(!bw_id_well_formed((1ull << 63) | bw_id_make(3, 1, 5)));
    ck_assert(bw_id_well_formed((1ull << 62) - 1));
}
END_TEST

static void hex(const unsigned char d[16], char out[33]) {
    for (int i = 0; i < 16; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

START_TEST(md5_rfc1321_vectors) {
    static const struct {
        const char *in, *digest;
    } v[] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "d174ab98d277d9f5a5611c2c9f419d9f"},
        {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    for (size_t i = 0; i < BW_ARRAY_LEN(v); i++) {
        unsigned char d[16];
        char h[33];
        bw_md5(v[i].in, strlen(v[i].in), d);
        hex(d, h);
        ck_assert_msg(strcmp(h, v[i].digest) == 0, "md5(\"%s\") = %s, want %s", v[i].in, h, v[i].digest);
    }
}
END_TEST

START_TEST(md5_padding_boundaries) {
    /* lengths around the 56/64-byte padding edges: known digests of "a" * n
     * (computed with coreutils md5sum) */
    static const struct {
        size_t n;
        const char *digest;
    } v[] = {
        {55, "ef1772b6dff9a122358552954ad0df65"},
        {56, "3b0c8ac703f828b04c6c197006d17218"},
        {57, "652b906d60af96844ebd21b674f35e93"},
        {63, "b06521f39153d618550606be297466d5"},
        {64, "014842d480b571495a4a0363793f7367"},
        {65, "c743a45e0d2e6a95cb859adae0248435"},
        {1000, "cabe45dcc9ae5b66ba86600cca6b8ba8"},
    };
    char buf[1000];
    memset(buf, 'a', sizeof(buf));
    for (size_t i = 0; i < BW_ARRAY_LEN(v); i++) {
        unsigned char d[16];
        char h[33];
        bw_md5(buf, v[i].n, d);
        hex(d, h);
        ck_assert_msg(strcmp(h, v[i].digest) == 0, "md5(a*%zu) = %s, want %s", v[i].n, h, v[i].digest);
    }
}
END_TEST

static uint64_t first8_be(const char *hexdigest) {
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = hexdigest[i];
        v = v << 4 | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    return v;
}

START_TEST(shard_of_key_independent) {
    /* digests from RFC 1321 / md5sum, reduced independently of bw_md5's byte order */
    static const struct {
        const char *key, *digest;
    } v[] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"partner-acme", "266d12fe229130df8fb57c683e279635"},
        {"alice@example.com", "c160f8cc69a4f0bf2b0362752353d060"},
        {"\xe6\x97\xa5\xe6\x9c\xac", "4dbed2e657457884e67137d3514119b3"}, /* 日本 */
    };
    const unsigned counts[] = {1, 2, 3, 7, 8, 10, 4096, 65536};
    for (size_t i = 0; i < BW_ARRAY_LEN(v); i++) {
        uint64_t be = first8_be(v[i].digest);
        for (size_t c = 0; c < BW_ARRAY_LEN(counts); c++)
            ck_assert_uint_eq(bw_shard_of_key(v[i].key, strlen(v[i].key), counts[c]), be % counts[c]);
    }
    /* "abc": first 8 bytes 0x900150983cd24fb0 */
    ck_assert_uint_eq(bw_shard_of_key("abc", 3, 8), 0x900150983cd24fb0ull % 8);
    ck_assert_uint_eq(bw_shard_of_key("abc", 3, 4096), 0x900150983cd24fb0ull % 4096);
    ck_assert_uint_eq(bw_shard_of_key("abc", 3, 1000), 0x900150983cd24fb0ull % 1000);
    /* the key is bytes, not a C string: an embedded NUL changes the shard input */
    unsigned char d1[16], d2[16];
    bw_md5("ab\0c", 4, d1);
    bw_md5("ab", 2, d2);
    ck_assert(memcmp(d1, d2, 16) != 0);
}
END_TEST

START_TEST(shard_of_key_distribution) {
    unsigned counts[8] = {0};
    char key[64];
    for (int i = 0; i < 10000; i++) {
        int n = snprintf(key, sizeof(key), "partner-%d@example.com", i);
        unsigned s = bw_shard_of_key(key, (size_t)n, 8);
        ck_assert_uint_lt(s, 8);
        counts[s]++;
    }
    for (int s = 0; s < 8; s++)
        ck_assert_msg(counts[s] >= 1000 && counts[s] <= 1500, "shard %d got %u of 10000", s, counts[s]);
    /* a count that is not a power of two: every shard used, none above 2x its share */
    unsigned c7[7] = {0};
    for (int i = 0; i < 7000; i++) {
        int n = snprintf(key, sizeof(key), "user%d", i);
        c7[bw_shard_of_key(key, (size_t)n, 7)]++;
    }
    for (int s = 0; s < 7; s++) ck_assert_msg(c7[s] > 800 && c7[s] < 1200, "7 shards: %d got %u", s, c7[s]);
}
END_TEST

/* A dead-lettered create's shard_key routes to its shard by the proxy's rules. */
START_TEST(shard_key_for_routes_back) {
    char key[48];
    /* create_route "id": the row's own id when it is on the shard, else local 1 there */
    ck_assert_int_eq(bw_shard_key_for(0, 3, 16, bw_id_make(3, 9, 77), key), 0);
    ck_assert_str_eq(key, "211724707823693");
    ck_assert_int_eq(bw_shard_key_for(0, 3, 16, 0, key), 0);
    uint64_t owner = strtoull(key, NULL, 10);
    ck_assert(bw_id_well_formed(owner));
    ck_assert_uint_eq(bw_id_shard(owner), 3);
    ck_assert_int_eq(bw_shard_key_for(0, 5, 16, bw_id_make(3, 9, 77), key), 0); /* an id of another shard */
    ck_assert_uint_eq(bw_id_shard(strtoull(key, NULL, 10)), 5);
    /* "md5": a key whose digest routes there, for every shard of 4,096 */
    for (unsigned sh = 0; sh < 4096; sh++) {
        ck_assert_int_eq(bw_shard_key_for(1, sh, 4096, 0, key), 0);
        ck_assert_uint_eq(bw_shard_of_key(key, strlen(key), 4096), sh);
    }
}
END_TEST

Suite *shard_suite(void) {
    Suite *s = suite_create("shard");
    TCase *tc = tcase_create("ids");
    tcase_add_test(tc, id_round_trip_edges);
    tcase_add_test(tc, id_bit_positions);
    tcase_add_test(tc, id_well_formed);
    suite_add_tcase(s, tc);
    tc = tcase_create("md5");
    tcase_add_test(tc, md5_rfc1321_vectors);
    tcase_add_test(tc, md5_padding_boundaries);
    tcase_add_test(tc, shard_of_key_independent);
    tcase_add_test(tc, shard_of_key_distribution);
    tcase_add_test(tc, shard_key_for_routes_back);
    suite_add_tcase(s, tc);
    return s;
}
