/* registry.c - process types and commands by name, and plugins.
 *
 * Lookups happen on every spawn and dispatch, registration rarely: the
 * tables are copy-on-write arrays. A writer (under reg_mu) builds a new
 * array and publishes it with a release store; readers load it with
 * acquire and never lock. Replaced arrays are kept until the scheduler is
 * freed, since a reader may still hold one.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void retire(sn_sched_t *sched, void *array)
{
    /* keep `array` reachable from a list node freed at fini */
    void **node = malloc(2 * sizeof(void *));
    if (!node)
        return; /* leak one small array rather than free it under a reader */
    node[0] = sched->retired;
    node[1] = array;
    sched->retired = node;
}

int sn_type_register(sn_sched_t *sched, const sn_type_t *type)
{
    if (!type || !type->name || !*type->name || !type->init || !type->step)
        return SN_EINVAL;
    pthread_mutex_lock(&sched->reg_mu);
    if (sn__type_find(sched, type->name)) {
        snprintf(sched->reg_dup, sizeof sched->reg_dup, "type '%s'", type->name);
        pthread_mutex_unlock(&sched->reg_mu);
        return SN_EEXIST;
    }
    size_t n = atomic_load_explicit(&sched->ntypes, memory_order_relaxed);
    const sn_type_t **old = atomic_load_explicit(&sched->types, memory_order_relaxed);
    const sn_type_t **arr = malloc((n + 1) * sizeof *arr);
    if (!arr) {
        pthread_mutex_unlock(&sched->reg_mu);
        return SN_ENOMEM;
    }
    if (n)
        memcpy(arr, old, n * sizeof *arr);
    arr[n] = type;
    /* release: readers that see the new count see the new array filled */
    atomic_store_explicit(&sched->types, arr, memory_order_release);
    atomic_store_explicit(&sched->ntypes, n + 1, memory_order_release);
    if (old)
        retire(sched, (void *)old);
    pthread_mutex_unlock(&sched->reg_mu);
    return 0;
}

size_t sn__sched_types(sn_sched_t *sched, const sn_type_t **out, size_t max)
{
    size_t n = atomic_load_explicit(&sched->ntypes, memory_order_acquire);
    const sn_type_t **arr = atomic_load_explicit(&sched->types, memory_order_acquire);
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = arr[i];
    return n < max ? n : max;
}

const sn_type_t *sn__type_find(sn_sched_t *sched, const char *name)
{
    /* acquire (count first, then array): the array is at least that long,
     * because arrays only grow and are published before the count */
    size_t n = atomic_load_explicit(&sched->ntypes, memory_order_acquire);
    const sn_type_t **arr = atomic_load_explicit(&sched->types, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (strcmp(arr[i]->name, name) == 0)
            return arr[i];
    return NULL;
}

const sn_type_t *sn_type_find(sn_sched_t *sched, const char *name)
{
    return name ? sn__type_find(sched, name) : NULL;
}

static const char *const builtin[] = {NULL, "send", "spawn", "sleep", "terminate", "monitor", "demonitor", "send_many"};

int sn_command_id(sn_sched_t *sched, const char *name)
{
    if (!name)
        return SN_ENOCMD;
    for (int i = 1; i < SN__CMD_FIRST_USER; i++)
        if (strcmp(builtin[i], name) == 0)
            return i;
    size_t n = atomic_load_explicit(&sched->ncmds, memory_order_acquire);
    sn__command_t *arr = atomic_load_explicit(&sched->cmds, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (strcmp(arr[i].name, name) == 0)
            return (int)(i + SN__CMD_FIRST_USER);
    return SN_ENOCMD;
}

int sn_command_register(sn_sched_t *sched, const char *name, sn_command_fn fn, void *arg)
{
    if (!name || !*name || !fn)
        return SN_EINVAL;
    pthread_mutex_lock(&sched->reg_mu);
    if (sn_command_id(sched, name) > 0) {
        snprintf(sched->reg_dup, sizeof sched->reg_dup, "command '%s'", name);
        pthread_mutex_unlock(&sched->reg_mu);
        return SN_EEXIST;
    }
    size_t n = atomic_load_explicit(&sched->ncmds, memory_order_relaxed);
    sn__command_t *old = atomic_load_explicit(&sched->cmds, memory_order_relaxed);
    sn__command_t *arr = malloc((n + 1) * sizeof *arr);
    char *copy = strdup(name);
    if (!arr || !copy) {
        free(arr);
        free(copy);
        pthread_mutex_unlock(&sched->reg_mu);
        return SN_ENOMEM;
    }
    if (n)
        memcpy(arr, old, n * sizeof *arr);
    arr[n] = (sn__command_t){copy, fn, arg};
    atomic_store_explicit(&sched->cmds, arr, memory_order_release);
    atomic_store_explicit(&sched->ncmds, n + 1, memory_order_release);
    if (old)
        retire(sched, old);
    pthread_mutex_unlock(&sched->reg_mu);
    return (int)(n + SN__CMD_FIRST_USER);
}

const sn__command_t *sn__command_get(sn_sched_t *sched, uint32_t id)
{
    if (id < SN__CMD_FIRST_USER)
        return NULL;
    size_t n = atomic_load_explicit(&sched->ncmds, memory_order_acquire);
    sn__command_t *arr = atomic_load_explicit(&sched->cmds, memory_order_acquire);
    return id - SN__CMD_FIRST_USER < n ? &arr[id - SN__CMD_FIRST_USER] : NULL;
}

int sn_plugin_load(sn_sched_t *sched, const char *path, char *err, size_t errlen)
{
    char dummy[1];
    if (!err) {
        err = dummy;
        errlen = sizeof dummy;
    }
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        snprintf(err, errlen, "cannot load plugin %s: %s", path, why ? why : "unknown dlopen error");
        return SN_EPLUGIN;
    }
    const sn_plugin_t *pl = dlsym(dl, SN_PLUGIN_SYMBOL);
    if (!pl) {
        snprintf(err, errlen, "%s is not a schednode plugin: no symbol '%s' (use SN_PLUGIN_DEFINE)", path,
                 SN_PLUGIN_SYMBOL);
        dlclose(dl);
        return SN_EPLUGIN;
    }
    if (pl->api_version != SN_API_VERSION) {
        snprintf(err, errlen, "plugin %s was built for schednode API %u, this node speaks API %u: rebuild it", path,
                 pl->api_version, SN_API_VERSION);
        dlclose(dl);
        return SN_EPLUGIN;
    }
    if (!pl->init) {
        snprintf(err, errlen, "plugin %s has no init function", path);
        dlclose(dl);
        return SN_EPLUGIN;
    }
    sn__plugin_handle_t *h = malloc(sizeof *h);
    if (!h) {
        dlclose(dl);
        snprintf(err, errlen, "cannot load plugin %s: out of memory", path);
        return SN_ENOMEM;
    }
    int rc = pl->init(sched);
    if (rc != 0) {
        /* Types it registered before failing stay registered and point into
         * it: keep the library loaded. */
        char dup[64];
        pthread_mutex_lock(&sched->reg_mu);
        snprintf(dup, sizeof dup, "%s", sched->reg_dup);
        pthread_mutex_unlock(&sched->reg_mu);
        if (rc == SN_EEXIST && *dup) /* (cli.sh: a plugin loaded twice) */
            snprintf(err, errlen,
                     "plugin %s (%s) failed to initialise: %s is already registered (the plugin is loaded twice, or "
                     "another plugin has the same name)",
                     path, pl->name ? pl->name : "unnamed", dup);
        else
            snprintf(err, errlen, "plugin %s (%s) failed to initialise: %s (%d)", path, pl->name ? pl->name : "unnamed",
                     sn_strerror(rc), rc);
    }
    h->dl = dl;
    h->next = sched->plugins;
    sched->plugins = h;
    if (err != dummy && rc == 0)
        err[0] = 0;
    return rc;
}

void sn__registry_fini(sn_sched_t *sched)
{
    sn__command_t *cmds = atomic_load_explicit(&sched->cmds, memory_order_relaxed);
    size_t n = atomic_load_explicit(&sched->ncmds, memory_order_relaxed);
    for (size_t i = 0; i < n; i++)
        free((void *)cmds[i].name);
    free(cmds);
    free((void *)atomic_load_explicit(&sched->types, memory_order_relaxed));
    for (void **node = sched->retired; node;) {
        void **next = node[0];
        free(node[1]);
        free(node);
        node = next;
    }
    sched->retired = NULL;
    while (sched->plugins) {
        sn__plugin_handle_t *h = sched->plugins;
        sched->plugins = h->next;
        dlclose(h->dl);
        free(h);
    }
}
