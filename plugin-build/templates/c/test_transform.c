/* Native tests of the transform: cc -O2 -o test_transform test_transform.c transform.c && ./test_transform */
#include <stdio.h>
#include <string.h>

#include "transform.h"

static int passed, failed;
#define CHECK(c) ((c) ? passed++ : (failed++, fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #c)))

int main(void) {
    uint8_t v[4] = {0, 127, 128, 255};
    solarize(v, 4, 128);
    CHECK(v[0] == 0 && v[1] == 127 && v[2] == 127 && v[3] == 0);
    CHECK(uniform(0) == (float)(0xe220a8397b1dcdafULL >> 40) / 16777216.0f); /* SplitMix64 */
    config_t c;
    const char *error;
    CHECK(parse_config("{}", 2, &c, &error) && c.threshold == 128 && c.p == 1.0f);
    const char *ok = "{\"threshold\": 10, \"p\": 0.5}";
    CHECK(parse_config(ok, strlen(ok), &c, &error) && c.threshold == 10 && c.p == 0.5f);
    const char *bad = "{\"threshold\": 300}";
    CHECK(!parse_config(bad, strlen(bad), &c, &error));
    const char *unknown = "{\"q\": 1}";
    CHECK(!parse_config(unknown, strlen(unknown), &c, &error) && strstr(error, "unknown key"));
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
