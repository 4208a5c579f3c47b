/* c11threads.c — linked into every program of a ThreadSanitizer build (make
 * SANITIZE=thread), nowhere else.
 *
 * Debian's librdkafka starts its threads with C11 thrd_create and locks with its mtx
 * and cnd functions.
 * glibc implements those without going through the pthread_create and pthread_mutex_*
 * symbols that TSan intercepts, so a librdkafka thread ran without TSan's per-thread
 * state and crashed in its first malloc (inside getaddrinfo), and its locks were
 * invisible. These definitions take precedence over glibc's for librdkafka (the
 * executable's symbols come first) and route everything through pthreads, which TSan
 * sees. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

typedef struct {
    thrd_start_t fn;
    void *arg;
} start_t;

static void *trampoline(void *p) {
    start_t s = *(start_t *)p;
    free(p);
    return (void *)(intptr_t)s.fn(s.arg);
}

static int result(int rc) {
    return rc == 0 ? thrd_success : rc == ETIMEDOUT ? thrd_timedout : rc == EBUSY ? thrd_busy : thrd_error;
}
int thrd_create(thrd_t *t, thrd_start_t fn, void *arg) {
    start_t *s = malloc(sizeof *s);
    if (!s) return thrd_nomem;
    s->fn = fn;
    s->arg = arg;
    int rc = pthread_create((pthread_t *)t, NULL, trampoline, s);
    if (rc) free(s);
    return result(rc);
}

int thrd_join(thrd_t t, int *res) {
    void *r;
    int rc = pthread_join((pthread_t)t, &r);
    if (!rc && res) *res = (int)(intptr_t)r;
    return result(rc);
}

int thrd_detach(thrd_t t) { return result(pthread_detach((pthread_t)t)); }

int mtx_init(mtx_t *m, int type) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (type & mtx_recursive) pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    int rc = pthread_mutex_init((pthread_mutex_t *)m, &a);
    pthread_mutexattr_destroy(&a);
    return result(rc);
}

int mtx_lock(mtx_t *m) { return result(pthread_mutex_lock((pthread_mutex_t *)m)); }
int mtx_trylock(mtx_t *m) { return result(pthread_mutex_trylock((pthread_mutex_t *)m)); }
int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict ts) {
    return result(pthread_mutex_timedlock((pthread_mutex_t *)m, ts));
}
int mtx_unlock(mtx_t *m) { return result(pthread_mutex_unlock((pthread_mutex_t *)m)); }
void mtx_destroy(mtx_t *m) { pthread_mutex_destroy((pthread_mutex_t *)m); }

int cnd_init(cnd_t *c) { return result(pthread_cond_init((pthread_cond_t *)c, NULL)); }
int cnd_signal(cnd_t *c) { return result(pthread_cond_signal((pthread_cond_t *)c)); }
int cnd_broadcast(cnd_t *c) { return result(pthread_cond_broadcast((pthread_cond_t *)c)); }
int cnd_wait(cnd_t *c, mtx_t *m) { return result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m)); }
int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict ts) {
    return result(pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, ts));
}
void cnd_destroy(cnd_t *c) { pthread_cond_destroy((pthread_cond_t *)c); }
