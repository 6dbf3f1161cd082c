#include "gray_solarize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t rng_next(rng_t *rng) {
    rng->state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = rng->state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

float rng_f32(rng_t *rng) {
    return (float)(rng_next(rng) >> 40) * (1.0f / 16777216.0f);
}

static const float W0 = 0.2989f, W1 = 0.5870f, W2 = 0.1140f;

void gray_u8(uint8_t *v, size_t n) {
    for (size_t i = 0; i + 3 <= n; i += 3) {
        float l = W0 * (float)v[i] + W1 * (float)v[i + 1] + W2 * (float)v[i + 2];
        l = roundf(l);
        l = l < 0.0f ? 0.0f : (l > 255.0f ? 255.0f : l);
        uint8_t g = (uint8_t)l;
        v[i] = v[i + 1] = v[i + 2] = g;
    }
}

void gray_f32(float *v, size_t n) {
    for (size_t i = 0; i + 3 <= n; i += 3) {
        float l = W0 * v[i] + W1 * v[i + 1] + W2 * v[i + 2];
        v[i] = v[i + 1] = v[i + 2] = l;
    }
}

void solarize_u8(uint8_t *v, size_t n, float t) {
    uint8_t table[256];
    for (int x = 0; x < 256; x++) table[x] = (float)x >= t ? (uint8_t)(255 - x) : (uint8_t)x;
    for (size_t i = 0; i < n; i++) v[i] = table[v[i]];
}

void solarize_f32(float *v, size_t n, float t) {
    for (size_t i = 0; i < n; i++)
        if (v[i] >= t) v[i] = 1.0f - v[i];
}

/* `a`, `b` and `c` joined into `err` (at most `err_len` bytes): the C library's stdio
 * would make the module import WASI, which a C plugin cannot. */
static void message(char *err, size_t err_len, const char *a, const char *b, const char *c) {
    if (err_len == 0) return;
    err[0] = 0;
    const char *parts[3] = {a, b, c};
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        for (const char *s = parts[i]; s && *s && n + 1 < err_len; s++) err[n++] = *s;
    err[n] = 0;
}

/* A small JSON reader: an object of number (or null) values, which is what the
 * configuration is. Anything else is an error, never a crash. */
typedef struct {
    const char *p, *end;
} reader_t;

static void skip_ws(reader_t *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static bool eat(reader_t *r, char c) {
    skip_ws(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return true;
    }
    return false;
}

/* A key without escapes into `key` (at most `cap` - 1 bytes). */
static bool read_key(reader_t *r, char *key, size_t cap) {
    if (!eat(r, '"')) return false;
    size_t n = 0;
    while (r->p < r->end && *r->p != '"') {
        if (*r->p == '\\' || n + 1 >= cap) return false;
        key[n++] = *r->p++;
    }
    key[n] = 0;
    return eat(r, '"');
}

/* A number, or null (`*is_null`). */
static bool read_number(reader_t *r, double *out, bool *is_null) {
    skip_ws(r);
    *is_null = false;
    if (r->end - r->p >= 4 && memcmp(r->p, "null", 4) == 0) {
        r->p += 4;
        *is_null = true;
        return true;
    }
    char buf[64];
    size_t n = 0;
    while (r->p < r->end && n + 1 < sizeof buf && strchr("+-0123456789.eE", *r->p))
        buf[n++] = *r->p++;
    buf[n] = 0;
    if (n == 0) return false;
    char *stop;
    *out = strtod(buf, &stop);
    return *stop == 0;
}

bool config_parse(const char *json, size_t len, config_t *out, char *err, size_t err_len) {
    out->p_gray = 0.2f;
    out->p_solarize = 0.2f;
    out->has_threshold = false;
    out->threshold = 0.0f;
    reader_t r = {json, json + len};
    skip_ws(&r);
    if (r.p == r.end) return true;
    if (!eat(&r, '{')) {
        message(err, err_len, "the configuration must be a JSON object", NULL, NULL);
        return false;
    }
    if (eat(&r, '}')) return true;
    do {
        char key[64];
        double value;
        bool is_null;
        if (!read_key(&r, key, sizeof key) || !eat(&r, ':')) {
            message(err, err_len, "the configuration is not a JSON object of numbers", NULL, NULL);
            return false;
        }
        if (strcmp(key, "p_gray") && strcmp(key, "p_solarize") && strcmp(key, "threshold")) {
            message(err, err_len, "unknown key \"", key,
                    "\" (known: [\"p_gray\", \"p_solarize\", \"threshold\"])");
            return false;
        }
        if (!read_number(&r, &value, &is_null)) {
            message(err, err_len, key, " must be a number", NULL);
            return false;
        }
        if (!strcmp(key, "threshold")) {
            out->has_threshold = !is_null;
            out->threshold = (float)value;
        } else if (is_null) {
            message(err, err_len, key, " must be a number", NULL);
            return false;
        } else if (!strcmp(key, "p_gray")) {
            out->p_gray = (float)value;
        } else {
            out->p_solarize = (float)value;
        }
    } while (eat(&r, ','));
    if (!eat(&r, '}')) {
        message(err, err_len, "the configuration is not a JSON object of numbers", NULL, NULL);
        return false;
    }
    if (!(out->p_gray >= 0.0f && out->p_gray <= 1.0f)) {
        message(err, err_len, "p_gray must be in [0, 1]", NULL, NULL);
        return false;
    }
    if (!(out->p_solarize >= 0.0f && out->p_solarize <= 1.0f)) {
        message(err, err_len, "p_solarize must be in [0, 1]", NULL, NULL);
        return false;
    }
    return true;
}
