/*
 * c_brightness: a Sluice plugin in C, written from sdk/ABI.md alone (no SDK), built for
 * wasm32 with clang. A `map` plugin over the feature `image` (u8, any shape): with
 * probability `p` (default 1) it adds `delta` (default 32, may be negative) to every value,
 * saturating at 0 and 255. Randomness comes only from the element's seed (SplitMix64).
 *
 * Build (no libc, no imports; exports the ABI's twelve functions and `memory`):
 *   clang --target=wasm32-unknown-unknown -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic \
 *         -o c_brightness.wasm brightness.c
 */

typedef unsigned char u8;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef unsigned long usize; /* 32 bits in wasm32 */

#define EXPORT __attribute__((visibility("default")))

/* ---- memory: a bump allocator over the module's linear memory ---------------------- */

extern u8 __heap_base;
static usize heap_top = 0;

EXPORT u8 *sluice_alloc(usize len) {
    if (heap_top == 0) heap_top = (usize)&__heap_base;
    usize start = (heap_top + 7) & ~(usize)7;
    usize end = start + (len ? len : 1);
    if (end < start) return 0;
    usize have = __builtin_wasm_memory_size(0) * 65536;
    if (end > have) {
        usize pages = (end - have + 65535) / 65536;
        if (__builtin_wasm_memory_grow(0, pages) == (usize)-1) return 0;
    }
    heap_top = end;
    return (u8 *)start;
}

/* Memory is never given back (the host reuses its input buffer; outputs reuse theirs). */
EXPORT void sluice_free(u8 *ptr, usize len) { (void)ptr; (void)len; }

static void copy(u8 *dst, const u8 *src, usize n) { for (usize i = 0; i < n; i++) dst[i] = src[i]; }

static usize length(const char *s) { usize n = 0; while (s[n]) n++; return n; }

/* ---- metadata (§4) ------------------------------------------------------------------- */

static const char INFO[] =
    "{\"abi_version\":1,\"name\":\"c_brightness\",\"version\":\"0.1.0\",\"kind\":\"map\","
    "\"description\":\"adds delta to u8 images with probability p (written in C)\","
    "\"inputs\":[{\"name\":\"image\",\"dtype\":\"u8\"}],"
    "\"outputs\":[{\"name\":\"image\",\"dtype\":\"u8\"}]}";

EXPORT u32 sluice_abi_version(void) { return 1; }
EXPORT const u8 *sluice_info_ptr(void) { return (const u8 *)INFO; }
EXPORT usize sluice_info_len(void) { return sizeof(INFO) - 1; }

/* ---- instances ----------------------------------------------------------------------- */

#define MAX_INSTANCES 64

struct instance {
    i32 live;
    i32 delta;
    double p;
    u8 *out; usize out_len, out_cap;
    const char *err; usize err_len;
};

static struct instance instances[MAX_INSTANCES + 1]; /* handle 0: init errors */
static char init_error[160];

static struct instance *get(u32 handle) {
    if (handle == 0 || handle > MAX_INSTANCES || !instances[handle].live) return 0;
    return &instances[handle];
}

/* ---- configuration (§6): a flat JSON object of numbers ------------------------------- */

static void set_init_error(const char *a, const char *b) {
    usize n = 0;
    for (const char *s = a; *s && n < sizeof(init_error) - 1; s++) init_error[n++] = *s;
    for (const char *s = b; s && *s && n < sizeof(init_error) - 1; s++) init_error[n++] = *s;
    init_error[n] = 0;
    instances[0].err = init_error;
    instances[0].err_len = n;
}

static usize skip_ws(const u8 *s, usize i, usize n) {
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) i++;
    return i;
}

/* Parses a JSON number at s[*i]; returns 0 on failure. */
static i32 number(const u8 *s, usize *i, usize n, double *out) {
    usize j = *i; double sign = 1, v = 0, scale = 1; i32 digits = 0;
    if (j < n && s[j] == '-') { sign = -1; j++; }
    while (j < n && s[j] >= '0' && s[j] <= '9') { v = v * 10 + (s[j] - '0'); j++; digits++; }
    if (j < n && s[j] == '.') {
        j++;
        while (j < n && s[j] >= '0' && s[j] <= '9') { scale /= 10; v += (s[j] - '0') * scale; j++; digits++; }
    }
    if (!digits) return 0;
    if (j < n && (s[j] == 'e' || s[j] == 'E')) return 0; /* not needed here: refused */
    *out = sign * v; *i = j; return 1;
}

static i32 parse_config(const u8 *s, usize n, i32 *delta, double *p) {
    usize i = skip_ws(s, 0, n);
    if (i == n) return 1; /* empty: {} */
    if (s[i] != '{') { set_init_error("invalid configuration: expected a JSON object", 0); return 0; }
    i = skip_ws(s, i + 1, n);
    if (i < n && s[i] == '}') return 1;
    for (;;) {
        if (i >= n || s[i] != '"') { set_init_error("invalid configuration: expected a key", 0); return 0; }
        usize k = ++i;
        while (i < n && s[i] != '"') i++;
        if (i >= n) { set_init_error("invalid configuration: unterminated key", 0); return 0; }
        usize klen = i - k;
        i = skip_ws(s, i + 1, n);
        if (i >= n || s[i] != ':') { set_init_error("invalid configuration: expected ':'", 0); return 0; }
        i = skip_ws(s, i + 1, n);
        double v;
        if (!number(s, &i, n, &v)) { set_init_error("invalid configuration: values must be plain numbers", 0); return 0; }
        if (klen == 5 && s[k] == 'd' && s[k+1] == 'e' && s[k+2] == 'l' && s[k+3] == 't' && s[k+4] == 'a') {
            if (v < -255 || v > 255 || v != (double)(i32)v) { set_init_error("invalid configuration: delta must be an integer in [-255, 255]", 0); return 0; }
            *delta = (i32)v;
        } else if (klen == 1 && s[k] == 'p') {
            if (v < 0 || v > 1) { set_init_error("invalid configuration: p must be in [0, 1]", 0); return 0; }
            *p = v;
        } else {
            static char key[48]; usize m = klen < 40 ? klen : 40;
            key[0] = '"'; copy((u8 *)key + 1, s + k, m); key[m + 1] = '"'; key[m + 2] = 0;
            set_init_error("invalid configuration: unknown key ", key);
            return 0;
        }
        i = skip_ws(s, i, n);
        if (i < n && s[i] == ',') { i = skip_ws(s, i + 1, n); continue; }
        if (i < n && s[i] == '}') break;
        set_init_error("invalid configuration: expected ',' or '}'", 0);
        return 0;
    }
    if (skip_ws(s, i + 1, n) != n) { set_init_error("invalid configuration: bytes after the object", 0); return 0; }
    return 1;
}

EXPORT u32 sluice_init(const u8 *config, usize config_len) {
    i32 delta = 32; double p = 1.0;
    if (!parse_config(config, config_len, &delta, &p)) return 0;
    for (u32 h = 1; h <= MAX_INSTANCES; h++) {
        if (!instances[h].live) {
            struct instance *in = &instances[h];
            in->live = 1; in->delta = delta; in->p = p;
            in->out = 0; in->out_len = 0; in->out_cap = 0; in->err = 0; in->err_len = 0;
            return h;
        }
    }
    set_init_error("too many instances", 0);
    return 0;
}

EXPORT void sluice_destroy(u32 handle) {
    if (handle >= 1 && handle <= MAX_INSTANCES) instances[handle].live = 0;
}

/* ---- the batch buffer (§5) ----------------------------------------------------------- */

struct reader { const u8 *b; usize n, pos; };

static i32 take(struct reader *r, usize k, const u8 **out) {
    if (k > r->n - r->pos) return 0;
    *out = r->b + r->pos; r->pos += k; return 1;
}
static i32 u32_at(struct reader *r, u32 *v) {
    const u8 *p; if (!take(r, 4, &p)) return 0;
    *v = (u32)p[0] | (u32)p[1] << 8 | (u32)p[2] << 16 | (u32)p[3] << 24; return 1;
}
static i32 u64_at(struct reader *r, u64 *v) {
    u32 lo, hi; if (!u32_at(r, &lo) || !u32_at(r, &hi)) return 0;
    *v = (u64)lo | (u64)hi << 32; return 1;
}

static i32 fail(struct instance *in, i32 status, const char *msg) {
    in->err = msg; in->err_len = length(msg); in->out_len = 0; return status;
}

/* Output buffer growth: room for `need` more bytes. */
static i32 reserve(struct instance *in, usize need) {
    if (in->out_cap - in->out_len >= need) return 1;
    usize cap = in->out_cap ? in->out_cap : 4096;
    while (cap - in->out_len < need) cap *= 2;
    u8 *fresh = sluice_alloc(cap);
    if (!fresh) return 0;
    copy(fresh, in->out, in->out_len);
    in->out = fresh; in->out_cap = cap;
    return 1;
}
static void put(struct instance *in, const void *p, usize n) { copy(in->out + in->out_len, p, n); in->out_len += n; }
static void put_u32(struct instance *in, u32 v) { u8 b[4] = {v, v >> 8, v >> 16, v >> 24}; put(in, b, 4); }
static void put_u64(struct instance *in, u64 v) { put_u32(in, (u32)v); put_u32(in, (u32)(v >> 32)); }

static u64 splitmix64(u64 x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

EXPORT i32 sluice_process(u32 handle, const u8 *input, usize input_len, const u64 *seeds, usize n_seeds) {
    struct instance *in = get(handle);
    if (!in) return 5;
    struct reader r = {input, input_len, 0};
    const u8 *magic; u32 n;
    if (!take(&r, 4, &magic) || magic[0] != 'S' || magic[1] != 'L' || magic[2] != 'B' || magic[3] != '1')
        return fail(in, 1, "not a batch buffer (bad magic)");
    if (!u32_at(&r, &n)) return fail(in, 1, "truncated batch header");
    if (n != n_seeds) return fail(in, 1, "element and seed counts differ");
    for (u32 i = 0; i < n; i++) { u32 parent; if (!u32_at(&r, &parent) || parent != i) return fail(in, 1, "bad parent index in an input batch"); }
    in->out_len = 0;
    if (!reserve(in, 8 + 4 * (usize)n)) return fail(in, 2, "out of memory");
    put(in, "SLB1", 4); put_u32(in, n);
    for (u32 i = 0; i < n; i++) put_u32(in, i);
    i32 previous = 0; /* only used when built with -DBROKEN_NEIGHBOURS (a test of the checker) */
    for (u32 e = 0; e < n; e++) {
        u32 n_tensors; if (!u32_at(&r, &n_tensors)) return fail(in, 1, "truncated element");
        if (n_tensors == 0xFFFFFFFFu) return fail(in, 1, "a pass-through marker in an input batch");
        i32 found = 0;
        for (u32 t = 0; t < n_tensors; t++) {
            u32 name_len; const u8 *name, *head;
            if (!u32_at(&r, &name_len) || !take(&r, name_len, &name) || !take(&r, 4, &head))
                return fail(in, 1, "truncated tensor header");
            u8 dtype = head[0], rank = head[1];
            if (dtype < 1 || dtype > 6) return fail(in, 1, "unknown dtype code");
            const u8 *dims_at = r.b + r.pos;
            u64 count = 1;
            for (u8 d = 0; d < rank; d++) {
                u64 dim; if (!u64_at(&r, &dim)) return fail(in, 1, "truncated dimensions");
                if (dim && count > 0xFFFFFFFFull / dim) return fail(in, 1, "shape overflows");
                count *= dim;
            }
            u64 values; if (!u64_at(&r, &values)) return fail(in, 1, "truncated value count");
            if (values != count) return fail(in, 1, "value count disagrees with the shape");
            i32 is_image = name_len == 5 && name[0] == 'i' && name[1] == 'm' && name[2] == 'a' && name[3] == 'g' && name[4] == 'e';
            if (dtype == 6) { /* byte strings: skip */
                for (u64 v = 0; v < values; v++) {
                    u64 len; const u8 *skip;
                    if (!u64_at(&r, &len) || len > r.n - r.pos || !take(&r, (usize)len, &skip)) return fail(in, 1, "truncated byte string");
                }
                if (is_image) return fail(in, 1, "feature \"image\" must be u8, got bytes");
                continue;
            }
            usize size = dtype == 1 ? 1 : (dtype == 2 || dtype == 4) ? 4 : 8;
            const u8 *pad, *data;
            if (!take(&r, (8 - r.pos % 8) % 8, &pad)) return fail(in, 1, "truncated padding");
            if (values > (u64)(r.n - r.pos) / size || !take(&r, (usize)values * size, &data)) return fail(in, 1, "truncated values");
            if (!is_image) continue;
            if (dtype != 1) return fail(in, 1, "feature \"image\" must be u8");
            found = 1;
            /* The output element: the image alone (the host keeps the other features). */
            usize need = 4 + 4 + 5 + 4 + 8 * (usize)rank + 8 + 8 + (usize)values;
            if (!reserve(in, need)) return fail(in, 2, "out of memory");
            put_u32(in, 1); put_u32(in, 5); put(in, "image", 5);
            u8 h[4] = {1, rank, 0, 0}; put(in, h, 4);
            put(in, dims_at, 8 * (usize)rank);
            put_u64(in, values);
            while (in->out_len % 8) { u8 z = 0; put(in, &z, 1); }
            u64 x = splitmix64(seeds[e]);
            double u = (double)(x >> 40) / 16777216.0;
            i32 apply = u < in->p;
            for (u64 v = 0; v < values; v++) {
                i32 y = data[v];
                if (apply) { y += in->delta; y = y < 0 ? 0 : y > 255 ? 255 : y; }
#ifdef BROKEN_NEIGHBOURS
                /* Deliberately wrong: the output depends on the previous element of the call. */
                y = (y + previous) & 255;
#endif
                in->out[in->out_len + v] = (u8)y;
            }
            previous = values ? data[0] : 0;
            in->out_len += (usize)values;
        }
        if (!found) return fail(in, 1, "missing feature \"image\"");
    }
    if (r.pos != r.n) return fail(in, 1, "bytes after the last element");
    in->err = 0; in->err_len = 0;
    return 0;
}

EXPORT const u8 *sluice_output_ptr(u32 handle) { struct instance *in = get(handle); return in ? in->out : 0; }
EXPORT usize sluice_output_len(u32 handle) { struct instance *in = get(handle); return in ? in->out_len : 0; }
EXPORT const u8 *sluice_error_ptr(u32 handle) {
    if (handle == 0) return (const u8 *)instances[0].err;
    struct instance *in = get(handle); return in ? (const u8 *)in->err : 0;
}
EXPORT usize sluice_error_len(u32 handle) {
    if (handle == 0) return instances[0].err_len;
    struct instance *in = get(handle); return in ? in->err_len : 0;
}
