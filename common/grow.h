/* grow.h - the one growable array of the tree.
 *
 * sn__grow makes room for one more element in an array `items` of `*cap`
 * elements of `size` bytes, `n` of them used: the same array while there
 * is room, else the array reallocated to twice its capacity (`first` for
 * an empty one) with *cap updated; NULL (items and *cap untouched, still
 * valid) when memory runs out or the new capacity would pass `max`
 * elements (0: no bound). The caller stores the result:
 *
 *     item_t **b = sn__grow(p->batch, &p->cap, p->nbatch, sizeof *b, 256, 0);
 *     if (!b)
 *         return fail();
 *     p->batch = b;
 *     p->batch[p->nbatch++] = it;
 */
#ifndef SN_GROW_H
#define SN_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static inline void *sn__grow(void *items, size_t *cap, size_t n, size_t size, size_t first, size_t max)
{
    if (n < *cap)
        return items;
    size_t c = *cap ? *cap * 2 : first;
    if ((max && c > max) || c > SIZE_MAX / size)
        return NULL;
    void *more = realloc(items, c * size);
    if (!more)
        return NULL;
    *cap = c;
    return more;
}

#endif
