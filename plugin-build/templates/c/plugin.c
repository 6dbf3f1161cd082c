/* {{name}}: a Sluice plugin in C, the `map-transform` world of wit/sluice.wit, through the
 * bindings wit-bindgen's C generator writes (map_transform.h: `sluice plugin build`
 * generates them into build/bindings/). Arguments are owned by the callee; what is
 * returned is freed by the bindings once the host has read it (so strings are copies).
 *
 * With probability `p` (default 1) every value of the u8 `image` at or above `threshold`
 * (default 128) becomes 255 - x. Randomness comes only from the seed of each element. */
#include <stdlib.h>
#include <string.h>

#include "map_transform.h"
#include "transform.h"

struct exports_sluice_plugin_map_element_instance_t {
    config_t config;
};

static sluice_plugin_types_list_feature_t image_feature(void) {
    sluice_plugin_types_list_feature_t list = {malloc(sizeof(sluice_plugin_types_feature_t)), 1};
    map_transform_string_dup(&list.ptr[0].name, "image");
    list.ptr[0].dtype.is_some = false;
    list.ptr[0].rank.is_some = true;
    list.ptr[0].rank.val = 3;
    return list;
}

void exports_map_transform_info(map_transform_plugin_info_t *ret) {
    map_transform_string_dup(&ret->name, "{{name}}");
    map_transform_string_dup(&ret->version, "0.1.0");
    ret->kind = SLUICE_PLUGIN_TYPES_KIND_MAP;
    map_transform_string_dup(&ret->description, "solarizes `image` (u8) with probability p");
    ret->inputs = image_feature();
    ret->outputs = image_feature();
}

bool exports_sluice_plugin_map_element_static_instance_create(
    map_transform_string_t *config, exports_sluice_plugin_map_element_own_instance_t *ret,
    exports_sluice_plugin_map_element_error_t *err) {
    config_t parsed;
    const char *error = NULL;
    bool ok = parse_config((const char *)config->ptr, config->len, &parsed, &error);
    map_transform_string_free(config);
    if (!ok) {
        err->tag = SLUICE_PLUGIN_TYPES_ERROR_INVALID_CONFIG;
        map_transform_string_dup(&err->val.invalid_config, error);
        return false;
    }
    exports_sluice_plugin_map_element_instance_t *rep = malloc(sizeof *rep);
    rep->config = parsed;
    *ret = exports_sluice_plugin_map_element_instance_new(rep);
    return true;
}

void exports_sluice_plugin_map_element_instance_destructor(
    exports_sluice_plugin_map_element_instance_t *rep) {
    free(rep);
}

bool exports_sluice_plugin_map_element_method_instance_map(
    exports_sluice_plugin_map_element_borrow_instance_t self,
    exports_sluice_plugin_map_element_element_t *element, uint64_t seed,
    exports_sluice_plugin_map_element_element_t *ret,
    exports_sluice_plugin_map_element_error_t *err) {
    ret->ptr = NULL;
    ret->len = 0;
    if (uniform(seed) >= self->config.p) { /* the element unchanged */
        sluice_plugin_types_element_free(element);
        return true;
    }
    size_t at = element->len;
    for (size_t i = 0; i < element->len; i++)
        if (element->ptr[i].name.len == 5 && !memcmp(element->ptr[i].name.ptr, "image", 5)) at = i;
    const char *problem = at == element->len ? "no `image` feature"
                          : element->ptr[at].data.tag != SLUICE_PLUGIN_TYPES_TENSOR_DATA_U8
                              ? "`image` must be u8"
                              : NULL;
    if (problem) {
        sluice_plugin_types_element_free(element);
        err->tag = SLUICE_PLUGIN_TYPES_ERROR_INVALID_INPUT;
        map_transform_string_dup(&err->val.invalid_input, problem);
        return false;
    }
    sluice_plugin_types_tensor_t image = element->ptr[at];
    solarize(image.data.val.u8.ptr, image.data.val.u8.len, self->config.threshold);
    /* The image moves to the output; the other features are freed. */
    for (size_t i = 0; i < element->len; i++)
        if (i != at) sluice_plugin_types_tensor_free(&element->ptr[i]);
    free(element->ptr);
    ret->ptr = malloc(sizeof image);
    ret->ptr[0] = image;
    ret->len = 1;
    return true;
}
