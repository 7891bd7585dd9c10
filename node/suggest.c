/* suggest.c - "did you mean" (see suggest.h): optimal string alignment
 * distance over two rows of at most 65 cells, no allocation.
 */
#include "suggest.h"

#include <ctype.h>
#include <string.h>

#define WORD_MAX 64

static int min3(int a, int b, int c)
{
    int m = a < b ? a : b;
    return m < c ? m : c;
}

int sn__edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > WORD_MAX || lb > WORD_MAX)
        return WORD_MAX;
    /* three rows: the one before the last (for swaps), the last, this one */
    int d0[WORD_MAX + 1], d1[WORD_MAX + 1], d2[WORD_MAX + 1];
    for (size_t j = 0; j <= lb; j++)
        d1[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        d2[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            d2[j] = min3(d1[j] + 1, d2[j - 1] + 1, d1[j - 1] + (ca != cb));
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
                d0[j - 2] + 1 < d2[j])
                d2[j] = d0[j - 2] + 1;
        }
        memcpy(d0, d1, sizeof d0);
        memcpy(d1, d2, sizeof d1);
    }
    return d1[lb];
}

const char *sn__closest(const char *word, const char *const *words, size_t n)
{
    int limit = strlen(word) <= 4 ? 1 : 2, best = limit + 1;
    const char *found = NULL;
    for (size_t i = 0; i < n; i++) {
        int d = sn__edit_distance(word, words[i]);
        if (d < best) {
            best = d;
            found = words[i];
        }
    }
    return found;
}
