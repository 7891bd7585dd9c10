/* replay.c - the main of a fuzz target built without libFuzzer: runs each
 * file given (each regular file of a directory given, in name order)
 * through LLVMFuzzerTestOneInput once. Each input is copied into a buffer
 * of exactly its size, as libFuzzer does, so ASan sees any read past it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* A target without setup of its own gets this one (weak). */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *more = realloc(buf, cap *= 2);
            if (!more)
                free(buf);
            buf = more;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: %s: out of memory\n", path);
        return -1;
    }
    uint8_t *exact = malloc(len ? len : 1); /* exactly len bytes: reads past the end are caught */
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of dir, in name order; returns how many, or -1. */
static int run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char **more = realloc(names, (n + 1) * sizeof *names);
        char *path = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (!more || !path) {
            free(more ? more : names);
            free(path);
            closedir(d);
            return -1;
        }
        names = more;
        sprintf(path, "%s/%s", dir, e->d_name);
        names[n++] = path;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int ran = 0, rc = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(names[i]) != 0)
                rc = -1;
            ran++;
        }
        free(names[i]);
    }
    free(names);
    return rc ? -1 : ran;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS-DIR-OR-FILE...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int n = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? run_dir(argv[i]) : (run_file(argv[i]) == 0 ? 1 : -1);
        if (n < 0)
            return 1;
        total += n;
    }
    if (total == 0) { /* an empty corpus tests nothing: a mistake in the test, not a pass */
        fprintf(stderr, "replay: no inputs found\n");
        return 1;
    }
    printf("replay: %d inputs ran\n", total);
    return 0;
}
