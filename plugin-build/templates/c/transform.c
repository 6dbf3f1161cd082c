#include "transform.h"

#include <stdlib.h>
#include <string.h>

float uniform(uint64_t seed) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (float)((z ^ (z >> 31)) >> 40) * (1.0f / 16777216.0f);
}

void solarize(uint8_t *values, size_t n, uint8_t threshold) {
    for (size_t i = 0; i < n; i++)
        if (values[i] >= threshold) values[i] = (uint8_t)(255 - values[i]);
}

/* A small reader of a flat JSON object of numbers: what the configuration is. (No stdio:
 * it would make the module import WASI, which a C plugin cannot.) */
static const char *skip(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

bool parse_config(const char *json, size_t len, config_t *out, const char **error) {
    const char *p = json, *end = json + len;
    out->threshold = 128;
    out->p = 1.0f;
    p = skip(p, end);
    if (p == end) return true;
    if (*p++ != '{') return *error = "the configuration must be a JSON object", false;
    p = skip(p, end);
    if (p < end && *p == '}') return true;
    for (;;) {
        char key[32], num[64];
        size_t k = 0, n = 0;
        p = skip(p, end);
        if (p >= end || *p++ != '"') return *error = "expected a key", false;
        while (p < end && *p != '"' && k + 1 < sizeof key) key[k++] = *p++;
        key[k] = 0;
        if (p >= end || *p++ != '"') return *error = "expected a key", false;
        p = skip(p, end);
        if (p >= end || *p++ != ':') return *error = "expected ':'", false;
        p = skip(p, end);
        while (p < end && n + 1 < sizeof num && strchr("+-0123456789.eE", *p)) num[n++] = *p++;
        num[n] = 0;
        char *stop;
        double v = strtod(num, &stop);
        if (n == 0 || *stop) return *error = "values must be numbers", false;
        if (!strcmp(key, "threshold")) {
            if (!(v >= 0 && v <= 255) || v != (double)(int)v)
                return *error = "threshold must be an integer from 0 to 255", false;
            out->threshold = (uint8_t)v;
        } else if (!strcmp(key, "p")) {
            if (!(v >= 0 && v <= 1)) return *error = "p must be in [0, 1]", false;
            out->p = (float)v;
        } else {
            return *error = "unknown key (known: threshold, p)", false;
        }
        p = skip(p, end);
        if (p < end && *p == ',') { p++; continue; }
        if (p < end && *p == '}') return true;
        return *error = "expected ',' or '}'", false;
    }
}
