/* test_relay_hold.c - the relay's held sends (relay/route.c: a worker
 * sends the few messages of a run itself under the I/O lock, or tells the
 * I/O thread): two nodes in this process, each with its own scheduler (two
 * workers) and relay, clients on node 1 sending bursts of 1 to 12 messages
 * (both sides of HOLD_MAX) to echoes on node 2 and waiting for every
 * answer, exactly once and in order, many rounds, all at once: workers
 * and the I/O threads race for the I/O lock all along (run it under TSan).
 * Rounds: SN_HOLD_ROUNDS (default 200).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "relay.h"
#include "schednode/schednode.h"
#include "twonodes.h"

#define CLIENTS 12

typedef struct client {
    sn_pid_t echo;
    uint32_t rounds, burst, round;
    uint64_t sent, got;
} client_t;

static int client_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    client_t *c = state;
    if (!*input || (*input)->len != sizeof c->echo + 8)
        return SN_EINVAL;
    memcpy(&c->echo, (*input)->data, sizeof c->echo);
    memcpy(&c->rounds, (*input)->data + sizeof c->echo, 4);
    memcpy(&c->burst, (*input)->data + sizeof c->echo + 4, 4);
    return strcmp(method, "run") == 0 ? 0 : SN_ENOMETHOD;
}

static void client_burst(client_t *c, sn_step_out_t *out)
{
    for (uint32_t i = 0; i < c->burst; i++, c->sent++)
        sn_out_send(out, c->echo, 0, &(sn_payload_t *){sn_payload_u64(c->sent)});
}

static void client_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    client_t *c = state;
    out->status = SN_IDLE;
    if (n == 0)
        client_burst(c, out);
    for (size_t i = 0; i < n; i++) {
        uint64_t seq = UINT64_MAX;
        if (ev[i].error || ev[i].type != SN_EV_MESSAGE || !ev[i].data || ev[i].data->len != 8) {
            sn_out_fail(out, SN_EINVAL, "client: unexpected event (error %d)", ev[i].error);
            return;
        }
        memcpy(&seq, ev[i].data->data, 8);
        if (seq != c->got) {
            sn_out_fail(out, SN_EINVAL, "client: answer %llu came when %llu was due", (unsigned long long)seq,
                        (unsigned long long)c->got);
            return;
        }
        if (++c->got == c->sent && ++c->round == c->rounds) {
            out->status = SN_DONE;
            return;
        }
        if (c->got == c->sent)
            client_burst(c, out);
    }
}

static int echo_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    return strcmp(method, "echo") == 0 ? 0 : SN_ENOMETHOD;
}

static void echo_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    out->status = SN_IDLE;
    for (size_t i = 0; i < n; i++)
        if (ev[i].type == SN_EV_MESSAGE)
            sn_out_send(out, ev[i].from, 0, &ev[i].data);
}

static const sn_type_t types[] = {
    {.name = "hclient", .version = 1, .state_size = sizeof(client_t), .init = client_init, .step = client_step},
    {.name = "hecho", .version = 1, .init = echo_init, .step = echo_step}};

typedef struct call {
    sn_sched_t *sched;
    sn_pid_t echo;
    uint32_t rounds, burst;
    int rc;
    char why[256];
} call_t;

static void *run_client(void *arg)
{
    call_t *c = arg;
    unsigned char in[sizeof(sn_pid_t) + 8];
    memcpy(in, &c->echo, sizeof c->echo);
    memcpy(in + sizeof c->echo, &c->rounds, 4);
    memcpy(in + sizeof c->echo + 4, &c->burst, 4);
    sn_payload_t *input = sn_payload_new(SN_CT_BYTES, in, sizeof in), *res = NULL;
    c->rc = sn_call(c->sched, "hclient", "run", &input, 120000, &res);
    snprintf(c->why, sizeof c->why, "%.*s", res ? (int)res->len : 0, res ? (const char *)res->data : "");
    sn_payload_destroy(&res);
    return NULL;
}

static void test_bursts_across_nodes(void **unused)
{
    (void)unused;
    const char *env = getenv("SN_HOLD_ROUNDS");
    uint32_t rounds = env && atoi(env) > 0 ? (uint32_t)atoi(env) : 200;
    node_t n1, n2;
    two_nodes(&n1, &n2, types, sizeof types / sizeof types[0]);
    call_t calls[CLIENTS];
    pthread_t th[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        calls[i] = (call_t){.sched = n1.sched, .rounds = rounds, .burst = 1 + (uint32_t)i};
        assert_int_equal(sn_spawn(n2.sched, "hecho", "echo", NULL, NULL, NULL, &calls[i].echo), 0);
    }
    for (int i = 0; i < CLIENTS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, run_client, &calls[i]), 0);
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < CLIENTS; i++)
        if (calls[i].rc != 0)
            fail_msg("client with bursts of %u: %s %s", calls[i].burst, sn_strerror(calls[i].rc), calls[i].why);
    node_stop(&n1);
    node_stop(&n2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bursts_across_nodes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
