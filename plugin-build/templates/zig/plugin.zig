//! {{name}}: a Sluice plugin in Zig (the `map-transform` world of wit/sluice.wit). The world's
//! C bindings (wit-bindgen's C generator) are compiled beside this file and call the
//! functions it exports; `sluice plugin build` passes them as the module `c` (`zig
//! translate-c`). Arguments are owned by the callee; what is returned is freed by the
//! bindings (with the C library's `free`) once the host has read it, so it is `malloc`ed.
//!
//! With probability `p` (default 1) every value of the u8 `image` at or above `threshold`
//! (default 128) becomes 255 - x. Randomness comes only from the seed of each element.
const std = @import("std");
const t = @import("transform.zig");
const c = @import("c");

const Instance = struct { config: t.Config };

fn dup(out: *c.map_transform_string_t, s: []const u8) void {
    c.map_transform_string_dup_n(out, s.ptr, s.len);
}

fn imageFeature() c.sluice_plugin_types_list_feature_t {
    const f: *c.sluice_plugin_types_feature_t = @ptrCast(@alignCast(c.malloc(@sizeOf(c.sluice_plugin_types_feature_t))));
    dup(&f.name, "image");
    f.dtype.is_some = false;
    f.rank.is_some = true;
    f.rank.val = 3;
    return .{ .ptr = f, .len = 1 };
}

export fn exports_map_transform_info(ret: *c.map_transform_plugin_info_t) void {
    dup(&ret.name, "{{name}}");
    dup(&ret.version, "0.1.0");
    ret.kind = c.SLUICE_PLUGIN_TYPES_KIND_MAP;
    dup(&ret.description, "solarizes `image` (u8) with probability p");
    ret.inputs = imageFeature();
    ret.outputs = imageFeature();
}

fn fail(err: *c.exports_sluice_plugin_map_element_error_t, tag: u8, message: []const u8) bool {
    err.tag = tag;
    dup(&err.val.invalid_input, message); // every case holds a string at the same place
    return false;
}

export fn exports_sluice_plugin_map_element_static_instance_create(
    config: *c.map_transform_string_t,
    ret: *c.exports_sluice_plugin_map_element_own_instance_t,
    err: *c.exports_sluice_plugin_map_element_error_t,
) bool {
    defer c.map_transform_string_free(config);
    var message: []const u8 = "";
    const parsed = t.parseConfig(std.heap.c_allocator, config.ptr[0..config.len], &message) catch
        return fail(err, c.SLUICE_PLUGIN_TYPES_ERROR_INVALID_CONFIG, message);
    const rep: *Instance = @ptrCast(@alignCast(c.malloc(@sizeOf(Instance)) orelse
        return fail(err, c.SLUICE_PLUGIN_TYPES_ERROR_PLUGIN_ERROR, "out of memory")));
    rep.* = .{ .config = parsed };
    ret.* = c.exports_sluice_plugin_map_element_instance_new(@ptrCast(rep));
    return true;
}

export fn exports_sluice_plugin_map_element_instance_destructor(rep: ?*c.exports_sluice_plugin_map_element_instance_t) void {
    c.free(rep);
}

export fn exports_sluice_plugin_map_element_method_instance_map(
    self: c.exports_sluice_plugin_map_element_borrow_instance_t,
    element: *c.exports_sluice_plugin_map_element_element_t,
    seed: u64,
    ret: *c.exports_sluice_plugin_map_element_element_t,
    err: *c.exports_sluice_plugin_map_element_error_t,
) bool {
    const me: *Instance = @ptrCast(@alignCast(self));
    ret.ptr = null;
    ret.len = 0;
    if (t.uniform(seed) >= me.config.p) { // the element unchanged
        c.sluice_plugin_types_element_free(element);
        return true;
    }
    const tensors = element.ptr[0..element.len];
    var at: ?usize = null;
    for (tensors, 0..) |tensor, i| {
        if (std.mem.eql(u8, tensor.name.ptr[0..tensor.name.len], "image")) at = i;
    }
    const index = at orelse {
        c.sluice_plugin_types_element_free(element);
        return fail(err, c.SLUICE_PLUGIN_TYPES_ERROR_INVALID_INPUT, "no `image` feature");
    };
    const image = tensors[index];
    if (image.data.tag != c.SLUICE_PLUGIN_TYPES_TENSOR_DATA_U8) {
        c.sluice_plugin_types_element_free(element);
        return fail(err, c.SLUICE_PLUGIN_TYPES_ERROR_INVALID_INPUT, "`image` must be u8");
    }
    t.solarize(image.data.val.u8.ptr[0..image.data.val.u8.len], me.config.threshold);
    // The image moves to the output; the other features are freed.
    for (tensors, 0..) |*tensor, i| {
        if (i != index) c.sluice_plugin_types_tensor_free(tensor);
    }
    c.free(element.ptr);
    const out: *c.sluice_plugin_types_tensor_t = @ptrCast(@alignCast(c.malloc(@sizeOf(c.sluice_plugin_types_tensor_t))));
    out.* = image;
    ret.ptr = out;
    ret.len = 1;
    return true;
}
