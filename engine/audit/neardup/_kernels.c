/* Compiled loops of the near-duplicate search (engine/audit/neardup/kernels.py loads this with ctypes;
 * the numpy paths in shingles.py and candidates.py are the reference and the fallback).
 *
 * Plain C, no Python API: every array comes in as a pointer with its length; output arrays are the
 * caller's, except cc_single_pairs' (its size is known only at the end: freed by cc_free). The results
 * are the numpy paths', value for value (tests/test_audit_perf.py).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

/* ---- 1. each text's distinct shingles, and the shingle count table -------------------------------- */

#define PREFETCH 32 /* table lookups asked for this many shingles ahead (random lines of a 32 MB table) */

/* Counts every shingle (repeats too) in counts[hash & mask], wrapping like numpy's uint32 additions. */
void cc_count(const uint64_t *h, int64_t m, uint32_t *counts, uint64_t mask) {
    for (int64_t j = 0; j < m; j++) {
        if (j + PREFETCH < m) __builtin_prefetch(counts + (h[j + PREFETCH] & mask), 1);
        counts[h[j] & mask] += 1u;
    }
}

/* Texts in order, per[i] shingle hashes each in h. Writes each text's distinct shingles (first
 * occurrences, in order) to out and their number to sizes[i]. Returns the number written, or -1 when
 * memory for the hash set cannot be had. */
int64_t cc_distinct(const uint64_t *h, const int64_t *per, int64_t n, uint64_t *out, int64_t *sizes) {
    int64_t biggest = 0;
    for (int64_t i = 0; i < n; i++)
        if (per[i] > biggest) biggest = per[i];
    uint64_t cap = 16;
    while (cap < (uint64_t)(2 * biggest)) cap <<= 1;
    uint64_t *table = (uint64_t *)calloc(cap, sizeof(uint64_t)); /* open addressing, 0 = empty */
    if (!table) return -1;
    int64_t w = 0, lo = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t m = per[i];
        uint64_t size = 16;
        while (size < (uint64_t)(2 * m)) size <<= 1;
        memset(table, 0, size * sizeof(uint64_t));
        const uint64_t bits = size - 1;
        const int64_t start = w;
        int zero_seen = 0;
        for (int64_t j = lo; j < lo + m; j++) {
            const uint64_t x = h[j];
            if (x == 0) {
                if (!zero_seen) {
                    zero_seen = 1;
                    out[w++] = 0;
                }
                continue;
            }
            uint64_t s = (x >> 40) & bits;
            for (;;) {
                const uint64_t y = table[s];
                if (y == 0) {
                    table[s] = x;
                    out[w++] = x;
                    break;
                }
                if (y == x) break;
                s = (s + 1) & bits;
            }
        }
        sizes[i] = w - start;
        lo += m;
    }
    free(table);
    return w;
}

/* ---- 2. each text's extended prefix in the global order, and its sketches ------------------------- */

/* A shingle in the global order: key = min(count, 65535) << 48 | hash >> 16, then the full hash (the
 * order (count, hash), with one comparison deciding almost every pair). */
typedef struct {
    uint64_t key;
    uint64_t h;
} item;

static inline int item_lt(const item a, const item b) { return a.key < b.key || (a.key == b.key && a.h < b.h); }

static inline uint64_t rank_of(const item a) { return a.key >> 48; }

static inline void swap_items(item *a, int64_t i, int64_t j) {
    const item t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* Lomuto partition on the key alone, without branches (swap always, advance when smaller): after it,
 * a[0..p) have keys below the pivot's, a[p] is the pivot (the median of three), a(p..n) at least it. */
static int64_t partition(item *a, int64_t n) {
    const int64_t mid = n / 2;
    if (a[mid].key < a[0].key) swap_items(a, mid, 0);
    if (a[n - 1].key < a[0].key) swap_items(a, n - 1, 0);
    if (a[n - 1].key < a[mid].key) swap_items(a, n - 1, mid);
    swap_items(a, mid, n - 1); /* the median is the pivot, at the end */
    const uint64_t pk = a[n - 1].key;
    int64_t i = 0;
    for (int64_t j = 0; j < n - 1; j++) {
        const item t = a[j];
        const int64_t lt = t.key < pk;
        a[j] = a[i];
        a[i] = t;
        i += lt;
    }
    swap_items(a, i, n - 1);
    return i;
}

/* Sorts by key (quicksort, then insertion sort of small ranges); equal keys are put in hash order after. */
static void sort_keys(item *a, int64_t n) {
    while (n > 16) {
        const int64_t p = partition(a, n);
        if (p < n - p) {
            sort_keys(a, p);
            a += p + 1;
            n -= p + 1;
        } else {
            sort_keys(a + p + 1, n - p - 1);
            n = p;
        }
    }
    for (int64_t i = 1; i < n; i++) {
        const item cur = a[i];
        int64_t j = i - 1;
        while (j >= 0 && cur.key < a[j].key) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = cur;
    }
}

/* Equal keys (same count, same high 48 hash bits: rare) in hash order: the full (count, hash) order. */
static void fix_ties(item *a, int64_t n) {
    for (int64_t i = 1; i < n; i++) {
        if (a[i].key != a[i - 1].key) continue;
        int64_t j = i;
        const item cur = a[i];
        while (j > 0 && a[j - 1].key == cur.key && cur.h < a[j - 1].h) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = cur;
    }
}

static void sort_items(item *a, int64_t n) {
    sort_keys(a, n);
    fix_ties(a, n);
}

#define SAMPLE 128

/* Moves the e smallest of the m items to a[0..e), sorted; buf holds m items of scratch. A sampled
 * pivot P (a little above the e/m quantile of a sample of keys) splits off the items whose key is at
 * most P in one branch-free pass: they are every item below or equal to P in the order, so if there are
 * e or more of them the first e are among them; else (or for short texts) all m are sorted. */
static void first_sorted(item *a, item *buf, int64_t m, int64_t e) {
    if (e >= m) {
        sort_items(a, m);
        return;
    }
    if (m > 4 * SAMPLE) {
        uint64_t sample[SAMPLE];
        for (int64_t t = 0; t < SAMPLE; t++) sample[t] = a[(t * m) / SAMPLE].key;
        for (int64_t i = 1; i < SAMPLE; i++) { /* insertion sort of the sample */
            const uint64_t cur = sample[i];
            int64_t j = i - 1;
            while (j >= 0 && sample[j] > cur) {
                sample[j + 1] = sample[j];
                j--;
            }
            sample[j + 1] = cur;
        }
        int64_t q = (e * SAMPLE + m - 1) / m + 6;
        if (q < SAMPLE) {
            const uint64_t pivot = sample[q];
            int64_t c = 0;
            for (int64_t j = 0; j < m; j++) {
                buf[c] = a[j];
                c += a[j].key <= pivot;
            }
            if (c >= e) {
                sort_items(buf, c);
                memcpy(a, buf, (size_t)e * sizeof(item));
                return;
            }
        }
    }
    sort_items(a, m);
}

/* Per text i (its sizes[i] distinct shingles in h, text after text): ext[i], the first ext[i] shingles in
 * the global order (min(count, 65535), hash) of which those counted more than once go to tok with their
 * position (pos, clamped to 65535; kept[i] of them), the narrow sketch (n x sk_buckets, bucket
 * = hash >> sk_shift) and, for texts of wide_min shingles or more, the wide one (wd_buckets, in text
 * order), both saturating at 255. Returns the number of tok written, or -1 when memory cannot be had. */
int64_t cc_prefixes(const uint64_t *h, const int64_t *sizes, int64_t n, const uint32_t *counts, uint64_t mask,
                    double threshold, int sk_shift, int64_t sk_buckets, uint8_t *sketch, int64_t wide_min,
                    int wd_shift, int64_t wd_buckets, uint8_t *wide, uint64_t *tok, uint16_t *pos,
                    int64_t *kept, int64_t *ext) {
    int64_t biggest = 1;
    for (int64_t i = 0; i < n; i++)
        if (sizes[i] > biggest) biggest = sizes[i];
    item *items = (item *)malloc((size_t)biggest * sizeof(item));
    item *buf = (item *)malloc((size_t)biggest * sizeof(item));
    if (!items || !buf) {
        free(items);
        free(buf);
        return -1;
    }
    int64_t w = 0, off = 0, wi = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t m = sizes[i];
        int64_t e = m - (int64_t)ceil(threshold * (double)m - 1e-9) + 2;
        if (e > m) e = m;
        ext[i] = e;
        uint8_t *sk = sketch + i * sk_buckets;
        uint8_t *wd = m >= wide_min ? wide + (wi++) * wd_buckets : NULL;
        for (int64_t j = 0; j < m; j++) {
            const uint64_t x = h[off + j];
            /* the count table is far larger than the caches: its lines are asked for ahead of use */
            if (j + PREFETCH < m) __builtin_prefetch(counts + (h[off + j + PREFETCH] & mask));
            const uint32_t c = counts[x & mask];
            items[j].key = ((uint64_t)(c < 65535u ? c : 65535u) << 48) | (x >> 16);
            items[j].h = x;
            uint8_t *b = sk + (x >> sk_shift);
            if (*b < 255) *b += 1;
            if (wd) {
                b = wd + (x >> wd_shift);
                if (*b < 255) *b += 1;
            }
        }
        if (e > 0) first_sorted(items, buf, m, e);
        int64_t k = 0;
        for (int64_t p = 0; p < e; p++) {
            if (rank_of(items[p]) > 1) {
                tok[w] = items[p].h;
                pos[w] = (uint16_t)(p < 65535 ? p : 65535);
                w++;
                k++;
            }
        }
        kept[i] = k;
        off += m;
    }
    free(items);
    free(buf);
    return w;
}

/* ---- 0. word hashes, and shingle hashes from them ---------------------------------------------- */

static inline uint64_t splitmix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Word hashes (hashing.word_hashes: the same values, and their definition). Text i is the UTF-8 bytes
 * data[offs[i]:offs[i + 1]]; its words are the runs between single spaces (an empty text is one empty
 * word). A word of L bytes: h = WORD_SEED ^ L * WORD_LEN; then for each 8-byte block m of the word,
 * little-endian, the last one zero-padded: h = (h ^ m) * WORD_BLOCK, h ^= h >> 29; its hash is
 * splitmix64(h). Our own, so the figures do not move with a Polars release (Polars' hash may). */
#define WORD_SEED 0x2545F4914F6CDD1Dull
#define WORD_LEN 0xC2B2AE3D27D4EB4Full
#define WORD_BLOCK 0x9FB21C651E98DF25ull

static inline uint64_t load8(const uint8_t *p) { /* 8 bytes, little-endian */
    uint64_t m;
    memcpy(&m, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    m = __builtin_bswap64(m);
#endif
    return m;
}

static inline void store8(uint8_t *p, uint64_t m) { /* load8's inverse */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    m = __builtin_bswap64(m);
#endif
    memcpy(p, &m, 8);
}

/* The top bit of each byte of x that is a space (exact: no carries between bytes). */
static inline uint64_t space_bits(uint64_t x) {
    const uint64_t low7 = 0x7F7F7F7F7F7F7F7Full, y = x ^ 0x2020202020202020ull;
    return ~(((y & low7) + low7) | y | low7);
}

/* Each text's number of words in lens[i]; returns their sum. */
int64_t cc_word_counts(const uint8_t *data, const int64_t *offs, int64_t n, int64_t *lens) {
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p = data + offs[i], *end = data + offs[i + 1];
        int64_t c = 1;
        for (; p + 8 <= end; p += 8) c += __builtin_popcountll(space_bits(load8(p)));
        for (; p < end; p++) c += *p == ' ';
        lens[i] = c;
        total += c;
    }
    return total;
}

static inline uint64_t word_hash(const uint8_t *p, int64_t len, const uint8_t *limit) {
    uint64_t h = WORD_SEED ^ ((uint64_t)len * WORD_LEN);
    int64_t j = 0;
    for (; j + 8 <= len; j += 8) {
        h = (h ^ load8(p + j)) * WORD_BLOCK;
        h ^= h >> 29;
    }
    if (j < len) { /* the last block, zero-padded: read whole where the buffer goes on, then masked */
        const int64_t r = len - j;
        uint64_t m = 0;
        if (p + j + 8 <= limit) {
            m = load8(p + j) & ((1ull << (8 * r)) - 1);
        } else {
            for (int64_t b = r - 1; b >= 0; b--) m = (m << 8) | p[j + b];
        }
        h = (h ^ m) * WORD_BLOCK;
        h ^= h >> 29;
    }
    return splitmix64(h);
}

/* Every word's hash, text after text, into out (cc_word_counts' total long): spaces found 8 bytes at
 * a time. */
void cc_word_hashes(const uint8_t *data, const int64_t *offs, int64_t n, uint64_t *out) {
    const uint8_t *limit = data + offs[n];
    int64_t w = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p = data + offs[i], *end = data + offs[i + 1], *word = p;
        for (; p + 8 <= end; p += 8) {
            for (uint64_t t = space_bits(load8(p)); t; t &= t - 1) {
                const uint8_t *sp = p + (__builtin_ctzll(t) >> 3);
                out[w++] = word_hash(word, sp - word, limit);
                word = sp + 1;
            }
        }
        for (; p < end; p++) {
            if (*p == ' ') {
                out[w++] = word_hash(word, p - word, limit);
                word = p + 1;
            }
        }
        out[w++] = word_hash(word, end - word, limit);
    }
}

/* Texts of lens[i] words (word hashes in flat, text after text): a shingle of words w_0..w_{m-1} hashes
 * to splitmix64(h0 + sum_j weight[j] * hash(w_j)) (wrapping). Texts of k words or more give one shingle
 * per k-word window, in text order; then each shorter text gives one shingle of all its words (the
 * numpy path's order). Writes hashes to out_h and text indices to out_d; returns how many. */
int64_t cc_shingles(const uint64_t *flat, const int64_t *lens, int64_t n, int64_t k, const uint64_t *weight,
                    uint64_t h0, uint64_t *out_h, int64_t *out_d) {
    int64_t w = 0, off = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t m = lens[i];
        for (int64_t s = 0; s + k <= m; s++) {
            uint64_t acc = h0;
            for (int64_t j = 0; j < k; j++) acc += weight[j] * flat[off + s + j];
            out_h[w] = splitmix64(acc);
            out_d[w++] = i;
        }
        off += m;
    }
    off = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t m = lens[i];
        if (m < k) {
            uint64_t acc = h0;
            for (int64_t j = 0; j < m; j++) acc += weight[j] * flat[off + j];
            out_h[w] = splitmix64(acc);
            out_d[w++] = i;
        }
        off += m;
    }
    return w;
}

/* ---- 3. candidate pairs by one shared prefix shingle (candidates.py's single-shingle path) -------- */

typedef struct {
    uint64_t combo; /* (tok >> shift) << shift | size */
    int32_t doc;
    int32_t pos;
} entry;

/* Radix sort of entries by combo (stable; tmp holds n entries; count holds 2^16): one pass on the top
 * TOP_BITS into 2,048 buckets, then each bucket (a few thousand entries: in cache) by LSD passes of 8
 * bits over the bits below, a pass skipped where every entry of the bucket has the same digit. A plain
 * LSD sort over the whole array missed the cache on every scatter: 0.4 of 0.55 s on 20,000 long
 * documents' 5.2 M entries. */
#define TOP_BITS 11
#define LOW_PASSES 7 /* 7 x 8 bits cover the 53 below the top 11 */
static void radix_entries(entry *a, entry *tmp, int64_t n, int64_t *count) {
    const int64_t nb = (int64_t)1 << TOP_BITS;
    int64_t *start = count, *pos = count + nb + 1, *c = count + 2 * nb + 1; /* c: LOW_PASSES x 256 */
    memset(start, 0, (size_t)(nb + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) start[(a[i].combo >> (64 - TOP_BITS)) + 1]++;
    for (int64_t b = 0; b < nb; b++) start[b + 1] += start[b];
    memcpy(pos, start, (size_t)nb * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) tmp[pos[a[i].combo >> (64 - TOP_BITS)]++] = a[i];
    for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = start[b], m = start[b + 1] - lo;
        entry *src = tmp + lo, *dst = a + lo;
        memset(c, 0, LOW_PASSES * 256 * sizeof(int64_t));
        for (int64_t i = 0; i < m; i++)
            for (int d = 0; d < LOW_PASSES; d++) c[d * 256 + ((src[i].combo >> (8 * d)) & 255)]++;
        for (int d = 0; d < LOW_PASSES && m > 1; d++) {
            int64_t *cd = c + d * 256;
            if (cd[(src[0].combo >> (8 * d)) & 255] == m) continue; /* one digit: already in order */
            int64_t sum = 0;
            for (int k = 0; k < 256; k++) {
                const int64_t x = cd[k];
                cd[k] = sum;
                sum += x;
            }
            for (int64_t i = 0; i < m; i++) dst[cd[(src[i].combo >> (8 * d)) & 255]++] = src[i];
            entry *t = src;
            src = dst;
            dst = t;
        }
        if (src != a + lo) memcpy(a + lo, src, (size_t)m * sizeof(entry));
    }
}

/* Sorts a (n uint64) ascending, as numpy's sort does (tmp: n of scratch; count: 2^16): the radix_entries
 * scheme on plain keys — one pass on the top TOP_BITS, then each bucket by in-cache LSD passes of 8 bits.
 * numpy's sort took ~0.45 s for 6 M keys here, a prefix-pair pass of the search at 1M tickets. */
void cc_sort_u64(uint64_t *a, uint64_t *tmp, int64_t n, int64_t *count) {
    const int64_t nb = (int64_t)1 << TOP_BITS;
    int64_t *start = count, *pos = count + nb + 1, *c = count + 2 * nb + 1;
    memset(start, 0, (size_t)(nb + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) start[(a[i] >> (64 - TOP_BITS)) + 1]++;
    for (int64_t b = 0; b < nb; b++) start[b + 1] += start[b];
    memcpy(pos, start, (size_t)nb * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) tmp[pos[a[i] >> (64 - TOP_BITS)]++] = a[i];
    for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = start[b], m = start[b + 1] - lo;
        uint64_t *src = tmp + lo, *dst = a + lo;
        memset(c, 0, LOW_PASSES * 256 * sizeof(int64_t));
        for (int64_t i = 0; i < m; i++)
            for (int d = 0; d < LOW_PASSES; d++) c[d * 256 + ((src[i] >> (8 * d)) & 255)]++;
        for (int d = 0; d < LOW_PASSES && m > 1; d++) {
            int64_t *cd = c + d * 256;
            if (cd[(src[0] >> (8 * d)) & 255] == m) continue;
            int64_t sum = 0;
            for (int k = 0; k < 256; k++) {
                const int64_t x = cd[k];
                cd[k] = sum;
                sum += x;
            }
            for (int64_t i = 0; i < m; i++) dst[cd[(src[i] >> (8 * d)) & 255]++] = src[i];
            uint64_t *t = src;
            src = dst;
            dst = t;
        }
        if (src != a + lo) memcpy(a + lo, src, (size_t)m * sizeof(uint64_t));
    }
}

static int cmp_u64(const void *x, const void *y) {
    const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static void radix_u64(uint64_t *a, uint64_t *tmp, int64_t n, int64_t *count) {
    for (int shift = 0; shift < 64; shift += 16) {
        memset(count, 0, (1 << 16) * sizeof(int64_t));
        for (int64_t i = 0; i < n; i++) count[(a[i] >> shift) & 0xFFFF]++;
        int64_t sum = 0;
        for (int b = 0; b < 1 << 16; b++) {
            const int64_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (int64_t i = 0; i < n; i++) tmp[count[(a[i] >> shift) & 0xFFFF]++] = a[i];
        uint64_t *t = a;
        a = tmp;
        tmp = t;
    }
}

typedef struct {
    uint64_t *codes;
    int64_t n, cap;
} codes_buf;

static int push_code(codes_buf *b, uint64_t code) {
    if (b->n == b->cap) {
        const int64_t cap = b->cap ? 2 * b->cap : 1 << 16;
        uint64_t *c = (uint64_t *)realloc(b->codes, (size_t)cap * sizeof(uint64_t));
        if (!c) return -1;
        b->codes = c;
        b->cap = cap;
    }
    b->codes[b->n++] = code;
    return 0;
}

/* The largest partner size an entry of size s whose shingle sits at position p may pair with
 * (candidates._run_pairs' float expression, generous by 1e-3): the positional bound
 * (s + 1 - p)(1 + t)/t - s and the length bound s/t, clamped to [0, size_mask]. */
static inline uint64_t size_bound(int64_t s, int64_t p, double t, uint64_t size_mask) {
    double bound = ((double)(s + 1 - p) * (1.0 + t)) / t - (double)s;
    const double by_len = (double)s / t;
    if (by_len < bound) bound = by_len;
    bound = floor(bound + 1e-3);
    if (bound < 0) bound = 0;
    if (bound > (double)size_mask) bound = (double)size_mask;
    return (uint64_t)bound;
}

/* The single-shingle path of candidates.find_candidates, from the prefix entries (tok, doc, pos; single:
 * the entry's text takes this path): entries grouped by the hash's high bits (tok >> shift) and sorted by
 * text size, runs kept that hold a single entry and two entries or more (where fewer than half the
 * entries are single, only entries whose full tok a single entry holds take part); each entry paired with
 * the later entries of its run up to its size bound; the pairs that pass the length and positional
 * filters counted; those kept where a side is big, or both tiny, and that share min(2, alpha) entries.
 * *out receives the kept pair codes (lo << 32 | hi), sorted (free it with cc_free); returns how many,
 * or -1 when memory cannot be had. */
int64_t cc_single_pairs(const uint64_t *tok, const int32_t *doc, const uint16_t *pos, const uint8_t *single,
                        int64_t n, const int64_t *sizes, const uint8_t *tiny, const uint8_t *big, double t,
                        uint64_t **out) {
    *out = NULL;
    int64_t n_single = 0;
    for (int64_t i = 0; i < n; i++) n_single += single[i] != 0;
    uint64_t *held = NULL; /* the single entries' toks, sorted (only where they are fewer than half) */
    int64_t n_held = 0;
    if (2 * n_single < n) {
        held = (uint64_t *)malloc((size_t)(n_single + 1) * sizeof(uint64_t));
        if (!held) return -1;
        for (int64_t i = 0; i < n; i++)
            if (single[i]) held[n_held++] = tok[i];
        qsort(held, (size_t)n_held, sizeof(uint64_t), cmp_u64);
    }
    entry *e = (entry *)malloc((size_t)(n + 1) * sizeof(entry));
    entry *tmp = (entry *)malloc((size_t)(n + 1) * sizeof(entry));
    uint8_t *sing = (uint8_t *)malloc((size_t)(n + 1));
    if (!e || !tmp || !sing) {
        free(held);
        free(e);
        free(tmp);
        free(sing);
        return -1;
    }
    int64_t *count = (int64_t *)malloc((1 << 16) * sizeof(int64_t));
    if (!count) {
        free(held);
        free(e);
        free(tmp);
        free(sing);
        return -1;
    }
    int64_t m = 0, biggest = 0;
    for (int64_t i = 0; i < n; i++) {
        if (held) {
            int64_t lo = 0, hi = n_held; /* binary search for tok[i] */
            while (lo < hi) {
                const int64_t mid = (lo + hi) / 2;
                if (held[mid] < tok[i]) lo = mid + 1;
                else hi = mid;
            }
            if (lo >= n_held || held[lo] != tok[i]) continue;
        }
        e[m].combo = tok[i]; /* packed below, once the size bits are known */
        e[m].doc = doc[i];
        e[m].pos = pos[i];
        if (sizes[doc[i]] > biggest) biggest = sizes[doc[i]];
        m++;
    }
    free(held);
    int shift = 1; /* the bits of the largest size among the entries (at least one) */
    while (shift < 63 && (biggest >> shift) != 0) shift++;
    for (int64_t i = 0; i < m; i++) e[i].combo = ((e[i].combo >> shift) << shift) | (uint64_t)sizes[e[i].doc];
    radix_entries(e, tmp, m, count);
    /* single flags in sorted order: looked up again from the text (single is a property of the text) */
    for (int64_t i = 0; i < m; i++) sing[i] = tiny[e[i].doc] | big[e[i].doc];
    codes_buf pairs = {NULL, 0, 0};
    const uint64_t size_mask = ((uint64_t)1 << shift) - 1;
    int64_t a = 0;
    int failed = 0;
    while (a < m && !failed) {
        int64_t b = a + 1;
        const uint64_t key = e[a].combo >> shift;
        int any_single = sing[a];
        while (b < m && (e[b].combo >> shift) == key) any_single |= sing[b++];
        if (b - a >= 2 && any_single) {
            for (int64_t i = a; i < b && !failed; i++) {
                const int64_t p = e[i].pos;
                const uint64_t hi = size_bound((int64_t)(e[i].combo & size_mask), p, t, size_mask);
                for (int64_t j = i + 1; j < b && (e[j].combo & size_mask) <= hi; j++) {
                    const int64_t da = e[i].doc, db = e[j].doc;
                    if (da == db) continue;
                    const int64_t sa = sizes[da], sb = sizes[db];
                    const int64_t mn = sa < sb ? sa : sb, mx = sa < sb ? sb : sa;
                    if (!((double)mn >= t * (double)mx - 1e-9)) continue;
                    const int64_t alpha = (int64_t)ceil(t * (double)(sa + sb) / (1.0 + t) - 1e-9);
                    if (!(p <= sa + 1 - alpha && e[j].pos <= sb + 1 - alpha)) continue;
                    const uint64_t lo = (uint64_t)(da < db ? da : db), hi2 = (uint64_t)(da < db ? db : da);
                    if (push_code(&pairs, (lo << 32) | hi2)) failed = 1;
                }
            }
        }
        a = b;
    }
    free(e);
    free(tmp);
    free(sing);
    if (failed) {
        free(count);
        free(pairs.codes);
        return -1;
    }
    /* count each pair, keep those a single-path side needs that share min(2, alpha) entries */
    uint64_t *scratch = (uint64_t *)malloc((size_t)(pairs.n + 1) * sizeof(uint64_t));
    if (!scratch) {
        free(count);
        free(pairs.codes);
        return -1;
    }
    radix_u64(pairs.codes, scratch, pairs.n, count);
    free(scratch);
    free(count);
    int64_t w = 0;
    for (int64_t i = 0; i < pairs.n;) {
        int64_t j = i + 1;
        while (j < pairs.n && pairs.codes[j] == pairs.codes[i]) j++;
        const uint64_t code = pairs.codes[i];
        const int64_t da = (int64_t)(code >> 32), db = (int64_t)(code & 0xFFFFFFFFu);
        const int64_t sa = sizes[da], sb = sizes[db];
        const int64_t alpha = (int64_t)ceil(t * (double)(sa + sb) / (1.0 + t) - 1e-9);
        const int64_t need = alpha < 2 ? alpha : 2;
        if (((tiny[da] && tiny[db]) || big[da] || big[db]) && j - i >= need) pairs.codes[w++] = code;
        i = j;
    }
    *out = pairs.codes;
    return w;
}

/* ---- the prefix-pair path's runs, paired and bounded in one loop --------------------------------- */

/* Per byte lane (each below 128), the smaller of x's and y's: (x | 0x80) - y keeps a lane's top bit
 * exactly where x >= y, and borrows from no other lane. */
static inline uint64_t min_lanes(uint64_t x, uint64_t y) {
    const uint64_t H = 0x8080808080808080ULL;
    const uint64_t ge = (((x | H) - y) & H) >> 7, m = ge * 0xFF; /* 0xFF in the lanes where x >= y */
    return (y & m) | (x & ~m);
}

/* Whether a byte lane of v is 0 (exact for any v). */
static inline int zero_lane(uint64_t v) {
    return ((v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL) != 0;
}

/* Whether texts of sizes sa, sb whose sketch rows are ra, rb (width bytes each) can reach t: the sum of
 * the buckets' minima bounds the overlap, and a saturated minimum (255; with nibbles, two 4-bit buckets
 * a byte, 15) bounds nothing (candidates._bound and blockjoin.coarse_ok, the same float expression). */
static inline int sketch_reaches(const uint8_t *ra, const uint8_t *rb, int64_t width, int nibbles, int64_t sa,
                                 int64_t sb, double t) {
    int64_t ub = 0;
    int full = 0;
    if (nibbles && width == 8) { /* the coarse sketches (ondisk.coarse_sketch): 16 buckets in one word */
        const uint64_t L = 0x0F0F0F0F0F0F0F0FULL;
        uint64_t a, b;
        memcpy(&a, ra, 8);
        memcpy(&b, rb, 8);
        const uint64_t lo = min_lanes(a & L, b & L), hi = min_lanes((a >> 4) & L, (b >> 4) & L);
        ub = (int64_t)(((lo + hi) * 0x0101010101010101ULL) >> 56); /* 16 minima of at most 15: < 256 */
        full = zero_lane(lo ^ L) || zero_lane(hi ^ L);            /* a minimum of 15 */
    } else if (nibbles) {
        for (int64_t k = 0; k < width; k++) {
            const uint8_t lo_a = ra[k] & 15, lo_b = rb[k] & 15, hi_a = ra[k] >> 4, hi_b = rb[k] >> 4;
            const uint8_t lo = lo_a < lo_b ? lo_a : lo_b, hi = hi_a < hi_b ? hi_a : hi_b;
            ub += lo + hi;
            full |= (lo == 15) | (hi == 15);
        }
    } else {
        for (int64_t k = 0; k < width; k++) {
            const uint8_t m = ra[k] < rb[k] ? ra[k] : rb[k];
            ub += m;
            full |= m == 255;
        }
    }
    if (full) return 1;
    int64_t inter = sa < sb ? sa : sb;
    if (ub < inter) inter = ub;
    return (double)inter >= t * (double)(sa + sb - inter) - 1e-9;
}

/* candidates._run_pairs' pairs with the sketch bound fused in. Entries in runs of one key, each run
 * sorted by text size: combo[i] = key << shift | size (candidates.Runs), entry i's text doc[i] and
 * position pos[i]. Entry i is paired with the later entries of its run up to its size bound (the numpy
 * path's float expression; its searchsorted end); a pair is kept where its texts differ and pass the
 * length and positional filters and, where rows is not NULL, the sketch bound of their rows
 * (sketch_reaches; row of entry j at rows + j * width where per_entry, else of text doc[j]). The kept
 * codes (lo << 32 | hi, unsorted, repeats possible) go to out, at most cap of them; the walk starts at
 * entry resume[0] and partner resume[1] (0: the first) and, where out fills, stops there and stores
 * where to go on (resume[0] = n when done). Returns the number written. */
int64_t cc_run_pairs(const uint64_t *combo, int shift, const int64_t *doc, const int64_t *pos, int64_t n, double t,
                     const uint8_t *rows, int64_t width, int nibbles, int per_entry, int64_t *resume,
                     uint64_t *out, int64_t cap) {
    const uint64_t size_mask = ((uint64_t)1 << shift) - 1;
    int64_t w = 0;
    int64_t i = resume[0], j0 = resume[1];
    for (; i < n; i++, j0 = 0) {
        const uint64_t key = combo[i] >> shift;
        const int64_t da = doc[i], pa = pos[i], sa = (int64_t)(combo[i] & size_mask);
        const uint64_t hi_size = size_bound(sa, pa, t, size_mask);
        const uint8_t *ra = rows ? rows + (per_entry ? i : da) * width : NULL;
        int64_t last_sb = -1, alpha = 0; /* alpha for partners of size last_sb (sizes come in order) */
        for (int64_t j = j0 > i + 1 ? j0 : i + 1; j < n; j++) {
            const uint64_t c = combo[j];
            if ((c >> shift) != key || (c & size_mask) > hi_size) break;
            const int64_t db = doc[j];
            if (da == db) continue;
            const int64_t sb = (int64_t)(c & size_mask); /* sa <= sb: the run is sorted by size */
            if (!((double)sa >= t * (double)sb - 1e-9)) continue;
            if (sb != last_sb) {
                last_sb = sb;
                alpha = (int64_t)ceil(t * (double)(sa + sb) / (1.0 + t) - 1e-9);
            }
            if (!(pa <= sa + 1 - alpha && pos[j] <= sb + 1 - alpha)) continue;
            if (ra && !sketch_reaches(ra, rows + (per_entry ? j : db) * width, width, nibbles, sa, sb, t)) continue;
            if (w == cap) {
                resume[0] = i;
                resume[1] = j;
                return w;
            }
            const uint64_t lo = (uint64_t)(da < db ? da : db), hi = (uint64_t)(da < db ? db : da);
            out[w++] = (lo << 32) | hi;
        }
    }
    resume[0] = n;
    resume[1] = 0;
    return w;
}

/* ---- a pass's sorted signatures unpacked into runs sorted by size --------------------------------- */

static int u64_cmp(const void *x, const void *y) {
    const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* Sorts a[0..n) ascending: quicksort (median of three, Hoare's partition) down to runs of 24, then
 * insertion sort; qsort below a depth of 2 log2(n) (no quadratic case). */
static void u64_sort(uint64_t *a, int64_t n, int depth) {
    while (n > 24) {
        if (depth-- <= 0) {
            qsort(a, (size_t)n, sizeof(uint64_t), u64_cmp);
            return;
        }
        const uint64_t x = a[0], y = a[n / 2], z = a[n - 1];
        const uint64_t p = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        int64_t i = -1, j = n;
        for (;;) {
            do i++;
            while (a[i] < p);
            do j--;
            while (a[j] > p);
            if (i >= j) break;
            const uint64_t t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
        /* a[0..j] <= p <= a[j+1..n), both parts non-empty: the smaller sorted first, the larger looped */
        if (j + 1 < n - j - 1) {
            u64_sort(a, j + 1, depth);
            a += j + 1;
            n -= j + 1;
        } else {
            u64_sort(a + j + 1, n - j - 1, depth);
            n = j + 1;
        }
    }
    for (int64_t k = 1; k < n; k++) {
        const uint64_t v = a[k];
        int64_t b = k;
        for (; b > 0 && a[b - 1] > v; b--) a[b] = a[b - 1];
        a[b] = v;
    }
}

static int depth_of(int64_t n) {
    int d = 0;
    while (n > 1) {
        n >>= 1;
        d += 2;
    }
    return d;
}

typedef struct {
    uint64_t combo;
    int64_t doc, pos;
} run_entry;

static int run_entry_cmp(const void *x, const void *y) {
    const run_entry *a = (const run_entry *)x, *b = (const run_entry *)y;
    if (a->combo != b->combo) return a->combo < b->combo ? -1 : 1;
    if (a->doc != b->doc) return a->doc < b->doc ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* One run's entries (combo, doc, pos at w, m of them; combo = run << shift | size) sorted by size,
 * then text, then position (low: the bits of doc << pos_bits | pos). 0, or -1 where memory for a long
 * run's sort was lacking. */
static int sort_run(uint64_t *combo, int64_t *doc, int64_t *pos, int64_t m, int low, int pos_bits, int shift) {
    const uint64_t size_mask = ((uint64_t)1 << shift) - 1;
    if (m <= 32) { /* insertion sort by size: stable, so then by (text, position) as unpacked */
        for (int64_t a = 1; a < m; a++) {
            const uint64_t c = combo[a];
            const int64_t d = doc[a], q = pos[a];
            int64_t b = a;
            for (; b > 0 && combo[b - 1] > c; b--) {
                combo[b] = combo[b - 1];
                doc[b] = doc[b - 1];
                pos[b] = pos[b - 1];
            }
            combo[b] = c;
            doc[b] = d;
            pos[b] = q;
        }
    } else if (shift + low <= 64) { /* (size, text, position) packed in one word and sorted */
        uint64_t *e = malloc((size_t)m * sizeof(uint64_t));
        if (!e) return -1;
        const uint64_t run = combo[0] & ~size_mask, doc_mask = ((uint64_t)1 << (low - pos_bits)) - 1;
        const uint64_t pos_mask = ((uint64_t)1 << pos_bits) - 1;
        for (int64_t k = 0; k < m; k++)
            e[k] = (combo[k] & size_mask) << low | (uint64_t)doc[k] << pos_bits | (uint64_t)pos[k];
        u64_sort(e, m, depth_of(m));
        for (int64_t k = 0; k < m; k++) {
            combo[k] = run | (e[k] >> low);
            doc[k] = (int64_t)((e[k] >> pos_bits) & doc_mask);
            pos[k] = (int64_t)(e[k] & pos_mask);
        }
        free(e);
    } else {
        run_entry *e = malloc((size_t)m * sizeof(run_entry));
        if (!e) return -1;
        for (int64_t k = 0; k < m; k++) e[k] = (run_entry){combo[k], doc[k], pos[k]};
        qsort(e, (size_t)m, sizeof(run_entry), run_entry_cmp);
        for (int64_t k = 0; k < m; k++) {
            combo[k] = e[k].combo;
            doc[k] = e[k].doc;
            pos[k] = e[k].pos;
        }
        free(e);
    }
    return 0;
}

/* candidates.Packing.unpack, then candidates._size_runs: of the sorted packed signatures
 * (key << low | doc << pos_bits | pos), those whose key two or more hold, in runs of one key, each run
 * sorted by its texts' sizes (then text, position): combo[k] = run << shift | sizes[doc], doc[k], pos[k].
 * With combo NULL, returns only how many there are, and (most not NULL) their largest size in *most;
 * else writes them (shift: at least the bits of that size) and returns that number, or -1 where memory
 * for a long run's sort was lacking. Three loops: the runs unpacked in order, then every size looked up
 * (random reads of sizes, PREFETCH ahead, in a loop with no other branch), then each run sorted. */
int64_t cc_unpack_runs(const uint64_t *packed, int64_t n, int low, int pos_bits, const int64_t *sizes, int shift,
                       uint64_t *combo, int64_t *doc, int64_t *pos, int64_t *most) {
    const uint64_t doc_mask = ((uint64_t)1 << (low - pos_bits)) - 1, pos_mask = ((uint64_t)1 << pos_bits) - 1;
    int64_t w = 0, run = 0;
    for (int64_t i = 0; i < n;) {
        const uint64_t key = packed[i] >> low;
        int64_t j = i + 1;
        while (j < n && (packed[j] >> low) == key) j++;
        if (j - i >= 2) {
            if (combo) {
                for (int64_t k = i; k < j; k++) {
                    combo[w + k - i] = (uint64_t)run << shift;
                    doc[w + k - i] = (int64_t)((packed[k] >> pos_bits) & doc_mask);
                    pos[w + k - i] = (int64_t)(packed[k] & pos_mask);
                }
            } else if (most) {
                for (int64_t k = i; k < j; k++) {
                    const int64_t s = sizes[(packed[k] >> pos_bits) & doc_mask];
                    if (s > *most) *most = s;
                }
            }
            w += j - i;
            run++;
        }
        i = j;
    }
    if (!combo) return w;
    for (int64_t k = 0; k < w; k++) {
        if (k + PREFETCH < w) __builtin_prefetch(sizes + doc[k + PREFETCH]);
        combo[k] |= (uint64_t)sizes[doc[k]];
    }
    for (int64_t a = 0; a < w;) {
        const uint64_t r = combo[a] >> shift;
        int64_t b = a + 1;
        while (b < w && (combo[b] >> shift) == r) b++;
        if (b - a > 1 && sort_run(combo + a, doc + a, pos + a, b - a, low, pos_bits, shift) < 0) return -1;
        a = b;
    }
    return w;
}

/* ---- the bounded path's signature passes, each appended to its own file -------------------------- */

/* Writes all n bytes of p to fd; 0, or -errno. */
static int64_t write_all(int fd, const uint8_t *p, int64_t n) {
    while (n > 0) {
        const ssize_t w = write(fd, p, (size_t)n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -(int64_t)errno;
        }
        p += w;
        n -= w;
    }
    return 0;
}

/* candidates.shard_passes' split of generated signatures by pass: sig[i] goes to pass
 * (high[i] * passes) >> 32 (high[i] < 2^32: its pair hash's high 32 bits), gathered in that pass's
 * buffer (buf + pass * cap, fill[pass] of cap held) and written to fds[pass] when the buffer is full;
 * with flush (n = 0 then), every buffer's rest is written. Each file gets its pass's signatures in the
 * order they came. Returns 0, or -errno where a write failed. */
int64_t cc_scatter(const uint64_t *sig, const uint64_t *high, int64_t n, int64_t passes, const int32_t *fds,
                   uint64_t *buf, int64_t *fill, int64_t cap, int flush) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = (int64_t)((high[i] * (uint64_t)passes) >> 32);
        uint64_t *b = buf + r * cap;
        b[fill[r]++] = sig[i];
        if (fill[r] == cap) {
            const int64_t e = write_all(fds[r], (const uint8_t *)b, cap * 8);
            if (e) return e;
            fill[r] = 0;
        }
    }
    if (flush)
        for (int64_t r = 0; r < passes; r++) {
            const int64_t e = fill[r] ? write_all(fds[r], (const uint8_t *)(buf + r * cap), fill[r] * 8) : 0;
            if (e) return e;
            fill[r] = 0;
        }
    return 0;
}

/* ---- a bitmap of signature keys (sharded.py: the late signatures kept) --------------------------- */

/* Sets bit idx[i] of bits (idx below the bitmap's size). */
void cc_bits_set(const uint64_t *idx, int64_t n, uint64_t *bits) {
    for (int64_t i = 0; i < n; i++) {
        if (i + PREFETCH < n) __builtin_prefetch(bits + (idx[i + PREFETCH] >> 6), 1);
        bits[idx[i] >> 6] |= (uint64_t)1 << (idx[i] & 63);
    }
}

/* keep[i] = whether bit idx[i] of bits is set; returns how many are. */
int64_t cc_bits_test(const uint64_t *idx, int64_t n, const uint64_t *bits, uint8_t *keep) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i + PREFETCH < n) __builtin_prefetch(bits + (idx[i + PREFETCH] >> 6));
        keep[i] = (uint8_t)((bits[idx[i] >> 6] >> (idx[i] & 63)) & 1);
        k += keep[i];
    }
    return k;
}

/* ---- normalised text (engine/audit/texts.py: lower_strip_ws, columns joined) for ASCII rows ------- */

/* Unicode White_Space among ASCII bytes: what Polars' strip_chars and the regex \s match there. */
static inline int ascii_space(uint8_t c) { return c == ' ' || (c >= 9 && c <= 13); }

/* Of 8 ASCII bytes (each below 0x80: the sums below carry into no other byte), the top bit of each
 * that is a tab, line feed, vertical tab, form feed or carriage return (9..13). */
static inline uint64_t ascii_controls(uint64_t x) {
    const uint64_t ge9 = x + 0x7777777777777777ull, ge14 = x + 0x7272727272727272ull;
    return ge9 & ~ge14 & 0x8080808080808080ull;
}

/* 8 ASCII bytes with A..Z lowercased (the 0x20 bit set where 'A' <= byte <= 'Z'). */
static inline uint64_t ascii_lower(uint64_t x) {
    const uint64_t geA = x + 0x3F3F3F3F3F3F3F3Full, gtZ = x + 0x2525252525252525ull;
    const uint64_t upper = geA & ~gtZ & 0x8080808080808080ull;
    return x | (upper >> 2);
}

/* Row i's text from n_cols columns (column c: bytes data[c], offsets offs[c], n + 1 of them; a null is
 * an empty value, which the join skips alike): each value lowercased, stripped, its whitespace runs made
 * one space, the non-empty ones joined by one space (texts._joined). Rows whose bytes are all ASCII are written to out
 * (row i at out[out_offs[i]:out_offs[i + 1]]) with ok[i] = 1; for the others, which need Unicode case
 * and whitespace rules, nothing is written and ok[i] = 0. out holds the rows' bytes plus n_cols a row. */
void cc_normalise(int64_t n_cols, const uint64_t *data, const uint64_t *offs, int64_t n, uint8_t *out,
                  int64_t *out_offs, uint8_t *ok) {
    int64_t w = 0;
    out_offs[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t high = 0;
        for (int64_t c = 0; c < n_cols; c++) {
            const uint8_t *d = (const uint8_t *)data[c];
            const int64_t *o = (const int64_t *)offs[c];
            const uint8_t *p = d + o[i], *end = d + o[i + 1];
            for (; p + 8 <= end; p += 8) high |= load8(p);
            for (; p < end; p++) high |= *p;
        }
        ok[i] = (high & 0x8080808080808080ull) == 0;
        const int64_t start = w;
        for (int64_t c = 0; ok[i] && c < n_cols; c++) {
            const uint8_t *d = (const uint8_t *)data[c];
            const int64_t *o = (const int64_t *)offs[c];
            const uint8_t *p = d + o[i], *end = d + o[i + 1];
            while (p < end && ascii_space(*p)) p++;
            while (end > p && ascii_space(end[-1])) end--;
            if (p == end) continue;
            if (w > start) out[w++] = ' ';
            int spaced = 0; /* the last byte written is the space that stands for a whitespace run */
            for (; p < end; p++) {
                /* 8 bytes at once where they hold no whitespace but lone spaces: lowercased as they are */
                while (p + 8 <= end) {
                    const uint64_t x = load8(p), sp = space_bits(x);
                    if (ascii_controls(x) || (sp & (sp << 8)) || (spaced && (sp & 0x80))) break;
                    store8(out + w, ascii_lower(x));
                    w += 8;
                    p += 8;
                    spaced = (sp >> 56) != 0;
                }
                if (p == end) break;
                const uint8_t b = *p;
                if (ascii_space(b)) {
                    if (!spaced) out[w++] = ' ';
                    spaced = 1;
                    continue;
                }
                spaced = 0;
                out[w++] = (uint8_t)(b + ((uint8_t)(b - 'A') < 26u) * 32);
            }
        }
        out_offs[i + 1] = w;
    }
}

/* out[i] = the word hash (word_hash) of all of text i's bytes: a 64-bit hash of a whole string. */
void cc_bytes_hashes(const uint8_t *data, const int64_t *offs, int64_t n, uint64_t *out) {
    const uint8_t *limit = data + offs[n];
    for (int64_t i = 0; i < n; i++) out[i] = word_hash(data + offs[i], offs[i + 1] - offs[i], limit);
}

/* Rows in order, row i taken from a (ok[i]: a's row i) or else from b (b's next row): out, out_offs. */
void cc_splice(int64_t n, const uint8_t *ok, const uint8_t *a, const int64_t *a_offs, const uint8_t *b,
               const int64_t *b_offs, uint8_t *out, int64_t *out_offs) {
    int64_t w = 0, j = 0;
    out_offs[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *src = ok[i] ? a + a_offs[i] : b + b_offs[j];
        const int64_t len = ok[i] ? a_offs[i + 1] - a_offs[i] : b_offs[j + 1] - b_offs[j];
        j += !ok[i];
        memcpy(out + w, src, (size_t)len);
        w += len;
        out_offs[i + 1] = w;
    }
}

/* ---- exact Jaccard of candidate pairs (verify.py) ---------------------------------------------------- */

/* Sorts each text's segment h[offs[i]:offs[i + 1]] ascending, in place. */
void cc_sort_segments(uint64_t *h, const int64_t *offs, int64_t n) {
    for (int64_t i = 0; i < n; i++) qsort(h + offs[i], (size_t)(offs[i + 1] - offs[i]), sizeof(uint64_t), cmp_u64);
}

/* Texts' distinct shingles sorted in h[offs[t]:offs[t + 1]]: out[i] = |A & B| / |A | B| of texts a[i], b[i]
 * (the numpy path's division of the same integers). */
void cc_jaccard(const uint64_t *h, const int64_t *offs, const int64_t *a, const int64_t *b, int64_t n,
                double *out) {
    for (int64_t i = 0; i < n; i++) {
        const uint64_t *x = h + offs[a[i]], *xe = h + offs[a[i] + 1], *y = h + offs[b[i]], *ye = h + offs[b[i] + 1];
        const int64_t la = xe - x, lb = ye - y;
        int64_t inter = 0;
        while (x < xe && y < ye) {
            const uint64_t u = *x, v = *y;
            inter += u == v;
            x += u <= v;
            y += v <= u;
        }
        out[i] = (double)inter / (double)(la + lb - inter);
    }
}

void cc_free(void *p) { free(p); }
