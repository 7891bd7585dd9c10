/* suggest.h - "did you mean": the known word closest to a mistyped one
 * (an unknown option or command), by edit distance.
 */
#ifndef SN_SUGGEST_H
#define SN_SUGGEST_H

#include <stddef.h>

/* The edit distance from a to b: insertions, deletions, substitutions and
 * swaps of two neighbours, one each (optimal string alignment), ignoring
 * case; at most 64 is counted (longer words are far apart anyway). */
int sn__edit_distance(const char *a, const char *b);

/* The word of words[0..n) closest to word, or NULL when none is close
 * enough to be a typo of it: at most 1 edit for a word of up to 4
 * letters, 2 for a longer one. A tie goes to the first. The result is one
 * of words (not a copy). Guarded by cli.sh (did you mean). */
const char *sn__closest(const char *word, const char *const *words, size_t n);

#endif
