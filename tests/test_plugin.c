/* test_plugin.c - loading plugins: a good one (its type and command work),
 * and each way loading can fail, with an error text that names the file
 * and says what is wrong. The plugins are built from tests/plugins/ into
 * SN_PLUGIN_DIR.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "schednode/schednode.h"

#ifndef SN_PLUGIN_DIR
#error "SN_PLUGIN_DIR must name the directory of the built test plugins"
#endif

#define WAIT_MS 20000
#define PLUGIN(name) SN_PLUGIN_DIR "/" name ".so"

/* "reverser": yields the plugin's "echo.reverse" command (by name) with its
 * input and finishes with the completion's data or error. */
typedef struct reverser {
    sn_payload_t *input;
    int sent;
} reverser_t;

static int reverser_init(sn_ctx_t *ctx, void *state, const char *method, sn_payload_t **input)
{
    reverser_t *r = state;
    if (strcmp(method, "run") != 0)
        return SN_ENOMETHOD;
    r->input = sn_take(input);
    return 0;
}

static void reverser_step(sn_ctx_t *ctx, void *state, sn_event_t *ev, size_t n, sn_step_out_t *out)
{
    reverser_t *r = state;
    if (!r->sent) {
        r->sent = 1;
        sn_yield_t *y = sn_out_yield(out, 0, "echo.reverse", 1);
        y->data = sn_take(&r->input);
        out->status = SN_WAIT;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SN_EV_YIELD_COMPLETE && ev[i].tag == 1) {
            if (ev[i].error)
                sn_out_fail(out, ev[i].error, "echo.reverse failed");
            else
                sn_out_done(out, &ev[i].data);
            return;
        }
    }
    sn_out_fail(out, SN_EPROTO, "no completion");
}

static void reverser_close(sn_ctx_t *ctx, void *state)
{
    reverser_t *r = state;
    sn_payload_destroy(&r->input);
}

static const sn_type_t reverser_type = {
    "reverser", 1, sizeof(reverser_t), reverser_init, reverser_step, reverser_close, NULL, NULL};

static sn_sched_t *mk(void)
{
    sn_sched_config_t cfg = {1, 2, 1};
    sn_sched_t *s = sn_sched_new(&cfg);
    assert_non_null(s);
    assert_int_equal(sn_type_register(s, &reverser_type), 0);
    return s;
}

/* The good plugin loads; "echo"/"say" and its command work. */
static void test_load_good(void **unused)
{
    sn_sched_t *s = mk();
    char err[512];
    memset(err, 'x', sizeof err);
    err[sizeof err - 1] = 0;
    int rc = sn_plugin_load(s, PLUGIN("plugin_good"), err, sizeof err);
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_string_equal(err, ""); /* cleared on success */
    assert_non_null(sn_type_find(s, "echo"));
    assert_true(sn_command_id(s, "echo.reverse") > 0);

    sn_payload_t *in = sn_payload_text("hello"), *res = NULL;
    rc = sn_call(s, "echo", "say", &in, WAIT_MS, &res);
    assert_int_not_equal(rc, SN_ETIMEDOUT);
    assert_int_equal(rc, 0);
    assert_null(in);
    assert_non_null(res);
    assert_int_equal(res->ctype, SN_CT_TEXT);
    assert_int_equal(res->len, 5);
    assert_string_equal((const char *)res->data, "hello");
    sn_payload_destroy(&res);

    /* the plugin's init decides about methods and input */
    in = sn_payload_text("x");
    assert_int_equal(sn_call(s, "echo", "shout", &in, WAIT_MS, &res), SN_ENOMETHOD);
    sn_payload_destroy(&in);
    assert_int_equal(sn_call(s, "echo", "say", NULL, WAIT_MS, &res), SN_EINVAL);
    assert_null(res);

    in = sn_payload_text("hello");
    rc = sn_call(s, "reverser", "run", &in, WAIT_MS, &res);
    assert_int_equal(rc, 0);
    assert_non_null(res);
    assert_string_equal((const char *)res->data, "olleh");
    sn_payload_destroy(&res);
    sn_sched_destroy(&s); /* unloads the plugin after its processes are gone */
    assert_null(s);
}

/* A missing file: SN_EPLUGIN, and the text names the path. */
static void test_load_missing(void **unused)
{
    sn_sched_t *s = mk();
    const char *path = PLUGIN("does_not_exist");
    char err[512] = "";
    assert_int_equal(sn_plugin_load(s, path, err, sizeof err), SN_EPLUGIN);
    assert_non_null(strstr(err, path));
    /* no buffer, or a tiny one: still the error, and no overflow */
    assert_int_equal(sn_plugin_load(s, path, NULL, 0), SN_EPLUGIN);
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    assert_int_equal(sn_plugin_load(s, path, tiny, sizeof tiny), SN_EPLUGIN);
    assert_true(memchr(tiny, 0, sizeof tiny) != NULL);
    sn_sched_destroy(&s);
}

/* A shared object without the schednode_plugin symbol. */
static void test_load_nosymbol(void **unused)
{
    sn_sched_t *s = mk();
    const char *path = PLUGIN("plugin_nosymbol");
    char err[512] = "";
    assert_int_equal(sn_plugin_load(s, path, err, sizeof err), SN_EPLUGIN);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "not a schednode plugin"));
    assert_non_null(strstr(err, SN_PLUGIN_SYMBOL));
    sn_sched_destroy(&s);
}

/* A plugin built for another API version is refused before its init. */
static void test_load_badversion(void **unused)
{
    sn_sched_t *s = mk();
    const char *path = PLUGIN("plugin_badversion");
    char err[512] = "";
    assert_int_equal(sn_plugin_load(s, path, err, sizeof err), SN_EPLUGIN);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "API"));
    char want[64];
    snprintf(want, sizeof want, "API %u", SN_API_VERSION + 1);
    assert_non_null(strstr(err, want)); /* says which version it has */
    assert_null(sn_type_find(s, "badversion-was-initialised"));
    sn_sched_destroy(&s);
}

/* A plugin whose init fails: its error comes back, and the text says so. */
static void test_load_initfail(void **unused)
{
    sn_sched_t *s = mk();
    const char *path = PLUGIN("plugin_initfail");
    char err[512] = "";
    assert_int_equal(sn_plugin_load(s, path, err, sizeof err), SN_EINVAL);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "failed to initialise"));
    sn_sched_destroy(&s);
}

/* Loading the good plugin twice: the second init fails (its type is taken)
 * with that error, and the first load keeps working. */
static void test_load_twice(void **unused)
{
    sn_sched_t *s = mk();
    const char *path = PLUGIN("plugin_good");
    char err[512] = "";
    assert_int_equal(sn_plugin_load(s, path, err, sizeof err), 0);
    assert_int_equal(sn_plugin_load(s, path, err, sizeof err), SN_EEXIST);
    assert_non_null(strstr(err, "failed to initialise"));
    sn_payload_t *in = sn_payload_text("still"), *res = NULL;
    assert_int_equal(sn_call(s, "echo", "say", &in, WAIT_MS, &res), 0);
    assert_string_equal((const char *)res->data, "still");
    sn_payload_destroy(&res);
    sn_sched_destroy(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_good),     cmocka_unit_test(test_load_missing),
        cmocka_unit_test(test_load_nosymbol), cmocka_unit_test(test_load_badversion),
        cmocka_unit_test(test_load_initfail), cmocka_unit_test(test_load_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
