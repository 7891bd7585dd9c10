/* readfile.c - a command handler that does blocking I/O off the workers.
 * A step must never block, so a process that wants a file yields the
 * command "readfile" with the path; the handler (called on the worker,
 * where it must not block either) hands the request to a thread of its
 * own, which reads the file and completes the yield with its contents.
 *
 *   cat read PATH        e.g. schednode call cat read /etc/hostname
 */
#include <errno.h>
#include <pthread.h>
#include <schednode/schednode.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BYTES (1u << 20)

typedef struct job {
    sn_sched_t *sched;
    sn_pid_t from;
    uint64_t tag;
    char path[4096];
} job_t;

/* The I/O thread: read, complete the yield (from any thread), done. */
static void *reader(void *arg)
{
    job_t *j = arg;
    sn_payload_t *result = NULL;
    int error = 0;
    FILE *f = fopen(j->path, "rb");
    char *buf = malloc(MAX_BYTES);
    size_t n = 0;
    if (!f || !buf) {
        error = SN_EINVAL;
        result = sn_payload_printf(SN_CT_ERROR, "cannot read %s: %s", j->path, f ? "out of memory" : strerror(errno));
    } else {
        n = fread(buf, 1, MAX_BYTES, f);
        result = sn_payload_new(SN_CT_TEXT, buf, n);
    }
    if (f)
        fclose(f);
    free(buf);
    sn_complete_yield(j->sched, j->from, j->tag, error, &result); /* takes result */
    free(j);
    return NULL;
}

static void readfile_cmd(sn_sched_t *sched, sn_request_t *req, void *arg)
{
    (void)arg;
    job_t *j = calloc(1, sizeof *j);
    pthread_t t;
    if (!j) {
        sn_payload_t *why = sn_payload_text("readfile: out of memory");
        sn_complete_yield(sched, req->from, req->tag, SN_ENOMEM, &why);
        return;
    }
    *j = (job_t){sched, req->from, req->tag, ""};
    if (req->data)
        snprintf(j->path, sizeof j->path, "%.*s", (int)req->data->len, (const char *)req->data->data);
    if (pthread_create(&t, NULL, reader, j) != 0) {
        free(j);
        sn_payload_t *why = sn_payload_text("readfile: cannot start a thread");
        sn_complete_yield(sched, req->from, req->tag, SN_ENOMEM, &why);
        return;
    }
    pthread_detach(t);
}

/* ---- the process type that uses it */
typedef struct cat {
    sn_payload_t *path;
    int asked;
} cat_t;

static int cat_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    (void)ctx;
    cat_t *c = state;
    if (strcmp(method, "read") != 0)
        return SN_ENOMETHOD;
    if (!*input)
        return SN_EINVAL;
    c->path = sn_take(input); /* ours now */
    return 0;
}

static void cat_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    (void)ctx;
    cat_t *c = state;
    if (!c->asked) {
        c->asked = 1;
        sn_yield_t *y = sn_out_yield(out, 0, "readfile", 1);
        if (y)
            y->data = sn_take(&c->path); /* the yield owns the path now */
        out->status = SN_WAIT;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type != SN_EV_YIELD_COMPLETE || ev[i].tag != 1)
            continue;
        if (ev[i].error) {
            sn_out_fail(out, ev[i].error, "%.*s", ev[i].data ? (int)ev[i].data->len : 0,
                        ev[i].data ? (const char *)ev[i].data->data : "");
            return;
        }
        sn_payload_t *contents = sn_take(&ev[i].data);
        sn_out_done(out, &contents);
        return;
    }
    out->status = SN_WAIT;
}

static void cat_close(sn_ctx_t *ctx, void *state)
{
    (void)ctx;
    cat_t *c = state;
    sn_payload_destroy(&c->path);
}

static const sn_type_t cat_type = {
    .name = "cat",
    .version = 1,
    .state_size = sizeof(cat_t),
    .init = cat_init,
    .step = cat_step,
    .close = cat_close,
};

static int readfile_plugin(sn_sched_t *sched)
{
    int rc = sn_command_register(sched, "readfile", readfile_cmd, NULL);
    return rc < 0 ? rc : sn_type_register(sched, &cat_type);
}
SN_PLUGIN_DEFINE("readfile", readfile_plugin);
