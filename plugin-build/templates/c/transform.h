/* {{name}}: the transform itself, without bindings (tested natively by test_transform.c). */
#ifndef TRANSFORM_H
#define TRANSFORM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SplitMix64, the generator of Sluice's SDKs: uniform in [0, 1) from 24 random bits. */
float uniform(uint64_t seed);
/* Values at or above `threshold` inverted: 255 - x. */
void solarize(uint8_t *values, size_t n, uint8_t threshold);

typedef struct {
    uint8_t threshold; /* default 128 */
    float p;           /* default 1 */
} config_t;

/* Parses the JSON object `json` (`len` bytes); on failure returns false with `*error` set. */
bool parse_config(const char *json, size_t len, config_t *out, const char **error);
#endif
