/* fuzz_config.c - the configuration loader (node/config.c, ZPL through
 * czmq's zconfig) on arbitrary file contents. sn_config_load takes a path
 * (it reads the file twice: zconfig parses it, and a bad key's line number
 * is looked up in the text), so each input is written to one file in a
 * private temporary directory first.
 *
 * Properties: it never crashes or leaks; a refusal says why in one line
 * that starts with the file's name; an accepted file holds what the schema
 * allows (the checks below mirror cluster-config/README.md).
 */
#include <czmq.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"
#include "log.h"

static char dir[64], path[128];
static FILE *devnull;

static void cleanup(void)
{
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "%s", "/tmp/sn-fuzz-config-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(path, sizeof path, "%s/node.cfg", dir);
    atexit(cleanup);
    /* zconfig reports syntax errors through zsys: keep the formatting, drop the output */
    devnull = fopen("/dev/null", "w");
    zsys_handler_set(NULL);
    zsys_set_logstream(devnull);
    return 0;
}

static bool endpoint_ok(const char *v)
{
    return v && !strncmp(v, "tcp://", 6) && strchr(v + 6, ':');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0])
        LLVMFuzzerInitialize(NULL, NULL);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t wrote = fwrite(data, 1, size, f);
    fclose(f);
    if (wrote != size)
        return 0;
    sn_node_config_t c;
    char err[1024];
    memset(err, 0x5a, sizeof err); /* not NUL-terminated unless the loader writes it */
    err[sizeof err - 1] = 0;
    int rc = sn_config_load(path, &c, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc != 0) {
        FUZZ_CHECK(!strncmp(err, path, strlen(path))); /* "FILE:LINE: KEY: what" or "FILE: what" */
        FUZZ_CHECK(strchr(err, '\n') == NULL);
    } else {
        FUZZ_CHECK(c.own != NULL);
        FUZZ_CHECK(c.workers >= 0 && c.workers <= 1024);
        FUZZ_CHECK(c.log_level >= -1 && c.log_level <= SN__LOG_DEBUG);
        FUZZ_CHECK(!c.listen || endpoint_ok(c.listen));
        FUZZ_CHECK(!c.advertise || endpoint_ok(c.advertise));
        for (size_t i = 0; i < c.nseeds; i++)
            FUZZ_CHECK(endpoint_ok(c.seeds[i]));
        FUZZ_CHECK(!c.nseeds || c.listen);
        FUZZ_CHECK(!c.cert == !c.authorized);
        FUZZ_CHECK(!c.cert || (c.cert[0] == '/' && c.authorized[0] == '/'));
        for (size_t i = 0; i < c.nplugins; i++)
            FUZZ_CHECK(c.plugins[i] && c.plugins[i][0] == '/');
        FUZZ_CHECK(!c.cluster || (*c.cluster && strlen(c.cluster) < 64));
        FUZZ_CHECK(!c.name || (*c.name && strlen(c.name) <= 32));
        FUZZ_CHECK(c.insecure >= -1 && c.insecure <= 1 && c.steal >= -1 && c.steal <= 1);
        FUZZ_CHECK(!(c.insecure == 1 && c.cert));
        FUZZ_CHECK(!c.heartbeat_ms || !c.down_after_ms || c.down_after_ms >= 2 * c.heartbeat_ms);
    }
    sn_config_free(&c);
    sn_config_free(&c); /* a freed config is empty: safe again */
    return 0;
}
