/* pool.c — the worker pool: consumer.workers threads that run jobs and hand them back.
 *
 * A job carries its own run (on a worker) and done (on the dispatcher, which also frees
 * it) functions, as librdkafka's ops carry theirs: the pool runs an apply (scheduler.c)
 * or a ledger read (rebalance.c) without knowing either. Each worker keeps one applier
 * (apply.h: its connections to the shards' servers), lent to every job it runs.
 * @locality dispatcher thread, except worker_main. @locks consumer.mu guards the queues. */
#include <stdlib.h>
#include <time.h>

#include "consumer.h"

static void *worker_main(void *arg) {
    (void)arg;
    bw_applier_t ap;
    bw_applier_init(&ap, consumer.conf, consumer.metrics, consumer.dead_letters);
    ap.jobs = consumer.table;
    pthread_mutex_lock(&consumer.mu);
    for (;;) {
        while (!consumer.todo && !consumer.stopping) {
            /* an idle worker wakes now and then to close connections idle too long, so
             * consumers x workers x servers does not pin server threads through a quiet night */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1 + consumer.conf->connection_idle_close_ms / 4000;
            if (pthread_cond_timedwait(&consumer.todo_cv, &consumer.mu, &ts) && !consumer.todo) {
                pthread_mutex_unlock(&consumer.mu);
                bw_applier_close_idle(&ap, bw_now_us());
                pthread_mutex_lock(&consumer.mu);
            }
        }
        if (!consumer.todo) break;
        bw_job_t *j = consumer.todo;
        consumer.todo = j->next;
        if (!consumer.todo) consumer.todo_tail = NULL;
        pthread_mutex_unlock(&consumer.mu);

        j->run(j, &ap);

        pthread_mutex_lock(&consumer.mu);
        j->next = consumer.done;
        consumer.done = j;
        pthread_cond_signal(&consumer.done_cv);
        /* wakes the dispatcher out of its Kafka poll (or makes its next poll return at
         * once): the shard's next job goes out now, not at the poll's timeout */
        if (consumer.poll_q) {
            pthread_mutex_unlock(&consumer.mu);
            rd_kafka_queue_yield(consumer.poll_q);
            pthread_mutex_lock(&consumer.mu);
        }
    }
    pthread_mutex_unlock(&consumer.mu);
    bw_applier_destroy(&ap);
    return NULL;
}

void bw_pool_start(void) {
    pthread_mutex_init(&consumer.mu, NULL);
    pthread_cond_init(&consumer.todo_cv, NULL);
    pthread_cond_init(&consumer.done_cv, NULL);
    consumer.workers = calloc((size_t)consumer.conf->workers, sizeof(*consumer.workers));
    for (int i = 0; i < consumer.conf->workers; i++) pthread_create(&consumer.workers[i], NULL, worker_main, NULL);
}

/* Every job must have been collected. */
void bw_pool_stop(void) {
    pthread_mutex_lock(&consumer.mu);
    consumer.stopping = 1;
    pthread_cond_broadcast(&consumer.todo_cv);
    pthread_mutex_unlock(&consumer.mu);
    for (int i = 0; i < consumer.conf->workers; i++) pthread_join(consumer.workers[i], NULL);
    free(consumer.workers);
}

/* Hands j to the pool; it comes back through bw_pool_collect (j->done). */
void bw_pool_submit(bw_job_t *j) {
    pthread_mutex_lock(&consumer.mu);
    consumer.busy++;
    if (consumer.todo_tail) consumer.todo_tail->next = j;
    else consumer.todo = j;
    consumer.todo_tail = j;
    pthread_cond_signal(&consumer.todo_cv);
    pthread_mutex_unlock(&consumer.mu);
}

int bw_pool_full(void) {
    pthread_mutex_lock(&consumer.mu);
    int full = consumer.busy >= consumer.conf->workers;
    pthread_mutex_unlock(&consumer.mu);
    return full;
}

/* Collects finished jobs (each one's done); waits up to wait_us for one. */
void bw_pool_collect(int64_t wait_us) {
    pthread_mutex_lock(&consumer.mu);
    if (!consumer.done && wait_us > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(wait_us % 1000000) * 1000;
        ts.tv_sec += wait_us / 1000000 + ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&consumer.done_cv, &consumer.mu, &ts);
    }
    bw_job_t *done = consumer.done;
    int n = 0;
    for (bw_job_t *j = done; j; j = j->next) n++;
    consumer.done = NULL;
    consumer.busy -= n;
    pthread_mutex_unlock(&consumer.mu);
    while (done) {
        bw_job_t *next = done->next;
        done->done(done);
        done = next;
    }
}
