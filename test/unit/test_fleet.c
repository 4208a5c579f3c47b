/* test_fleet.c — the settings every process must share: their prints, and which
 * member's disagreement keeps a process from becoming ready. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "helpers.h"

static const char *print_of(const bw_fleet_print_t *p, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(p[i].key, key)) return p[i].print;
    return NULL;
}

START_TEST(prints_follow_the_shared_settings) {
    bw_config_t *a = t_ref_config(), *b = t_ref_config();
    bw_fleet_print_t pa[BW_FLEET_PRINTS_MAX], pb[BW_FLEET_PRINTS_MAX];
    int na = bw_fleet_prints(a, 1, pa), nb = bw_fleet_prints(b, 1, pb);
    ck_assert_int_eq(na, 6);
    ck_assert_int_eq(nb, na);
    for (int i = 0; i < na; i++) {
        ck_assert_str_eq(pa[i].key, pb[i].key);
        ck_assert_str_eq(pa[i].print, pb[i].print);
        ck_assert_uint_eq(strlen(pa[i].print), 16);
    }
    /* a consumer has no proxy keys; the shared ones print the same */
    bw_fleet_print_t pc[BW_FLEET_PRINTS_MAX];
    int nc = bw_fleet_prints(a, 0, pc);
    ck_assert_int_eq(nc, 4);
    ck_assert_ptr_null(print_of(pc, nc, "proxy.auth.job_id_secret"));
    ck_assert_str_eq(print_of(pc, nc, "shards"), print_of(pa, na, "shards"));
    /* each setting moves its own print, and only it */
    const char *shards = print_of(pa, na, "shards"), *types = print_of(pa, na, "object_types");
    const char *secret = print_of(pa, na, "proxy.auth.job_id_secret"), *clients = print_of(pa, na, "proxy.auth.clients_file");
    b->object_types[0].batch_size[BW_OP_CREATE] = 499;
    nb = bw_fleet_prints(b, 1, pb);
    ck_assert_str_ne(print_of(pb, nb, "object_types"), types);
    ck_assert_str_eq(print_of(pb, nb, "shards"), shards);
    b->servers[0].last_shard = 2; /* a shard map that differs */
    b->servers[1].first_shard = 3;
    nb = bw_fleet_prints(b, 1, pb);
    ck_assert_str_ne(print_of(pb, nb, "shards"), shards);
    char *old = b->proxy_auth_job_id_secret;
    b->proxy_auth_job_id_secret = "another secret";
    nb = bw_fleet_prints(b, 1, pb);
    ck_assert_str_ne(print_of(pb, nb, "proxy.auth.job_id_secret"), secret);
    b->proxy_auth_job_id_secret = old;
    char *old_clients = b->proxy_auth_clients_file;
    b->proxy_auth_clients_file = "clients.conf"; /* with clients: their own namespaces */
    nb = bw_fleet_prints(b, 1, pb);
    ck_assert_str_ne(print_of(pb, nb, "proxy.auth.clients_file"), clients);
    ck_assert_str_eq(print_of(pb, nb, "proxy.auth.job_id_secret"), secret);
    b->proxy_auth_clients_file = old_clients; /* each config frees its own */
    bw_config_destroy(a);
    bw_config_destroy(b);
}
END_TEST

static Bulkwrite__Internal__V1__FleetMember *member(const char *role, const char *instance, int64_t started, int64_t seen,
                                          const bw_fleet_print_t *p, int n, const char *creds) {
    size_t len;
    void *buf = bw_fleet_pack(role, instance, started, seen, p, n, creds, 1, &len);
    Bulkwrite__Internal__V1__FleetMember *m = bulkwrite__internal__v1__fleet_member__unpack(NULL, len, buf);
    free(buf);
    ck_assert_ptr_nonnull(m);
    return m;
}

/* Only a live member that started earlier can keep a process from becoming ready. */
START_TEST(the_earlier_member_decides) {
    bw_config_t *c = t_ref_config();
    bw_fleet_print_t mine[BW_FLEET_PRINTS_MAX], other[BW_FLEET_PRINTS_MAX];
    int n = bw_fleet_prints(c, 1, mine);
    char *old = c->proxy_auth_job_id_secret;
    c->proxy_auth_job_id_secret = "s2";
    int no = bw_fleet_prints(c, 1, other);
    c->proxy_auth_job_id_secret = old;
    int64_t now = 1000000;
    Bulkwrite__Internal__V1__FleetMember *ms[4];
    char why[700] = "";
    ms[0] = member("proxy", "a:1", 500, now - 1000, other, no, NULL);  /* earlier, live, another secret */
    ck_assert_int_eq(bw_fleet_check("b:1", 600, mine, n, NULL, ms, 1, now, why, sizeof(why)), -1);
    ck_assert_msg(strstr(why, "proxy.auth.job_id_secret differs from that of proxy a:1"), "%s", why);
    /* the earlier one does not step back for the later */
    ms[1] = member("proxy", "b:1", 600, now - 1000, mine, n, NULL);
    ck_assert_int_eq(bw_fleet_check("a:1", 500, other, no, NULL, ms, 2, now, why, sizeof(why)), 0);
    /* a member gone quiet (stale) or this process's own record count for nothing */
    bulkwrite__internal__v1__fleet_member__free_unpacked(ms[0], NULL);
    ms[0] = member("proxy", "a:1", 500, now - BW_FLEET_STALE_MS - 1, other, no, NULL);
    ck_assert_int_eq(bw_fleet_check("b:1", 600, mine, n, NULL, ms, 2, now, why, sizeof(why)), 0);
    /* same start: the smaller instance name is the earlier */
    ms[2] = member("proxy", "a:0", 600, now, other, no, NULL);
    ck_assert_int_eq(bw_fleet_check("b:1", 600, mine, n, NULL, ms + 2, 1, now, why, sizeof(why)), -1);
    /* a member that disagrees itself is no one's reference */
    ms[2]->agrees = 0;
    ck_assert_int_eq(bw_fleet_check("b:1", 600, mine, n, NULL, ms + 2, 1, now, why, sizeof(why)), 0);
    ms[2]->agrees = 1;
    /* a consumer compares what it shares with a proxy: the shard map, not the secret */
    bw_fleet_print_t cons[BW_FLEET_PRINTS_MAX];
    int nc = bw_fleet_prints(c, 0, cons);
    ck_assert_int_eq(bw_fleet_check("c:9", 900, cons, nc, NULL, ms + 2, 1, now, why, sizeof(why)), 0);
    c->shard_count = 16;
    c->servers[1].last_shard = 15;
    nc = bw_fleet_prints(c, 0, cons);
    ck_assert_int_eq(bw_fleet_check("c:9", 900, cons, nc, NULL, ms + 2, 1, now, why, sizeof(why)), -1);
    ck_assert_msg(strstr(why, "shards differs from that of proxy a:0"), "%s", why);
    c->shard_count = 8;
    c->servers[1].last_shard = 7;
    for (int i = 0; i < 3; i++) bulkwrite__internal__v1__fleet_member__free_unpacked(ms[i], NULL);
    bw_config_destroy(c);
}
END_TEST

/* Proxies may know different clients; no credential may be two clients. */
START_TEST(a_credential_is_one_client) {
    bw_config_t *c = t_ref_config();
    bw_fleet_print_t p[BW_FLEET_PRINTS_MAX];
    int n = bw_fleet_prints(c, 1, p);
    int64_t now = 1000000;
    Bulkwrite__Internal__V1__FleetMember *a = member("proxy", "a:1", 500, now, p, n, "c:0123456789abcdef ops\nt:1111111111111111 feed\n");
    char why[700] = "";
    /* a subset, and another client the first does not know: fine */
    ck_assert_int_eq(bw_fleet_check("b:1", 600, p, n, "t:1111111111111111 feed\nt:2222222222222222 dash\n", &a, 1, now,
                                    why, sizeof(why)), 0);
    /* the same token as another client: refused, naming both */
    ck_assert_int_eq(bw_fleet_check("b:1", 600, p, n, "t:2222222222222222 dash\nt:1111111111111111 spam\n", &a, 1, now,
                                    why, sizeof(why)), -1);
    ck_assert_msg(strstr(why, "proxy.auth.clients_file: a credential (t:1111111111111111) of client \"spam\" here is "
                              "client \"feed\" on proxy a:1"), "%s", why);
    ck_assert_int_eq(bw_fleet_check("b:1", 600, p, n, "c:0123456789abcdef sre\n", &a, 1, now, why, sizeof(why)), -1);
    ck_assert_msg(strstr(why, "of client \"sre\" here is client \"ops\""), "%s", why);
    /* a prefix of a name is another name */
    ck_assert_int_eq(bw_fleet_check("b:1", 600, p, n, "t:1111111111111111 fee\n", &a, 1, now, why, sizeof(why)), -1);
    bulkwrite__internal__v1__fleet_member__free_unpacked(a, NULL);
    bw_config_destroy(c);
}
END_TEST

START_TEST(keys) {
    char key[64];
    int len = bw_member_key("consumer", "host:18081", key, sizeof(key));
    ck_assert_str_eq(key, "member/consumer/host:18081");
    ck_assert_int_eq(len, (int)strlen(key));
    ck_assert(bw_member_key_is(key, (size_t)len));
    ck_assert(!bw_member_key_is("shard/3", 7));
}
END_TEST

Suite *fleet_suite(void) {
    Suite *s = suite_create("fleet");
    TCase *tc = tcase_create("fleet");
    tcase_add_test(tc, prints_follow_the_shared_settings);
    tcase_add_test(tc, the_earlier_member_decides);
    tcase_add_test(tc, keys);
    tcase_add_test(tc, a_credential_is_one_client);
    suite_add_tcase(s, tc);
    return s;
}
