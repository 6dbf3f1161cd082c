/* Native tests of the transform: `cc -O2 -ffp-contract=off test_gray_solarize.c
 * gray_solarize.c -lm -o test && ./test`. */
#include <stdio.h>
#include <string.h>

#include "gray_solarize.h"

static int failed = 0, passed = 0;
#define CHECK(cond)                                                  \
    do {                                                             \
        if (cond) {                                                  \
            passed++;                                                \
        } else {                                                     \
            failed++;                                                \
            fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                            \
    } while (0)

int main(void) {
    rng_t rng = {0};
    CHECK(rng_next(&rng) == 0xe220a8397b1dcdafULL); /* SplitMix64, as sluice_sdk::Rng */

    uint8_t px[6] = {255, 0, 0, 10, 20, 30};
    gray_u8(px, 6);
    solarize_u8(px, 6, 128.0f);
    const uint8_t want[6] = {76, 76, 76, 18, 18, 18};
    CHECK(memcmp(px, want, 6) == 0);

    config_t c;
    char err[256];
    CHECK(config_parse("{}", 2, &c, err, sizeof err) && c.p_gray == 0.2f && !c.has_threshold);
    const char *ok = "{\"p_gray\": 1, \"threshold\": 100}";
    CHECK(config_parse(ok, strlen(ok), &c, err, sizeof err) && c.p_gray == 1.0f && c.threshold == 100.0f);
    const char *bad = "{\"p_gray\": 2}";
    CHECK(!config_parse(bad, strlen(bad), &c, err, sizeof err) && strstr(err, "p_gray"));
    const char *unknown = "{\"q\": 1}";
    CHECK(!config_parse(unknown, strlen(unknown), &c, err, sizeof err) && strstr(err, "unknown key"));

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
