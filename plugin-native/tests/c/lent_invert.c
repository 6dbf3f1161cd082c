/*
 * lent_invert: a native Sluice `map` plugin in C, written from sdk/ABI.md alone, for the
 * native host's tests: ABI version 2 (the wire path of §3-§10 and the lent path of §11), or
 * version 1 when built with -DSLUICE_V1 (no `sluice_process_lent`).
 *
 * It inverts the u8 feature `image` (x -> 255 - x) of the elements whose seed is odd after
 * SplitMix64, and leaves the others unchanged (the wire path answers 0xFFFFFFFF for them, the
 * lent path writes nothing). For the load tests, -DOMIT_LENT leaves the lent function out of
 * a version-2 build, -DINFO_ABI=N makes the metadata say version N, and -DLENT_DISAGREES
 * makes the lent path write 254 - x (a bug `sluice plugin check` must catch).
 *
 * Configuration: `{}`, or `{"mode":M}` with M one of
 *   "decline"  every lent call returns DECLINED (6): the host takes the wire path;
 *   "refuse"   the lent path asks the host for a byte-string output (which it must refuse)
 *              and returns OK anyway: a plugin breaking the ABI, for the host to catch;
 *   "fail"     every call returns PLUGIN_ERROR (2) "failing on request", after the lent
 *              path has taken its output buffers.
 *
 *   cc -shared -fPIC -O2 -o liblent_invert.so lent_invert.c [-DSLUICE_V1]
 */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint8_t u8;
typedef uint32_t u32;
typedef int32_t i32;
typedef uint64_t u64;
typedef size_t usize;

#ifdef SLUICE_V1
#define ABI 1
#else
#define ABI 2
#endif
#ifndef INFO_ABI
#define INFO_ABI ABI
#endif
#define STR2(x) #x
#define STR(x) STR2(x)

enum { OK = 0, INVALID_INPUT = 1, PLUGIN_ERROR = 2, UNKNOWN_INSTANCE = 5, DECLINED = 6 };
enum { DT_U8 = 1, DT_BYTES = 6 };
static const u8 DTYPE_SIZE[7] = {0, 1, 4, 8, 4, 8, 0};

/* ---- metadata (§4) -------------------------------------------------------------------- */

static const char INFO[] = "{\"abi_version\":" STR(INFO_ABI) ",\"name\":\"lent_invert\","
                           "\"version\":\"0.1.0\",\"kind\":\"map\","
                           "\"inputs\":[{\"name\":\"image\",\"dtype\":\"u8\"}],"
                           "\"outputs\":[{\"name\":\"image\",\"dtype\":\"u8\"}]}";

u32 sluice_abi_version(void) { return ABI; }
const u8 *sluice_info_ptr(void) { return (const u8 *)INFO; }
usize sluice_info_len(void) { return sizeof INFO - 1; }

/* ---- memory (§3, §9): malloc is 8-byte aligned (at least) and thread-safe --------------- */

u8 *sluice_alloc(usize len) { return (u8 *)malloc(len ? len : 1); }
void sluice_free(u8 *ptr, usize len) {
    (void)len;
    free(ptr);
}

/* ---- instances: a table behind a lock (init and destroy may run on several threads) ---- */

enum { NORMAL, DECLINE, REFUSE, FAIL };
#define MAX_INSTANCES 256

struct instance {
    int live, mode;
    u8 *out;
    usize out_len, out_cap;
    char err[256];
    usize err_len;
};

static struct instance instances[MAX_INSTANCES + 1]; /* handle 0 is never live */
static pthread_mutex_t table = PTHREAD_MUTEX_INITIALIZER;
static __thread char init_err[128];
static __thread usize init_err_len;

static struct instance *get(u32 h) {
    if (h == 0 || h > MAX_INSTANCES) return 0;
    pthread_mutex_lock(&table);
    struct instance *i = instances[h].live ? &instances[h] : 0;
    pthread_mutex_unlock(&table);
    return i;
}

static int fail(struct instance *i, int status, const char *text) {
    i->err_len = (usize)snprintf(i->err, sizeof i->err, "%s", text);
    if (i->err_len >= sizeof i->err) i->err_len = sizeof i->err - 1;
    return status;
}

u32 sluice_init(const u8 *config, usize len) {
    static const char *const MODES[] = {"{}", "{\"mode\":\"decline\"}", "{\"mode\":\"refuse\"}",
                                        "{\"mode\":\"fail\"}"};
    int mode = len == 0 ? NORMAL : -1;
    for (int m = 0; m < 4 && mode < 0; m++)
        if (strlen(MODES[m]) == len && memcmp(MODES[m], config, len) == 0) mode = m;
    if (mode < 0) {
        init_err_len = (usize)snprintf(init_err, sizeof init_err,
                                       "expected {} or {\"mode\": \"decline\"|\"refuse\"|\"fail\"}");
        return 0;
    }
    pthread_mutex_lock(&table);
    u32 h = 1;
    while (h <= MAX_INSTANCES && instances[h].live) h++;
    if (h <= MAX_INSTANCES) {
        memset(&instances[h], 0, sizeof instances[h]);
        instances[h].live = 1;
        instances[h].mode = mode;
    }
    pthread_mutex_unlock(&table);
    if (h > MAX_INSTANCES) {
        init_err_len = (usize)snprintf(init_err, sizeof init_err, "too many instances");
        return 0;
    }
    return h;
}

void sluice_destroy(u32 h) {
    if (h == 0 || h > MAX_INSTANCES) return;
    pthread_mutex_lock(&table);
    if (instances[h].live) {
        free(instances[h].out);
        instances[h].live = 0;
    }
    pthread_mutex_unlock(&table);
}

const u8 *sluice_output_ptr(u32 h) {
    struct instance *i = get(h);
    return i ? i->out : 0;
}
usize sluice_output_len(u32 h) {
    struct instance *i = get(h);
    return i ? i->out_len : 0;
}
const u8 *sluice_error_ptr(u32 h) {
    if (h == 0) return (const u8 *)init_err;
    struct instance *i = get(h);
    return i ? (const u8 *)i->err : 0;
}
usize sluice_error_len(u32 h) {
    if (h == 0) return init_err_len;
    struct instance *i = get(h);
    return i ? i->err_len : 0;
}

static u64 splitmix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int inverts(u64 seed) { return (int)(splitmix64(seed) & 1); }

/* ---- the wire path (§5, §7): read every byte checked, write the map's output ---------- */

typedef struct {
    const u8 *buf;
    u64 len, pos;
} Reader;

static int take(Reader *r, u64 n, const u8 **at) {
    if (r->len - r->pos < n) return 0;
    if (at) *at = r->buf + r->pos;
    r->pos += n;
    return 1;
}
static int read_u32(Reader *r, u32 *v) {
    const u8 *b;
    if (!take(r, 4, &b)) return 0;
    memcpy(v, b, 4); /* little-endian hosts only (§1) */
    return 1;
}
static int read_u64(Reader *r, u64 *v) {
    const u8 *b;
    if (!take(r, 8, &b)) return 0;
    memcpy(v, b, 8);
    return 1;
}
static u64 pad8(u64 at) { return (8 - (at & 7)) & 7; }

typedef struct {
    const u8 *dims, *values;
    u64 count;
    u8 rank;
} Image;

/* One tensor; `image` (u8) is recorded. 0 with the message set when malformed. */
static int read_tensor(struct instance *inst, Reader *r, Image *image, int *found) {
    u32 name_len, head;
    const u8 *name, *dims;
    if (!read_u32(r, &name_len) || !take(r, name_len, &name) || !read_u32(r, &head))
        return fail(inst, 0, "invalid input: a truncated tensor header");
    u8 dtype = (u8)head, rank = (u8)(head >> 8);
    if (dtype < 1 || dtype > 6) return fail(inst, 0, "invalid input: an unknown dtype");
    if (!take(r, 8 * (u64)rank, &dims)) return fail(inst, 0, "invalid input: dims past the end");
    u64 product = 1, count;
    int zero = 0, overflow = 0;
    for (u8 k = 0; k < rank; k++) {
        u64 d;
        memcpy(&d, dims + 8 * k, 8);
        zero |= d == 0;
        if (!overflow && d && product > UINT64_MAX / d) overflow = 1;
        if (!overflow) product *= d;
    }
    if (zero) product = 0;
    else if (overflow) return fail(inst, 0, "invalid input: the dims overflow");
    if (!read_u64(r, &count) || count != product)
        return fail(inst, 0, "invalid input: the count disagrees with the dims");
    const u8 *values = 0;
    if (dtype == DT_BYTES) {
        for (u64 k = 0; k < count; k++) {
            u64 n;
            if (!read_u64(r, &n) || !take(r, n, 0))
                return fail(inst, 0, "invalid input: a byte string past the end");
        }
    } else {
        if (!take(r, pad8(r->pos), 0) || count > UINT64_MAX / 8 ||
            !take(r, count * DTYPE_SIZE[dtype], &values))
            return fail(inst, 0, "invalid input: values past the end");
    }
    if (name_len == 5 && memcmp(name, "image", 5) == 0) {
        if (dtype != DT_U8) return fail(inst, 0, "invalid input: feature \"image\" is not u8");
        *found = 1;
        image->dims = dims;
        image->values = values;
        image->count = count;
        image->rank = rank;
    }
    return 1;
}

static void put_u32(u8 *b, u32 v) { memcpy(b, &v, 4); }

i32 sluice_process(u32 h, const u8 *input, usize input_len, const u64 *seeds, usize n_seeds) {
    struct instance *inst = get(h);
    if (!inst) return UNKNOWN_INSTANCE;
    inst->out_len = 0;
    inst->err_len = 0;
    if (inst->mode == FAIL) return fail(inst, PLUGIN_ERROR, "failing on request");
    Reader r = {input, input_len, 0};
    u32 magic, n;
    if (!read_u32(&r, &magic) || magic != 0x31424C53u)
        return fail(inst, INVALID_INPUT, "invalid input: not a batch buffer");
    if (!read_u32(&r, &n)) return fail(inst, INVALID_INPUT, "invalid input: truncated header");
    if ((u64)n != (u64)n_seeds) return fail(inst, INVALID_INPUT, "invalid input: seeds and elements differ");
    if ((r.len - r.pos) / 8 < n) return fail(inst, INVALID_INPUT, "invalid input: too many elements");
    for (u32 i = 0; i < n; i++) {
        u32 parent = 0;
        if (!read_u32(&r, &parent) || parent != i) return fail(inst, INVALID_INPUT, "invalid input: a parent is not its index");
    }
    Image *images = (Image *)calloc(n ? n : 1, sizeof(Image));
    if (!images) return fail(inst, PLUGIN_ERROR, "out of memory");
    u64 out_len = 8 + 4 * (u64)n;
    for (u32 i = 0; i < n; i++) {
        u32 n_tensors;
        int found = 0;
        if (!read_u32(&r, &n_tensors) || n_tensors == 0xFFFFFFFFu) {
            free(images);
            return fail(inst, INVALID_INPUT, "invalid input: a truncated element or a marker");
        }
        for (u32 t = 0; t < n_tensors; t++)
            if (!read_tensor(inst, &r, &images[i], &found)) {
                free(images);
                return INVALID_INPUT;
            }
        if (!found) {
            free(images);
            return fail(inst, INVALID_INPUT, "invalid input: no feature \"image\"");
        }
        if (!inverts(seeds[i])) {
            out_len += 4;
        } else {
            u64 at = out_len + 4 + 4 + 5 + 4 + 8 * (u64)images[i].rank + 8;
            out_len = at + pad8(at) + images[i].count;
        }
    }
    if (r.pos != r.len) {
        free(images);
        return fail(inst, INVALID_INPUT, "invalid input: trailing bytes");
    }
    if (inst->out_cap < out_len) {
        free(inst->out);
        inst->out = (u8 *)malloc(out_len);
        inst->out_cap = inst->out ? out_len : 0;
        if (!inst->out) {
            free(images);
            return fail(inst, PLUGIN_ERROR, "out of memory");
        }
    }
    u8 *o = inst->out;
    u64 w = 8;
    put_u32(o, 0x31424C53u);
    put_u32(o + 4, n);
    for (u32 i = 0; i < n; i++, w += 4) put_u32(o + w, i);
    for (u32 i = 0; i < n; i++) {
        const Image *im = &images[i];
        if (!inverts(seeds[i])) {
            put_u32(o + w, 0xFFFFFFFFu), w += 4; /* unchanged */
            continue;
        }
        put_u32(o + w, 1), w += 4;
        put_u32(o + w, 5), w += 4;
        memcpy(o + w, "image", 5), w += 5;
        put_u32(o + w, (u32)DT_U8 | (u32)im->rank << 8), w += 4;
        memcpy(o + w, im->dims, 8 * (usize)im->rank), w += 8 * (u64)im->rank;
        memcpy(o + w, &im->count, 8), w += 8;
        for (u64 z = pad8(w); z; z--) o[w++] = 0;
        for (u64 k = 0; k < im->count; k++) o[w + k] = (u8)(255 - im->values[k]);
        w += im->count;
    }
    free(images);
    inst->out_len = (usize)w;
    return OK;
}

#if !defined(SLUICE_V1) && !defined(OMIT_LENT)
/* ---- the lent path (§11) ---------------------------------------------------------------- */

typedef struct {
    const u8 *name;
    usize name_len;
    const u64 *dims;
    const u8 *data;
    u64 count;
    u8 dtype, rank, reserved[6];
} sluice_tensor_view;

typedef struct {
    const sluice_tensor_view *tensors;
    usize n_tensors;
} sluice_element_view;

typedef u8 *(*sluice_alloc_output)(void *ctx, u32 element, const u8 *name, usize name_len, u8 dtype,
                                   u8 rank, const u64 *dims);

typedef struct {
    void *ctx;
    sluice_alloc_output alloc;
    u8 *keep;
} sluice_outputs;

i32 sluice_process_lent(u32 h, const sluice_element_view *elements, usize n, const u64 *seeds,
                        usize n_seeds, const sluice_outputs *out) {
    struct instance *inst = get(h);
    if (!inst) return UNKNOWN_INSTANCE;
    inst->out_len = 0;
    inst->err_len = 0;
    if (inst->mode == DECLINE) return fail(inst, DECLINED, "declining on request");
    if (n != n_seeds) return fail(inst, INVALID_INPUT, "invalid input: seeds and elements differ");
    /* Check every element first (§11.5: no output for a call that fails its input). */
    for (usize i = 0; i < n; i++) {
        const sluice_tensor_view *image = 0;
        for (usize t = 0; t < elements[i].n_tensors; t++) {
            const sluice_tensor_view *v = &elements[i].tensors[t];
            if (v->name_len == 5 && memcmp(v->name, "image", 5) == 0) image = v;
        }
        if (!image) return fail(inst, INVALID_INPUT, "invalid input: no feature \"image\"");
        if (image->dtype != DT_U8) return fail(inst, INVALID_INPUT, "invalid input: feature \"image\" is not u8");
    }
    for (usize i = 0; i < n; i++) {
        if (!inverts(seeds[i])) continue; /* unchanged: nothing written, nothing copied */
        const sluice_tensor_view *image = 0;
        for (usize t = 0; t < elements[i].n_tensors; t++)
            if (elements[i].tensors[t].name_len == 5 &&
                memcmp(elements[i].tensors[t].name, "image", 5) == 0)
                image = &elements[i].tensors[t];
        if (inst->mode == REFUSE) {
            /* Byte strings are never lent: the host must refuse, and this plugin then breaks
             * the ABI by returning OK. */
            if (out->alloc(out->ctx, (u32)i, (const u8 *)"label", 5, DT_BYTES, 0, 0))
                return fail(inst, PLUGIN_ERROR, "the host lent a byte-string buffer");
            continue;
        }
        u8 *dst = out->alloc(out->ctx, (u32)i, (const u8 *)"image", 5, DT_U8, image->rank, image->dims);
        if (!dst) return fail(inst, PLUGIN_ERROR, "the host refused an output buffer");
#ifdef LENT_DISAGREES
        for (u64 k = 0; k < image->count; k++) dst[k] = (u8)(254 - image->data[k]);
#else
        for (u64 k = 0; k < image->count; k++) dst[k] = (u8)(255 - image->data[k]);
#endif
    }
    if (inst->mode == FAIL) return fail(inst, PLUGIN_ERROR, "failing on request");
    return OK;
}
#endif
