/* test_notify.c — the sd_notify datagram (common/notify.c): what a service manager
 * listening on NOTIFY_SOCKET receives, on a path and on an abstract name, and nothing
 * done without NOTIFY_SOCKET. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "helpers.h"
#include "notify.h"

/* A bound datagram socket standing in for systemd; name as NOTIFY_SOCKET spells it. */
typedef struct {
    int fd;
    char name[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char dir[64];
} manager_t;

static void manager_bind(manager_t *m, int abstract) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    socklen_t len;
    m->dir[0] = '\0';
    if (abstract) {
        snprintf(m->name, sizeof(m->name), "@bw-notify-test-%ld", (long)getpid());
        memcpy(addr.sun_path, m->name, strlen(m->name));
        addr.sun_path[0] = '\0';
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(m->name));
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(m->dir, sizeof(m->dir), "%s/bw-notify.XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
        ck_assert_ptr_nonnull(mkdtemp(m->dir));
        snprintf(m->name, sizeof(m->name), "%s/notify", m->dir);
        memcpy(addr.sun_path, m->name, strlen(m->name) + 1);
        len = sizeof(addr);
    }
    m->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(m->fd, 0);
    ck_assert_int_eq(bind(m->fd, (struct sockaddr *)&addr, len), 0);
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", m->name, 1), 0);
}

/* The next datagram's text, or "" when none is waiting. */
static const char *manager_receive(manager_t *m) {
    static char text[1024];
    ssize_t n = recv(m->fd, text, sizeof(text) - 1, MSG_DONTWAIT);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

static void manager_close(manager_t *m) {
    unsetenv("NOTIFY_SOCKET");
    close(m->fd);
    if (m->dir[0]) {
        unlink(m->name);
        rmdir(m->dir);
    }
}

START_TEST(sends_to_a_socket_path) {
    manager_t m;
    manager_bind(&m, 0);
    ck_assert_int_eq(bw_notify("READY=1"), 0);
    ck_assert_str_eq(manager_receive(&m), "READY=1");
    ck_assert_int_eq(bw_notify("RELOADING=1\nMONOTONIC_USEC=12"), 0);
    ck_assert_str_eq(manager_receive(&m), "RELOADING=1\nMONOTONIC_USEC=12");
    ck_assert_str_eq(manager_receive(&m), ""); /* one datagram per call */
    manager_close(&m);
}
END_TEST

START_TEST(sends_to_an_abstract_name) {
    manager_t m;
    manager_bind(&m, 1);
    ck_assert_int_eq(bw_notify("STOPPING=1"), 0);
    ck_assert_str_eq(manager_receive(&m), "STOPPING=1");
    manager_close(&m);
}
END_TEST

START_TEST(without_notify_socket_does_nothing) {
    unsetenv("NOTIFY_SOCKET");
    ck_assert_int_eq(bw_notify("READY=1"), 0);
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", "", 1), 0);
    ck_assert_int_eq(bw_notify("READY=1"), 0);
    unsetenv("NOTIFY_SOCKET");
}
END_TEST

START_TEST(a_socket_nobody_listens_on_fails) {
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", "/nonexistent/bw-notify", 1), 0);
    ck_assert_int_eq(bw_notify("READY=1"), -1);
    ck_assert_int_eq(setenv("NOTIFY_SOCKET", "vsock:2:1234", 1), 0); /* not AF_UNIX */
    ck_assert_int_eq(bw_notify("READY=1"), -1);
    unsetenv("NOTIFY_SOCKET");
}
END_TEST

Suite *notify_suite(void) {
    Suite *s = suite_create("notify");
    TCase *tc = tcase_create("sd_notify");
    tcase_add_test(tc, sends_to_a_socket_path);
    tcase_add_test(tc, sends_to_an_abstract_name);
    tcase_add_test(tc, without_notify_socket_does_nothing);
    tcase_add_test(tc, a_socket_nobody_listens_on_fails);
    suite_add_tcase(s, tc);
    return s;
}
