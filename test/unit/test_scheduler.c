/* test_scheduler.c — the order in which shards get workers (consumer/scheduler.c).
 *
 * The consumer's state is set up by hand: eight assigned shards, each with one buffered
 * message (a real one, fetched from librdkafka's mock cluster), and no worker threads, so
 * the jobs the dispatcher hands out stay on the pool's queue, where the test reads which
 * shard each went to and then frees the shard again. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "consumer.h"
#include "helpers.h"

#include <librdkafka/rdkafka_mock.h> /* after rdkafka.h (consumer.h) */

bw_consumer_t consumer; /* consumer/main.c's, which the unit tests do not link */

/* n messages from a fresh mock cluster into out (buffers need real rd_kafka_message_t):
 * with shape, message i carries the batcher's headers for a pin batch of shape[i] =
 * {op, rows}; without, no headers. kafka_out gets the consumer and the producer (which
 * owns the mock cluster, so it must outlive the consumer). */
static void real_messages(const int (*shape)[2], size_t n, rd_kafka_message_t **out, rd_kafka_t **kafka_out) {
    char err[256], bootstraps[256], rows[16], op[4];
    rd_kafka_conf_t *pc = rd_kafka_conf_new();
    ck_assert_int_eq(rd_kafka_conf_set(pc, "test.mock.num.brokers", "1", err, sizeof(err)), RD_KAFKA_CONF_OK);
    ck_assert_int_eq(rd_kafka_conf_set(pc, "log_level", "3", err, sizeof(err)), RD_KAFKA_CONF_OK);
    rd_kafka_t *producer = rd_kafka_new(RD_KAFKA_PRODUCER, pc, err, sizeof(err));
    ck_assert_msg(producer != NULL, "producer: %s", err);
    rd_kafka_mock_cluster_t *mc = rd_kafka_handle_mock_cluster(producer);
    ck_assert_int_eq(rd_kafka_mock_topic_create(mc, "t", 1, 1), 0);
    snprintf(bootstraps, sizeof(bootstraps), "%s", rd_kafka_mock_cluster_bootstraps(mc));
    for (size_t i = 0; i < n; i++) {
        rd_kafka_headers_t *h = rd_kafka_headers_new(3);
        if (shape) {
            snprintf(op, sizeof(op), "%d", shape[i][0]);
            snprintf(rows, sizeof(rows), "%d", shape[i][1]);
            rd_kafka_header_add(h, "bw-type", -1, "pin", -1);
            rd_kafka_header_add(h, "bw-op", -1, op, -1);
            rd_kafka_header_add(h, "bw-rows", -1, rows, -1);
        }
        ck_assert_int_eq(rd_kafka_producev(producer, RD_KAFKA_V_TOPIC("t"), RD_KAFKA_V_PARTITION(0),
                                           RD_KAFKA_V_VALUE("v", 1), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                           RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END),
                         0);
    }
    ck_assert_int_eq(rd_kafka_flush(producer, 10000), 0);

    rd_kafka_conf_t *cc = rd_kafka_conf_new();
    ck_assert_int_eq(rd_kafka_conf_set(cc, "bootstrap.servers", bootstraps, err, sizeof(err)), RD_KAFKA_CONF_OK);
    ck_assert_int_eq(rd_kafka_conf_set(cc, "group.id", "scheduler-test", err, sizeof(err)), RD_KAFKA_CONF_OK);
    ck_assert_int_eq(rd_kafka_conf_set(cc, "log_level", "3", err, sizeof(err)), RD_KAFKA_CONF_OK);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, cc, err, sizeof(err));
    ck_assert_msg(rk != NULL, "consumer: %s", err);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, "t", 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    ck_assert_int_eq(rd_kafka_assign(rk, l), 0);
    rd_kafka_topic_partition_list_destroy(l);
    size_t got = 0;
    for (int i = 0; i < 200 && got < n; i++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m && m->err) rd_kafka_message_destroy(m);
        else if (m) out[got++] = m;
    }
    ck_assert_uint_eq(got, n);
    kafka_out[0] = rk;
    kafka_out[1] = producer;
}

static rd_kafka_t *kafka[2];
static rd_kafka_message_t *msg;

/* consumer.partitions (a slot per lane and shard) and consumer.shards, as main.c makes them. */
static void alloc_state(void) {
    consumer.slot_count = bw_config_slot_count(consumer.conf);
    consumer.partitions = calloc((size_t)consumer.slot_count, sizeof(*consumer.partitions));
    consumer.shards = calloc((size_t)consumer.conf->shard_count, sizeof(*consumer.shards));
    for (int slot = 0; slot < consumer.slot_count; slot++) {
        consumer.partitions[slot].shard = slot % consumer.conf->shard_count;
        consumer.partitions[slot].lane = slot / consumer.conf->shard_count;
    }
}

static void free_state(void) {
    for (int s = 0; s < consumer.slot_count; s++) free(consumer.partitions[s].buf);
    free(consumer.partitions);
    free(consumer.shards);
}

static void setup_state(int workers);

/* Eight assigned shards (two servers), each with one buffered message, unlimited rates. */
static void setup(int workers) {
    real_messages(NULL, 1, &msg, kafka);
    setup_state(workers);
}

/* The same with msg made already (8 workers). */
static void setup_with(rd_kafka_message_t *m) {
    msg = m;
    setup_state(8);
}

static void setup_state(int workers) {
    consumer = (bw_consumer_t){0};
    consumer.conf = t_ref_config();
    consumer.conf->workers = workers;
    int n = consumer.conf->shard_count;
    alloc_state();
    for (int s = 0; s < n; s++) {
        bw_partition_t *p = &consumer.partitions[s];
        p->assigned = 1;
        p->buf = malloc(sizeof(*p->buf));
        p->buf[0] = msg;
        p->len = p->cap = 1;
        consumer.shards[s].assigned_lanes = 1;
        bw_ratelimit_init(&consumer.shards[s].rl, 0, 0);
    }
    consumer.health = bw_health_new(n, consumer.conf->server_cnt, consumer.conf->shard_server);
    bw_health_set_limits(consumer.health, 2, 30000000);
    pthread_mutex_init(&consumer.mu, NULL);
    pthread_cond_init(&consumer.todo_cv, NULL);
    pthread_cond_init(&consumer.done_cv, NULL);
}

static void teardown(void) {
    free_state();
    bw_health_free(consumer.health);
    bw_config_destroy(consumer.conf);
    pthread_mutex_destroy(&consumer.mu);
    pthread_cond_destroy(&consumer.todo_cv);
    pthread_cond_destroy(&consumer.done_cv);
    rd_kafka_message_destroy(msg);
    rd_kafka_destroy(kafka[0]);
    rd_kafka_destroy(kafka[1]);
}

/* One turn: dispatch, then take every job the pool got (as if a worker finished it
 * without applying anything, so each shard keeps its backlog). Returns how many. */
static int turn(int *shards) {
    bw_scheduler_dispatch();
    int n = 0;
    pthread_mutex_lock(&consumer.mu);
    while (consumer.todo) {
        bw_job_t *j = consumer.todo;
        consumer.todo = j->next;
        shards[n++] = j->shard;
        consumer.shards[j->shard].job = NULL;
        free(j->msgs);
        free(j);
    }
    consumer.todo_tail = NULL;
    consumer.busy = 0;
    pthread_mutex_unlock(&consumer.mu);
    return n;
}

/* Every shard backlogged, 2 workers: the shards take turns in order, never the low
 * numbers first (the old dispatcher always began at shard 0). */
START_TEST(backlogged_shards_take_turns) {
    setup(2);
    int order[48], k = 0;
    for (int round = 0; round < 20; round++) {
        int got[8];
        ck_assert_int_eq(turn(got), 2); /* the pool's size */
        for (int i = 0; i < 2; i++) order[k++] = got[i];
    }
    for (int i = 0; i < k; i++) ck_assert_int_eq(order[i], i % 8);
    teardown();
}
END_TEST

/* A shard that cannot go now (nothing buffered, paused by an operator, held by its
 * health) is passed over, and the turn goes on with the next one. */
START_TEST(shards_that_cannot_go_are_passed_over) {
    setup(3);
    consumer.partitions[2].len = 0;
    consumer.shards[5].op_paused = 1;
    bw_health_report(consumer.health, 6, BW_FAIL_TIMEOUT, 0, bw_now_us());
    bw_health_report(consumer.health, 6, BW_FAIL_TIMEOUT, 0, bw_now_us()); /* held for 30 s */
    static const int ready[] = {0, 1, 3, 4, 7};
    int k = 0;
    for (int round = 0; round < 10; round++) {
        int got[8];
        int n = turn(got);
        ck_assert_int_eq(n, 3);
        for (int i = 0; i < n; i++, k++) ck_assert_int_eq(got[i], ready[k % 5]);
    }
    teardown();
}
END_TEST

/* With a free worker for every shard, one turn serves them all, in order. */
START_TEST(enough_workers_serve_everyone_in_one_turn) {
    setup(8);
    int got[8];
    ck_assert_int_eq(turn(got), 8);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(got[i], i);
    teardown();
}
END_TEST

/* ---- job planning: how many messages one transaction takes, and what it costs ---- */

/* Messages of shard 0 as the batcher writes them: (op, rows) per message, headers only. */
static rd_kafka_t *plan_kafka[2];
static rd_kafka_message_t *plan_msgs[8];

static void plan_setup(const int (*shape)[2], size_t n) {
    real_messages(shape, n, plan_msgs, plan_kafka);
    consumer = (bw_consumer_t){0};
    consumer.conf = t_ref_config();
    consumer.conf->workers = 4;
    consumer.conf->transaction_max_statements = 16;
    int shards = consumer.conf->shard_count;
    alloc_state();
    bw_partition_t *p = &consumer.partitions[0];
    p->assigned = 1;
    p->buf = malloc(n * sizeof(*p->buf));
    memcpy(p->buf, plan_msgs, n * sizeof(*p->buf));
    p->len = p->cap = n;
    consumer.shards[0].assigned_lanes = 1;
    bw_ratelimit_init(&consumer.shards[0].rl, 0, 0);
    bw_ratelimit_init(&consumer.shards[0].rl_rows, 0, 0);
    consumer.health = bw_health_new(shards, consumer.conf->server_cnt, consumer.conf->shard_server);
    bw_health_set_limits(consumer.health, 2, 30000000);
    pthread_mutex_init(&consumer.mu, NULL);
    pthread_cond_init(&consumer.todo_cv, NULL);
    pthread_cond_init(&consumer.done_cv, NULL);
}

static void plan_teardown(size_t n) {
    free_state();
    bw_health_free(consumer.health);
    bw_config_destroy(consumer.conf);
    pthread_mutex_destroy(&consumer.mu);
    pthread_cond_destroy(&consumer.todo_cv);
    pthread_cond_destroy(&consumer.done_cv);
    for (size_t i = 0; i < n; i++) rd_kafka_message_destroy(plan_msgs[i]);
    rd_kafka_destroy(plan_kafka[0]);
    rd_kafka_destroy(plan_kafka[1]);
}

/* The creates' rows form one run, cut into statements of the batch size (500): three
 * 300-row creates and two 100-row ones are 1,100 rows, 3 statements; the delete after
 * them is one more. Caps in statements, rows and messages stop the job where they bind. */
START_TEST(a_job_counts_statements_as_the_applier_plans_them) {
    static const int shape[][2] = {{BW_OP_CREATE, 300}, {BW_OP_CREATE, 300}, {BW_OP_CREATE, 300},
                                   {BW_OP_CREATE, 100}, {BW_OP_CREATE, 100}, {BW_OP_DELETE, 10}};
    size_t n = sizeof(shape) / sizeof(shape[0]);
    plan_setup(shape, n);
    bw_job_cost_t c;
    ck_assert_uint_eq(bw_partition_plan_job(0, n, 16, UINT64_MAX, &c), 6);
    ck_assert_uint_eq(c.statements, 4);
    ck_assert_uint_eq(c.rows, 1110);
    ck_assert_uint_eq(bw_partition_plan_job(0, n, 2, UINT64_MAX, &c), 4); /* 1,000 rows: 2 statements */
    ck_assert_uint_eq(c.statements, 2);
    ck_assert_uint_eq(c.rows, 1000);
    ck_assert_uint_eq(bw_partition_plan_job(0, n, 1, UINT64_MAX, &c), 1); /* 600 rows would be 2 */
    ck_assert_uint_eq(c.statements, 1);
    ck_assert_uint_eq(bw_partition_plan_job(0, n, 3, UINT64_MAX, &c), 5); /* the delete would be a 4th */
    ck_assert_uint_eq(c.statements, 3);
    ck_assert_uint_eq(bw_partition_plan_job(0, n, 16, 650, &c), 2);
    ck_assert_uint_eq(c.rows, 600);
    ck_assert_uint_eq(bw_partition_plan_job(0, n, 16, 10, &c), 1); /* the first message goes whatever it costs */
    ck_assert_uint_eq(c.rows, 300);
    ck_assert_uint_eq(bw_partition_plan_job(0, 1, 16, UINT64_MAX, &c), 1); /* a probe: one message */
    plan_teardown(n);
}
END_TEST

/* A shard limited to 20 statements/s takes 2 statements per job (a tenth of a second:
 * three 300-row creates, 900 rows in statements of 500), and the limiter is charged for
 * both: the next job waits 100 ms. A rows/s budget binds
 * instead when it is the tighter one. */
START_TEST(a_limited_shard_pays_per_statement_and_per_row) {
    static const int shape[][2] = {{BW_OP_CREATE, 300}, {BW_OP_CREATE, 300}, {BW_OP_CREATE, 300},
                                   {BW_OP_CREATE, 300}};
    size_t n = sizeof(shape) / sizeof(shape[0]);
    plan_setup(shape, n);
    bw_shard_t *p = &consumer.shards[0];
    int64_t now = bw_now_us();
    bw_ratelimit_init(&p->rl, 20, now);
    bw_scheduler_dispatch();
    ck_assert_ptr_nonnull(p->job);
    ck_assert_uint_eq(p->job->cnt, 3);
    ck_assert_int_ge(bw_ratelimit_wait(&p->rl, now), 90000); /* two permits: 100 ms, less the dispatch's own time */
    free(p->job->msgs);
    free(p->job);
    p->job = NULL;
    consumer.todo = consumer.todo_tail = NULL;
    consumer.busy = 0;

    now = bw_now_us();
    bw_ratelimit_init(&p->rl, 1000, now);
    bw_ratelimit_init(&p->rl_rows, 3000, now); /* 300 rows a tenth of a second: one message */
    p->ready_at_us = 0;
    bw_scheduler_dispatch();
    ck_assert_ptr_nonnull(p->job);
    ck_assert_uint_eq(p->job->cnt, 1);
    ck_assert_int_ge(bw_ratelimit_wait(&p->rl_rows, now), 90000);
    free(p->job->msgs);
    free(p->job);
    p->job = NULL;
    consumer.todo = consumer.todo_tail = NULL;
    consumer.busy = 0;
    plan_teardown(n);
}
END_TEST


/* ---- lanes: a shard's statements shared by weight ---- */

/* Shard 0 with 8 one-statement messages in each of two lanes, "urgent" (weight 4) and
 * the default (weight 1); one worker. Returns the lanes of the first `jobs` jobs. */
static void lane_setup(const char *lanes) {
    static const int shape[][2] = {{BW_OP_DELETE, 1}, {BW_OP_DELETE, 1}, {BW_OP_DELETE, 1}, {BW_OP_DELETE, 1},
                                   {BW_OP_DELETE, 1}, {BW_OP_DELETE, 1}, {BW_OP_DELETE, 1}, {BW_OP_DELETE, 1}};
    real_messages(shape, 8, plan_msgs, plan_kafka);
    consumer = (bw_consumer_t){0};
    consumer.conf = t_conf_variant_load("lanes = (", lanes);
    consumer.conf->workers = 1;
    alloc_state();
    consumer.shards[0].assigned_lanes = consumer.conf->lane_cnt;
    bw_ratelimit_init(&consumer.shards[0].rl, 0, 0);
    bw_ratelimit_init(&consumer.shards[0].rl_rows, 0, 0);
    consumer.health = bw_health_new(consumer.conf->shard_count, consumer.conf->server_cnt, consumer.conf->shard_server);
    bw_health_set_limits(consumer.health, 2, 30000000);
    pthread_mutex_init(&consumer.mu, NULL);
    pthread_cond_init(&consumer.todo_cv, NULL);
    pthread_cond_init(&consumer.done_cv, NULL);
}

/* Gives `lane`'s partition of shard 0 the 8 messages (each job takes one: a cap of one statement). */
static bw_partition_t *lane_fill(int lane) {
    bw_partition_t *p = &consumer.partitions[bw_config_slot(consumer.conf, lane, 0)];
    p->assigned = 1;
    p->buf = malloc(8 * sizeof(*p->buf));
    memcpy(p->buf, plan_msgs, 8 * sizeof(*p->buf));
    p->len = p->cap = 8;
    return p;
}

/* One job of shard 0 (a one-statement cap), as if applied: its lane's partition keeps
 * its messages (the test counts, it does not drain). Returns the job's lane. */
static int lane_turn(void) {
    consumer.conf->transaction_max_statements = 1;
    bw_scheduler_dispatch();
    bw_job_t *j = consumer.shards[0].job;
    ck_assert_ptr_nonnull(j);
    int lane = consumer.partitions[j->slot].lane;
    ck_assert_int_eq(j->shard, 0);
    consumer.shards[0].job = NULL;
    free(j->msgs);
    free(j);
    consumer.todo = consumer.todo_tail = NULL;
    consumer.busy = 0;
    return lane;
}

static void lane_teardown(void) {
    for (int s = 0; s < consumer.slot_count; s++) { /* the messages belong to plan_msgs */
        consumer.partitions[s].len = 0;
    }
    plan_teardown(8);
}

/* Weights 4 (urgent) and 1 (default), both with work: of every 5 statements, 4 are the
 * urgent lane's; the order is the lanes' passes, not first come. */
START_TEST(lanes_share_a_shard_by_weight) {
    lane_setup("lanes = ( { name = \"urgent\"; weight = 4; }");
    ck_assert_int_eq(consumer.conf->lane_cnt, 2);
    ck_assert_str_eq(consumer.conf->lanes[0].name, "default");
    ck_assert_str_eq(consumer.conf->lanes[1].name, "urgent");
    lane_fill(0);
    lane_fill(1);
    int per_lane[2] = {0, 0};
    for (int i = 0; i < 100; i++) per_lane[lane_turn()]++;
    ck_assert_int_eq(per_lane[1], 80);
    ck_assert_int_eq(per_lane[0], 20);
    lane_teardown();
}
END_TEST

/* A lane without work leaves the shard to the others; when it gets work again it takes
 * its share from then on, not a burst of credit saved while it was idle. */
START_TEST(an_idle_lane_saves_no_credit) {
    lane_setup("lanes = ( { name = \"urgent\"; weight = 4; }");
    bw_partition_t *urgent = lane_fill(1);
    lane_fill(0);
    urgent->len = 0; /* idle */
    for (int i = 0; i < 50; i++) ck_assert_int_eq(lane_turn(), 0);
    urgent->len = 8; /* work again */
    int per_lane[2] = {0, 0};
    for (int i = 0; i < 10; i++) per_lane[lane_turn()]++;
    ck_assert_int_eq(per_lane[1], 8); /* 4:1, not 10:0 */
    ck_assert_int_eq(per_lane[0], 2);
    lane_teardown();
}
END_TEST

/* Without lanes in the file there is one, "default", on kafka.topic; lanes get
 * <kafka.topic>.<name>, and a listed "default" sets its weight and goes first. */
START_TEST(lanes_from_the_config) {
    bw_config_t *c = t_ref_config();
    ck_assert_int_eq(c->lane_cnt, 1);
    ck_assert_str_eq(c->lanes[0].topic, c->topic);
    ck_assert_int_eq(bw_config_lane(c, ""), 0);
    ck_assert_int_eq(bw_config_lane(c, "urgent"), -1);
    bw_config_destroy(c);
    c = t_conf_variant_load("lanes = (", "lanes = ( { name = \"bulk\"; }, { name = \"default\"; weight = 3; }");
    ck_assert_int_eq(c->lane_cnt, 2);
    ck_assert_str_eq(c->lanes[0].name, "default");
    ck_assert_int_eq(c->lanes[0].weight, 3);
    ck_assert_str_eq(c->lanes[1].name, "bulk");
    ck_assert_int_eq(c->lanes[1].weight, 1);
    char topic[300];
    snprintf(topic, sizeof(topic), "%s.bulk", c->topic);
    ck_assert_str_eq(c->lanes[1].topic, topic);
    ck_assert_int_eq(bw_config_topic_lane(c, topic), 1);
    ck_assert_int_eq(bw_config_slot(c, 1, 1), c->shard_count + 1);
    bw_config_destroy(c);
    char *path = t_conf_variant("lanes = (", "lanes = ( { name = \"Urgent!\"; }", NULL);
    char err[512] = "";
    ck_assert_ptr_null(bw_config_load(path, err, sizeof(err)));
    ck_assert_msg(strstr(err, "\"Urgent!\" is not a lane name") != NULL, "%s", err);
    t_unlink_free(path);
}
END_TEST

/* ---- server budgets: a whole server's statements shared by its shards with work ---- */

#define MS 1000LL

/* Every shard assigned, with one buffered message (msg: one statement; a shape's: its
 * rows), 8 workers (the pool never fills), server budgets ready, no budget set. */
static void budget_setup(const int (*shape)[2]) {
    if (shape) {
        real_messages(shape, 1, &msg, kafka);
        rd_kafka_message_t *m = msg;
        setup_with(m);
    } else {
        setup(8);
    }
    for (int s = 0; s < consumer.conf->shard_count; s++) bw_ratelimit_init(&consumer.shards[s].rl_rows, 0, 0);
    bw_scheduler_servers_init(0);
}

static void budget_teardown(void) {
    free(consumer.servers);
    teardown();
}

/* Takes every job the pool got back, as if applied at once (its message stays: the shard
 * always has work): adds each job's statements and messages to its shard's counts. */
static void take_jobs(uint64_t *statements, uint64_t *messages) {
    pthread_mutex_lock(&consumer.mu);
    while (consumer.todo) {
        bw_job_t *j = consumer.todo;
        consumer.todo = j->next;
        statements[j->shard] += j->statements;
        if (messages) messages[j->shard] += j->cnt;
        consumer.shards[j->shard].job = NULL;
        free(j->msgs);
        free(j);
    }
    consumer.todo_tail = NULL;
    consumer.busy = 0;
    pthread_mutex_unlock(&consumer.mu);
}

/* The dispatcher from *now for `ms` milliseconds of the test's clock, a turn each ms. */
static void run_ms(int64_t *now, int ms, uint64_t *statements, uint64_t *messages) {
    for (int i = 0; i < ms; i++, *now += MS) {
        bw_scheduler_dispatch_at(*now);
        take_jobs(statements, messages);
    }
}

static uint64_t sum_of(const uint64_t *x, int from, int to) {
    uint64_t n = 0;
    for (int s = from; s <= to; s++) n += x[s];
    return n;
}

/* mysql-a (shards 0 to 3) gets 40 statements/s for the whole server: over 10 s its four
 * shards, all with work, apply 400 together (one second's burst at most above), about
 * 100 each, in turn; mysql-b's shards, without a budget, go on at every turn. Its shards'
 * own rates stay (unlimited here), so the server's budget is what binds. */
START_TEST(a_server_budget_is_shared_by_its_shards) {
    budget_setup(NULL);
    int64_t now = 0;
    bw_scheduler_server_budget(0, 40, 0, now, "");
    ck_assert_int_eq(consumer.budgeted, 1);
    ck_assert(consumer.servers[0].rl.rate == 40 && consumer.servers[1].rl.rate == 0);
    uint64_t got[8] = {0};
    run_ms(&now, 10000, got, NULL);
    uint64_t server_a = sum_of(got, 0, 3);
    ck_assert_msg(server_a >= 400 - 40 && server_a <= 400 + 40 + 1, "mysql-a applied %llu statements in 10 s",
                  (unsigned long long)server_a);
    for (int s = 0; s < 4; s++) /* round-robin within the server: each about a quarter */
        ck_assert_msg(got[s] >= 90 && got[s] <= 110, "shard %d applied %llu of %llu", s, (unsigned long long)got[s],
                      (unsigned long long)server_a);
    for (int s = 4; s < 8; s++) ck_assert_uint_eq(got[s], 10000); /* one per turn: not held by mysql-a's budget */
    budget_teardown();
}
END_TEST

/* A shard's own lower rate still binds below the server's budget: shard 1 at 2
 * statements/s takes its 20 in 10 s, and the three others share the rest of the 400. */
START_TEST(a_shard_rate_binds_below_its_server_budget) {
    budget_setup(NULL);
    int64_t now = 0;
    bw_ratelimit_init(&consumer.shards[1].rl, 2, now);
    bw_scheduler_server_budget(0, 40, 0, now, "");
    uint64_t got[8] = {0};
    run_ms(&now, 10000, got, NULL);
    ck_assert_msg(got[1] >= 19 && got[1] <= 21, "shard 1 applied %llu", (unsigned long long)got[1]);
    uint64_t server_a = sum_of(got, 0, 3);
    ck_assert_msg(server_a >= 400 - 40 && server_a <= 400 + 40 + 1, "mysql-a applied %llu", (unsigned long long)server_a);
    for (int s = 0; s < 4; s++)
        if (s != 1)
            ck_assert_msg(got[s] >= 115 && got[s] <= 140, "shard %d applied %llu", s, (unsigned long long)got[s]);
    budget_teardown();
}
END_TEST

/* A row budget for the server: 2,000 rows/s of 100-row creates is 20 messages a second,
 * shared by its four shards; the statements budget is none. */
START_TEST(a_server_row_budget_is_shared_too) {
    static const int shape[][2] = {{BW_OP_CREATE, 100}};
    budget_setup(shape);
    int64_t now = 0;
    bw_scheduler_server_budget(0, 0, 2000, now, "");
    ck_assert(consumer.servers[0].limited && consumer.servers[0].rl.rate == 0 && consumer.servers[0].rl_rows.rate == 2000);
    uint64_t statements[8] = {0}, messages[8] = {0};
    run_ms(&now, 10000, statements, messages);
    uint64_t rows = sum_of(messages, 0, 3) * 100;
    ck_assert_msg(rows >= 20000 - 2000 && rows <= 20000 + 2000 + 100, "mysql-a applied %llu rows", (unsigned long long)rows);
    for (int s = 0; s < 4; s++)
        ck_assert_msg(messages[s] >= 45 && messages[s] <= 55, "shard %d applied %llu messages", s,
                      (unsigned long long)messages[s]);
    budget_teardown();
}
END_TEST

/* Without a budget dispatch is as it was: every shard at every turn, in the old order;
 * a budget set and cleared again leaves the same. */
START_TEST(no_server_budget_changes_nothing) {
    budget_setup(NULL);
    int64_t now = 0;
    uint64_t got[8] = {0};
    run_ms(&now, 100, got, NULL);
    for (int s = 0; s < 8; s++) ck_assert_uint_eq(got[s], 100);
    bw_scheduler_server_budget(0, 40, 500, now, "");
    bw_scheduler_server_budget(0, 0, 0, now, "");
    ck_assert_int_eq(consumer.budgeted, 0);
    ck_assert(!consumer.servers[0].limited && consumer.servers[0].rl.rate == 0 && consumer.servers[0].rl_rows.rate == 0);
    memset(got, 0, sizeof(got));
    run_ms(&now, 100, got, NULL);
    for (int s = 0; s < 8; s++) ck_assert_uint_eq(got[s], 100);
    /* a full pool: the turns go round in shard order, as backlogged_shards_take_turns */
    consumer.conf->workers = 2;
    consumer.next_shard = 0;
    for (int k = 0; k < 40; k += 2) {
        int shards[8];
        ck_assert_int_eq(turn(shards), 2);
        ck_assert(shards[0] == k % 8 && shards[1] == (k + 1) % 8);
    }
    budget_teardown();
}
END_TEST

/* With several consumers, each takes the budget × its shards of the server / the
 * server's shards: holding 2 of mysql-a's 4, this one runs them at 20 of the 40. */
START_TEST(each_consumer_takes_its_share) {
    budget_setup(NULL);
    consumer.shards[2].assigned_lanes = consumer.shards[3].assigned_lanes = 0; /* another consumer's */
    consumer.partitions[2].assigned = consumer.partitions[3].assigned = 0;
    int64_t now = 0;
    bw_scheduler_server_budget(0, 40, 4000, now, "");
    ck_assert(consumer.servers[0].held == 2 && consumer.servers[0].rl.rate == 20 && consumer.servers[0].rl_rows.rate == 2000);
    uint64_t got[8] = {0};
    run_ms(&now, 10000, got, NULL);
    uint64_t here = sum_of(got, 0, 3);
    ck_assert_msg(here >= 200 - 20 && here <= 200 + 20 + 1, "this consumer applied %llu of mysql-a's", (unsigned long long)here);
    ck_assert(got[2] == 0 && got[3] == 0);
    /* the assignment changes: the share follows */
    consumer.shards[2].assigned_lanes = 1;
    consumer.partitions[2].assigned = 1;
    bw_scheduler_server_budget(0, 40, 4000, now, "");
    ck_assert(consumer.servers[0].held == 3 && consumer.servers[0].rl.rate == 30);
    consumer.shards[0].assigned_lanes = consumer.shards[1].assigned_lanes = consumer.shards[2].assigned_lanes = 0;
    bw_scheduler_server_budget(0, 40, 4000, now, "");
    ck_assert(consumer.servers[0].held == 0 && !consumer.servers[0].limited && consumer.budgeted == 0);
    consumer.shards[0].assigned_lanes = consumer.shards[1].assigned_lanes = consumer.shards[2].assigned_lanes = 1;
    budget_teardown();
}
END_TEST

/* A limited server paces its shards in small steps: at 20 statements/s for the server a
 * job takes a tenth of a second of it (2 statements: three 300-row creates), whatever
 * the shard's own rate, and the server's bucket pays for them. */
START_TEST(a_budgeted_server_paces_jobs_in_small_steps) {
    static const int shape[][2] = {{BW_OP_CREATE, 300}, {BW_OP_CREATE, 300}, {BW_OP_CREATE, 300},
                                   {BW_OP_CREATE, 300}};
    size_t n = sizeof(shape) / sizeof(shape[0]);
    plan_setup(shape, n);
    bw_scheduler_servers_init(0);
    bw_shard_t *p = &consumer.shards[0];
    bw_scheduler_server_budget(0, 80, 0, 0, ""); /* shard 0 is the only one of mysql-a's held: 20 of the 80 */
    ck_assert(consumer.servers[0].rl.rate == 20);
    bw_scheduler_dispatch_at(0);
    ck_assert_ptr_nonnull(p->job);
    ck_assert_uint_eq(p->job->cnt, 3);
    ck_assert_int_eq(bw_ratelimit_wait(&consumer.servers[0].rl, 0), 100 * MS); /* two permits at 20/s */
    ck_assert_int_eq(bw_ratelimit_wait(&p->rl, 0), 0);
    free(p->job->msgs);
    free(p->job);
    p->job = NULL;
    consumer.todo = consumer.todo_tail = NULL;
    consumer.busy = 0;
    /* the server waits: the shard is not marked, the dispatcher comes back when it may go */
    ck_assert_int_eq(bw_scheduler_dispatch_at(50 * MS), 50 * MS);
    ck_assert_ptr_null(p->job);
    ck_assert_int_eq(p->ready_at_us, 0);
    free(consumer.servers);
    plan_teardown(n);
}
END_TEST

Suite *scheduler_suite(void) {
    Suite *s = suite_create("scheduler");
    TCase *tc = tcase_create("order");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, backlogged_shards_take_turns);
    tcase_add_test(tc, shards_that_cannot_go_are_passed_over);
    tcase_add_test(tc, enough_workers_serve_everyone_in_one_turn);
    suite_add_tcase(s, tc);
    TCase *plan = tcase_create("plan");
    tcase_set_timeout(plan, 30);
    tcase_add_test(plan, a_job_counts_statements_as_the_applier_plans_them);
    tcase_add_test(plan, a_limited_shard_pays_per_statement_and_per_row);
    suite_add_tcase(s, plan);
    TCase *lanes = tcase_create("lanes");
    tcase_set_timeout(lanes, 30);
    tcase_add_test(lanes, lanes_share_a_shard_by_weight);
    tcase_add_test(lanes, an_idle_lane_saves_no_credit);
    tcase_add_test(lanes, lanes_from_the_config);
    suite_add_tcase(s, lanes);
    TCase *budgets = tcase_create("server budgets");
    tcase_set_timeout(budgets, 30);
    tcase_add_test(budgets, a_server_budget_is_shared_by_its_shards);
    tcase_add_test(budgets, a_shard_rate_binds_below_its_server_budget);
    tcase_add_test(budgets, a_server_row_budget_is_shared_too);
    tcase_add_test(budgets, no_server_budget_changes_nothing);
    tcase_add_test(budgets, each_consumer_takes_its_share);
    tcase_add_test(budgets, a_budgeted_server_paces_jobs_in_small_steps);
    suite_add_tcase(s, budgets);
    return s;
}
