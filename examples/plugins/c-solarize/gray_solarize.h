/* gray_solarize in C: the transform itself (no bindings), so it is tested natively
 * (test_gray_solarize.c) and compiled into the component with plugin.c. */
#ifndef GRAY_SOLARIZE_H
#define GRAY_SOLARIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The SDK's per-element generator (SplitMix64), as sluice_sdk::Rng. */
typedef struct {
    uint64_t state;
} rng_t;

uint64_t rng_next(rng_t *rng);
/* Uniform in [0, 1): 24 random bits. */
float rng_f32(rng_t *rng);

/* The configuration: p_gray (default 0.2), p_solarize (0.2), threshold (none: 128 for u8,
 * 0.5 for f32). */
typedef struct {
    float p_gray;
    float p_solarize;
    bool has_threshold;
    float threshold;
} config_t;

/* Parses the JSON object `json` (`len` bytes) into `out`. On failure returns false with a
 * message in `err` (`err_len` bytes). */
bool config_parse(const char *json, size_t len, config_t *out, char *err, size_t err_len);

/* In place, on `n` values of [H, W, 3] pixels: each pixel becomes its luma (weights 0.2989,
 * 0.5870, 0.1140; u8 rounded). */
void gray_u8(uint8_t *v, size_t n);
void gray_f32(float *v, size_t n);
/* Every value at or above `t` inverted: 255 - x, 1 - x. */
void solarize_u8(uint8_t *v, size_t n, float t);
void solarize_f32(float *v, size_t n, float t);

#endif
