/*
 * c_invert: a Sluice `map` plugin in C, written from sdk/ABI.md (version 1) alone.
 *
 * With probability `p` (config key, default 1.0) it replaces every value x of the u8
 * feature `image` (any rank) by 255 - x. The draw for an element comes only from that
 * element's seed: u = (splitmix64(seed) >> 11) * 2^-53, a uniform double in [0, 1), and
 * the element is inverted iff u < p (so p = 1 always inverts, p = 0 never does), where
 *
 *     splitmix64(s):  z = s + 0x9E3779B97F4A7C15
 *                     z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
 *                     z = (z ^ (z >> 27)) * 0x94D049BB133111EB
 *                     return z ^ (z >> 31)
 *
 * Freestanding: no libc, no imports; the module exports the twelve functions of ABI.md §3
 * and its `memory`. Build (see README.md):
 *
 *     clang --target=wasm32-unknown-unknown -O2 -nostdlib -Wl,--no-entry \
 *           -Wl,--export-dynamic -o c_invert.wasm invert.c
 *
 * Everything except the twelve exports is `static` (or hidden), so nothing else is exported
 * but `memory` (and the linker's own globals).
 */

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef __SIZE_TYPE__ usize;

#define EXPORT(name) __attribute__((export_name(name), visibility("default")))

/* ------------------------------------------------------------------------------------ */
/* memcpy / memset: clang may lower struct copies or loops to calls to these, and without  */
/* libc nobody else defines them. Hidden, so they are not exported; `no_builtin` keeps     */
/* clang from turning their own loops back into calls to themselves.                      */

__attribute__((visibility("hidden"), no_builtin("memcpy"))) void *memcpy(void *dst, const void *src,
                                                                          usize n) {
    u8 *d = (u8 *)dst;
    const u8 *s = (const u8 *)src;
    while (n--) *d++ = *s++;
    return dst;
}

__attribute__((visibility("hidden"), no_builtin("memset"))) void *memset(void *dst, int c, usize n) {
    u8 *d = (u8 *)dst;
    while (n--) *d++ = (u8)c;
    return dst;
}

/* ------------------------------------------------------------------------------------ */
/* Metadata (ABI.md §4), in static memory for the life of the module.                    */

static const char INFO[] =
    "{\"abi_version\":1,\"name\":\"c_invert\",\"version\":\"0.1.0\",\"kind\":\"map\","
    "\"description\":\"with probability p, replaces every value x of the u8 feature `image` by "
    "255 - x (a plugin in C)\","
    "\"inputs\":[{\"name\":\"image\",\"dtype\":\"u8\"}],"
    "\"outputs\":[{\"name\":\"image\",\"dtype\":\"u8\"}]}";

EXPORT("sluice_abi_version") u32 sluice_abi_version(void) { return 1; }
EXPORT("sluice_info_ptr") const u8 *sluice_info_ptr(void) { return (const u8 *)INFO; }
EXPORT("sluice_info_len") usize sluice_info_len(void) { return sizeof(INFO) - 1; }

/* ------------------------------------------------------------------------------------ */
/* Allocator: an address-ordered first-fit free list over the heap (from __heap_base up),  */
/* growing memory with memory.grow. Block sizes are the requested length rounded up to a  */
/* multiple of 8 (at least 8, so a free block can hold its link); every block starts      */
/* 8-byte aligned. `sluice_free` gets the length back, so blocks carry no header.         */

extern u8 __heap_base;

typedef struct FreeBlock {
    struct FreeBlock *next;
    usize size;
} FreeBlock;

static usize heap_top;   /* first never-allocated byte */
static usize heap_limit; /* end of linear memory */
static FreeBlock *free_list;

#define PAGE 65536u
#define MAX_ALLOC 0x7FFF0000u

static usize block_size(usize len) {
    if (len == 0) len = 1;
    usize size = (len + 7u) & ~(usize)7u;
    return size < sizeof(FreeBlock) ? sizeof(FreeBlock) : size;
}

EXPORT("sluice_alloc") u8 *sluice_alloc(usize len) {
    if (len > MAX_ALLOC) return 0;
    usize size = block_size(len);
    /* First fit in the free list, splitting the remainder off when it can hold a block. */
    for (FreeBlock **link = &free_list; *link; link = &(*link)->next) {
        FreeBlock *b = *link;
        if (b->size < size) continue;
        if (b->size - size >= sizeof(FreeBlock)) {
            FreeBlock *rest = (FreeBlock *)((u8 *)b + size);
            rest->next = b->next;
            rest->size = b->size - size;
            *link = rest;
        } else {
            *link = b->next;
        }
        return (u8 *)b;
    }
    if (heap_top == 0) {
        heap_top = ((usize)&__heap_base + 7u) & ~(usize)7u;
        heap_limit = __builtin_wasm_memory_size(0) * (usize)PAGE;
    }
    if (heap_top > heap_limit || size > MAX_ALLOC - heap_top) return 0;
    if (heap_top + size > heap_limit) {
        usize missing = heap_top + size - heap_limit;
        usize pages = (missing + PAGE - 1) / PAGE;
        if (__builtin_wasm_memory_grow(0, pages) == (usize)-1) return 0;
        heap_limit += pages * PAGE;
    }
    u8 *p = (u8 *)heap_top;
    heap_top += size;
    return p;
}

EXPORT("sluice_free") void sluice_free(u8 *ptr, usize len) {
    if (!ptr || len > MAX_ALLOC) return;
    usize size = block_size(len);
    FreeBlock *b = (FreeBlock *)ptr;
    b->size = size;
    /* Insert in address order, merging with the neighbours it touches. */
    FreeBlock *prev = 0, *next = free_list;
    while (next && (usize)next < (usize)b) {
        prev = next;
        next = next->next;
    }
    if (next && (usize)b + b->size == (usize)next) {
        b->size += next->size;
        b->next = next->next;
    } else {
        b->next = next;
    }
    if (prev && (usize)prev + prev->size == (usize)b) {
        prev->size += b->size;
        prev->next = b->next;
    } else if (prev) {
        prev->next = b;
    } else {
        free_list = b;
    }
}

/* ------------------------------------------------------------------------------------ */
/* Messages: a fixed buffer per instance (and one for init errors). Bytes taken from the  */
/* input (names) are copied as printable ASCII only, so a message is always valid UTF-8.  */

#define MSG_CAP 400

typedef struct {
    char text[MSG_CAP];
    usize len;
} Msg;

static void msg_clear(Msg *m) { m->len = 0; }

static void msg_bytes(Msg *m, const u8 *s, usize n) {
    for (usize i = 0; i < n && m->len < MSG_CAP; i++) {
        u8 c = s[i];
        m->text[m->len++] = (c >= 0x20 && c < 0x7F) ? (char)c : '?';
    }
}

static void msg_str(Msg *m, const char *s) {
    usize n = 0;
    while (s[n]) n++;
    msg_bytes(m, (const u8 *)s, n);
}

static void msg_u64(Msg *m, u64 v) {
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n && m->len < MSG_CAP) m->text[m->len++] = digits[--n];
}

/* ------------------------------------------------------------------------------------ */
/* Instances: a linked list keyed by handle; handles count up from 1 and are never reused. */

typedef struct Instance {
    struct Instance *next;
    u32 handle;
    double p;
    u8 *out;       /* output batch buffer (from sluice_alloc) */
    usize out_len; /* its length after the last successful call */
    usize out_cap; /* its allocated length */
    Msg error;
} Instance;

static Instance *instances;
static u32 next_handle = 1;
static Msg init_error;
static const char UNKNOWN[] = "unknown instance handle";

static Instance *find(u32 handle) {
    for (Instance *i = instances; i; i = i->next)
        if (i->handle == handle) return i;
    return 0;
}

EXPORT("sluice_error_ptr") const u8 *sluice_error_ptr(u32 handle) {
    if (handle == 0) return (const u8 *)init_error.text;
    Instance *i = find(handle);
    return i ? (const u8 *)i->error.text : (const u8 *)UNKNOWN;
}

EXPORT("sluice_error_len") usize sluice_error_len(u32 handle) {
    if (handle == 0) return init_error.len;
    Instance *i = find(handle);
    return i ? i->error.len : sizeof(UNKNOWN) - 1;
}

EXPORT("sluice_output_ptr") const u8 *sluice_output_ptr(u32 handle) {
    Instance *i = find(handle);
    return i ? i->out : 0;
}

EXPORT("sluice_output_len") usize sluice_output_len(u32 handle) {
    Instance *i = find(handle);
    return i ? i->out_len : 0;
}

EXPORT("sluice_destroy") void sluice_destroy(u32 handle) {
    for (Instance **link = &instances; *link; link = &(*link)->next) {
        Instance *i = *link;
        if (i->handle != handle) continue;
        *link = i->next;
        if (i->out) sluice_free(i->out, i->out_cap);
        sluice_free((u8 *)i, sizeof(Instance));
        return;
    }
}

/* ------------------------------------------------------------------------------------ */
/* Configuration (ABI.md §6): a JSON object; the only key is "p", a number in [0, 1].     */
/* The parser reads exactly one object; it never needs to skip a value, because any key   */
/* other than "p" is refused as soon as it is read.                                       */

typedef struct {
    const u8 *s;
    usize len, pos;
} Json;

static void json_ws(Json *j) {
    while (j->pos < j->len) {
        u8 c = j->s[j->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        j->pos++;
    }
}

static int hex_digit(u8 c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads a string at j->pos (which is '"'), decoding escapes into key[0..*key_len]
 * (truncated at key_cap; \uXXXX is encoded as UTF-8, surrogates unpaired). 0 on error. */
static int json_string(Json *j, u8 *key, usize key_cap, usize *key_len) {
    *key_len = 0;
    j->pos++; /* the opening quote */
    while (j->pos < j->len) {
        u8 c = j->s[j->pos++];
        u8 out[3];
        usize n = 1;
        if (c == '"') return 1;
        if (c < 0x20) return 0;
        out[0] = c;
        if (c == '\\') {
            if (j->pos >= j->len) return 0;
            u8 e = j->s[j->pos++];
            switch (e) {
            case '"': case '\\': case '/': out[0] = e; break;
            case 'b': out[0] = '\b'; break;
            case 'f': out[0] = '\f'; break;
            case 'n': out[0] = '\n'; break;
            case 'r': out[0] = '\r'; break;
            case 't': out[0] = '\t'; break;
            case 'u': {
                if (j->len - j->pos < 4) return 0;
                u32 cp = 0;
                for (int k = 0; k < 4; k++) {
                    int h = hex_digit(j->s[j->pos++]);
                    if (h < 0) return 0;
                    cp = cp * 16 + (u32)h;
                }
                if (cp < 0x80) {
                    out[0] = (u8)cp;
                } else if (cp < 0x800) {
                    out[0] = (u8)(0xC0 | (cp >> 6));
                    out[1] = (u8)(0x80 | (cp & 0x3F));
                    n = 2;
                } else {
                    out[0] = (u8)(0xE0 | (cp >> 12));
                    out[1] = (u8)(0x80 | ((cp >> 6) & 0x3F));
                    out[2] = (u8)(0x80 | (cp & 0x3F));
                    n = 3;
                }
                break;
            }
            default: return 0;
            }
        }
        for (usize k = 0; k < n; k++)
            if (*key_len < key_cap) key[(*key_len)++] = out[k];
    }
    return 0; /* unterminated */
}

/* Reads a JSON number (RFC 8259 grammar) as a double. Up to 19 significant digits are
 * kept (exact for the values a probability is written with); 0 on a malformed number. */
static int json_number(Json *j, double *value) {
    usize p = j->pos;
    int negative = 0, digits = 0, exp10 = 0;
    u64 mantissa = 0;
    if (p < j->len && j->s[p] == '-') negative = 1, p++;
    if (p >= j->len || j->s[p] < '0' || j->s[p] > '9') return 0;
    if (j->s[p] == '0') {
        p++;
    } else {
        while (p < j->len && j->s[p] >= '0' && j->s[p] <= '9') {
            if (digits < 19) mantissa = mantissa * 10 + (u64)(j->s[p] - '0'), digits += mantissa != 0;
            else exp10++;
            p++;
        }
    }
    if (p < j->len && j->s[p] == '.') {
        p++;
        if (p >= j->len || j->s[p] < '0' || j->s[p] > '9') return 0;
        while (p < j->len && j->s[p] >= '0' && j->s[p] <= '9') {
            if (digits < 19) {
                mantissa = mantissa * 10 + (u64)(j->s[p] - '0');
                digits += mantissa != 0;
                exp10--;
            }
            p++;
        }
    }
    if (p < j->len && (j->s[p] == 'e' || j->s[p] == 'E')) {
        p++;
        int exp_negative = 0, e = 0;
        if (p < j->len && (j->s[p] == '+' || j->s[p] == '-')) exp_negative = j->s[p] == '-', p++;
        if (p >= j->len || j->s[p] < '0' || j->s[p] > '9') return 0;
        while (p < j->len && j->s[p] >= '0' && j->s[p] <= '9') {
            if (e < 100000) e = e * 10 + (j->s[p] - '0');
            p++;
        }
        exp10 += exp_negative ? -e : e;
    }
    double v = (double)mantissa;
    if (v != 0.0) {
        /* Multiply or divide by 10^|exp10|; past ±400 the result is inf or 0 anyway. */
        int k = exp10 < 0 ? -exp10 : exp10;
        if (k > 400) k = 400;
        double scale = 1.0;
        while (k--) scale *= 10.0;
        v = exp10 < 0 ? v / scale : v * scale;
    }
    *value = negative ? -v : v;
    j->pos = p;
    return 1;
}

static u32 init_fail(const char *what) {
    msg_clear(&init_error);
    msg_str(&init_error, what);
    return 0;
}

EXPORT("sluice_init") u32 sluice_init(const u8 *config, usize config_len) {
    double p = 1.0;
    int seen_p = 0;
    msg_clear(&init_error);
    Json j = {config, config_len, 0};
    json_ws(&j);
    if (j.pos < j.len) { /* zero bytes (or only whitespace) mean {} */
        if (j.s[j.pos] != '{') return init_fail("the configuration must be a JSON object");
        j.pos++;
        json_ws(&j);
        if (j.pos < j.len && j.s[j.pos] == '}') {
            j.pos++;
        } else {
            for (;;) {
                u8 key[64];
                usize key_len;
                json_ws(&j);
                if (j.pos >= j.len || j.s[j.pos] != '"' || !json_string(&j, key, sizeof key, &key_len))
                    return init_fail("malformed configuration: expected a key");
                if (key_len != 1 || key[0] != 'p') {
                    msg_clear(&init_error);
                    msg_str(&init_error, "unknown key \"");
                    msg_bytes(&init_error, key, key_len);
                    msg_str(&init_error, "\" (the only key is \"p\")");
                    return 0;
                }
                if (seen_p) return init_fail("duplicate key \"p\"");
                seen_p = 1;
                json_ws(&j);
                if (j.pos >= j.len || j.s[j.pos] != ':')
                    return init_fail("malformed configuration: expected ':'");
                j.pos++;
                json_ws(&j);
                if (!json_number(&j, &p)) return init_fail("p must be a number in [0, 1]");
                if (!(p >= 0.0 && p <= 1.0)) return init_fail("p must be in [0, 1]");
                json_ws(&j);
                if (j.pos < j.len && j.s[j.pos] == ',') {
                    j.pos++;
                    continue;
                }
                if (j.pos < j.len && j.s[j.pos] == '}') {
                    j.pos++;
                    break;
                }
                return init_fail("malformed configuration: expected ',' or '}'");
            }
        }
        json_ws(&j);
        if (j.pos != j.len) return init_fail("malformed configuration: bytes after the object");
    }
    if (next_handle == 0) return init_fail("out of instance handles");
    Instance *i = (Instance *)sluice_alloc(sizeof(Instance));
    if (!i) return init_fail("out of memory");
    memset(i, 0, sizeof *i);
    i->handle = next_handle++;
    i->p = p;
    i->next = instances;
    instances = i;
    return i->handle;
}

/* ------------------------------------------------------------------------------------ */
/* The batch buffer (ABI.md §5). Every read is checked against the buffer's length.       */

enum { OK = 0, INVALID_INPUT = 1, PLUGIN_ERROR = 2, UNKNOWN_INSTANCE = 5 };
enum { DT_U8 = 1, DT_I32, DT_I64, DT_F32, DT_F64, DT_BYTES };
static const u8 DTYPE_SIZE[7] = {0, 1, 4, 8, 4, 8, 0};
static const char *const DTYPE_NAME[7] = {"?", "u8", "i32", "i64", "f32", "f64", "bytes"};

typedef struct {
    const u8 *buf;
    u64 len, pos;
} Reader;

static int read_u32(Reader *r, u32 *v) {
    if (r->len - r->pos < 4) return 0;
    const u8 *b = r->buf + r->pos;
    *v = (u32)b[0] | (u32)b[1] << 8 | (u32)b[2] << 16 | (u32)b[3] << 24;
    r->pos += 4;
    return 1;
}

static int read_u64(Reader *r, u64 *v) {
    u32 lo, hi;
    if (r->len - r->pos < 8 || !read_u32(r, &lo) || !read_u32(r, &hi)) return 0;
    *v = (u64)hi << 32 | lo;
    return 1;
}

static int skip(Reader *r, u64 n) {
    if (r->len - r->pos < n) return 0;
    r->pos += n;
    return 1;
}

static void put_u32(u8 *b, u32 v) {
    b[0] = (u8)v, b[1] = (u8)(v >> 8), b[2] = (u8)(v >> 16), b[3] = (u8)(v >> 24);
}

static void put_u64(u8 *b, u64 v) {
    put_u32(b, (u32)v);
    put_u32(b + 4, (u32)(v >> 32));
}

/* Where an element's `image` lies in the input buffer. */
typedef struct {
    u64 dims;    /* offset of its dims */
    u64 payload; /* offset of its values */
    u64 count;
    u8 rank;
} Image;

static int invalid(Instance *inst, u64 element, const char *what) {
    Msg *m = &inst->error;
    msg_clear(m);
    msg_str(m, "invalid input: ");
    if (element != (u64)-1) {
        msg_str(m, "element ");
        msg_u64(m, element);
        msg_str(m, ": ");
    }
    msg_str(m, what);
    return INVALID_INPUT;
}

static u64 pad8(u64 offset) { return (8 - (offset & 7)) & 7; }

/* a * b into *out, 0 on overflow. Written with 32-bit halves: the obvious
 * `a > UINT64_MAX / b` is turned by clang into a 128-bit multiply, a call to compiler-rt's
 * __multi3, which a module built without libraries cannot link. */
static int mul_u64(u64 a, u64 b, u64 *out) {
    u64 a_hi = a >> 32, a_lo = a & 0xFFFFFFFFu, b_hi = b >> 32, b_lo = b & 0xFFFFFFFFu;
    if (a_hi && b_hi) return 0;
    u64 cross = a_hi * b_lo + a_lo * b_hi; /* one term is 0, the other < 2^64 */
    if (cross >> 32) return 0;
    u64 low = a_lo * b_lo, sum = low + (cross << 32);
    if (sum < low) return 0;
    *out = sum;
    return 1;
}

/* Reads one tensor; if it is `image`, records it in *image (refusing a second one or a
 * dtype other than u8). Returns OK or INVALID_INPUT with the message set. */
static int read_tensor(Instance *inst, Reader *r, u64 element, Image *image, int *found) {
    u32 name_len;
    if (!read_u32(r, &name_len)) return invalid(inst, element, "truncated tensor header");
    u64 name_at = r->pos;
    if (!skip(r, name_len)) return invalid(inst, element, "tensor name past the end of the buffer");
    const u8 *name = r->buf + name_at;
    u32 header;
    if (!read_u32(r, &header)) return invalid(inst, element, "truncated tensor header");
    u8 dtype = (u8)header, rank = (u8)(header >> 8);
    if (header >> 16) return invalid(inst, element, "non-zero reserved bytes in a tensor header");
    if (dtype < DT_U8 || dtype > DT_BYTES) return invalid(inst, element, "unknown dtype");
    u64 dims_at = r->pos, product = 1, count;
    int zero = 0, overflow = 0; /* a zero dim makes the product 0 even after an overflow */
    for (u8 k = 0; k < rank; k++) {
        u64 d;
        if (!read_u64(r, &d)) return invalid(inst, element, "dims past the end of the buffer");
        zero |= d == 0;
        if (!overflow && !mul_u64(product, d, &product)) overflow = 1;
    }
    if (zero) product = 0;
    else if (overflow) return invalid(inst, element, "the product of the dims overflows");
    if (!read_u64(r, &count)) return invalid(inst, element, "count past the end of the buffer");
    if (count != product) return invalid(inst, element, "the count disagrees with the dims");
    u64 payload_at;
    if (dtype == DT_BYTES) {
        payload_at = r->pos;
        for (u64 k = 0; k < count; k++) {
            u64 n;
            if (!read_u64(r, &n) || !skip(r, n))
                return invalid(inst, element, "bytes value past the end of the buffer");
        }
    } else {
        if (!skip(r, pad8(r->pos))) return invalid(inst, element, "padding past the end of the buffer");
        payload_at = r->pos;
        u64 bytes;
        if (!mul_u64(count, DTYPE_SIZE[dtype], &bytes) || !skip(r, bytes))
            return invalid(inst, element, "values past the end of the buffer");
    }
    if (name_len == 5 && name[0] == 'i' && name[1] == 'm' && name[2] == 'a' && name[3] == 'g' &&
        name[4] == 'e') {
        if (*found) return invalid(inst, element, "two tensors named \"image\"");
        if (dtype != DT_U8) {
            Msg *m = &inst->error;
            invalid(inst, element, "feature \"image\" is ");
            msg_str(m, DTYPE_NAME[dtype]);
            msg_str(m, ", expected u8");
            return INVALID_INPUT;
        }
        *found = 1;
        image->dims = dims_at;
        image->payload = payload_at;
        image->count = count;
        image->rank = rank;
    }
    return OK;
}

static u64 splitmix64(u64 seed) {
    u64 z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int process(Instance *inst, const u8 *input, usize input_len, const u64 *seeds, usize n_seeds) {
    Reader r = {input, input_len, 0};
    u32 magic, n;
    if (!read_u32(&r, &magic) || magic != 0x31424C53u) /* "SLB1" little-endian */
        return invalid(inst, (u64)-1, "bad magic (expected \"SLB1\")");
    if (!read_u32(&r, &n)) return invalid(inst, (u64)-1, "truncated header");
    if ((u64)n != (u64)n_seeds) {
        invalid(inst, (u64)-1, "the batch has ");
        msg_u64(&inst->error, n);
        msg_str(&inst->error, " elements but ");
        msg_u64(&inst->error, n_seeds);
        msg_str(&inst->error, " seeds were given");
        return INVALID_INPUT;
    }
    if ((r.len - r.pos) / 4 < n) return invalid(inst, (u64)-1, "parents past the end of the buffer");
    for (u32 i = 0; i < n; i++) {
        u32 parent;
        read_u32(&r, &parent);
        if (parent != i) return invalid(inst, i, "an input's parent must be its own index");
    }
    /* Each element needs at least its 4-byte tensor count, so n is bounded by the buffer,
     * and the table below is bounded too. */
    if ((r.len - r.pos) / 4 < n) return invalid(inst, (u64)-1, "elements past the end of the buffer");
    Image *images = 0;
    u64 table64 = (u64)n * sizeof(Image); /* computed in 64 bits: n * 32 can pass 2^32 */
    usize table = table64 > MAX_ALLOC ? 0 : (usize)table64;
    if (n) {
        images = table ? (Image *)sluice_alloc(table) : 0;
        if (!images) {
            msg_clear(&inst->error);
            msg_str(&inst->error, "out of memory");
            return PLUGIN_ERROR;
        }
    }
    /* Pass 1: validate everything and size the output. */
    int status = OK;
    u64 out_len = 8 + 4 * (u64)n;
    for (u32 i = 0; i < n && status == OK; i++) {
        u32 n_tensors;
        int found = 0;
        if (!read_u32(&r, &n_tensors)) {
            status = invalid(inst, i, "truncated element");
            break;
        }
        if (n_tensors == 0xFFFFFFFFu) {
            status = invalid(inst, i, "\"unchanged\" (0xFFFFFFFF) in an input buffer");
            break;
        }
        for (u32 t = 0; t < n_tensors && status == OK; t++) status = read_tensor(inst, &r, i, &images[i], &found);
        if (status == OK && !found) status = invalid(inst, i, "no feature \"image\"");
        if (status == OK) {
            /* n_tensors, name_len, "image", dtype/rank/reserved, dims, count, padding, values */
            u64 at = out_len + 4 + 4 + 5 + 4 + 8 * (u64)images[i].rank + 8;
            out_len = at + pad8(at) + images[i].count;
            if (out_len > MAX_ALLOC) status = invalid(inst, i, "the output would not fit in memory");
        }
    }
    if (status == OK && r.pos != r.len) status = invalid(inst, (u64)-1, "trailing bytes after the last element");
    if (status != OK) {
        if (images) sluice_free((u8 *)images, table);
        return status;
    }
    /* The output buffer: reuse the instance's if it is big enough. */
    if ((u64)inst->out_cap < out_len) {
        if (inst->out) sluice_free(inst->out, inst->out_cap);
        inst->out_cap = 0;
        inst->out = sluice_alloc((usize)out_len);
        if (!inst->out) {
            if (images) sluice_free((u8 *)images, table);
            msg_clear(&inst->error);
            msg_str(&inst->error, "out of memory for the output (");
            msg_u64(&inst->error, out_len);
            msg_str(&inst->error, " bytes)");
            return PLUGIN_ERROR;
        }
        inst->out_cap = (usize)out_len;
    }
    /* Pass 2: write the map batch, parents 0..n-1, each element only its `image`. */
    u8 *o = inst->out;
    u64 w = 0;
    put_u32(o, 0x31424C53u);
    put_u32(o + 4, n);
    w = 8;
    for (u32 i = 0; i < n; i++, w += 4) put_u32(o + w, i);
    for (u32 i = 0; i < n; i++) {
        const Image *im = &images[i];
        put_u32(o + w, 1), w += 4;
        put_u32(o + w, 5), w += 4;
        memcpy(o + w, "image", 5), w += 5;
        put_u32(o + w, (u32)DT_U8 | (u32)im->rank << 8), w += 4;
        memcpy(o + w, input + im->dims, 8 * (usize)im->rank), w += 8 * (u64)im->rank;
        put_u64(o + w, im->count), w += 8;
        for (u64 z = pad8(w); z; z--) o[w++] = 0;
        const u8 *src = input + im->payload;
        u8 *dst = o + w;
        usize count = (usize)im->count;
        double u = (double)(splitmix64(seeds[i]) >> 11) * (1.0 / 9007199254740992.0);
        if (u < inst->p) {
            for (usize k = 0; k < count; k++) dst[k] = (u8)(255 - src[k]);
        } else {
            memcpy(dst, src, count);
        }
        w += count;
    }
    if (images) sluice_free((u8 *)images, table);
    inst->out_len = (usize)w;
    return OK;
}

EXPORT("sluice_process")
i32 sluice_process(u32 handle, const u8 *input, usize input_len, const u64 *seeds, usize n_seeds) {
    Instance *inst = find(handle);
    if (!inst) return UNKNOWN_INSTANCE;
    inst->out_len = 0;
    msg_clear(&inst->error);
    return process(inst, input, input_len, seeds, n_seeds);
}
