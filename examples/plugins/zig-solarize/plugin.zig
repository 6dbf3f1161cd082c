//! `gray_solarize` as a component of the `map-transform` world: the exports that the C
//! bindings of the world (wit-bindgen's C generator, compiled by Zig beside this file)
//! call. Arguments are owned by the callee; what is returned is freed by the bindings
//! (with the C library's `free`) after the host has read it, so it is `malloc`ed.
const std = @import("std");
const gs = @import("gray_solarize.zig");
// The C bindings and the C library, as `zig translate-c` makes them (`sluice plugin
// build` passes the module `c`).
const c = @import("c");

const Instance = struct { config: gs.Config };

fn dup(out: *c.map_transform_string_t, s: []const u8) void {
    c.map_transform_string_dup_n(out, s.ptr, s.len);
}

fn imageFeature() c.sluice_plugin_types_feature_t {
    var f: c.sluice_plugin_types_feature_t = undefined;
    dup(&f.name, "image");
    f.dtype.is_some = false;
    f.rank.is_some = true;
    f.rank.val = 3;
    return f;
}

fn features() c.sluice_plugin_types_list_feature_t {
    const ptr: [*c]c.sluice_plugin_types_feature_t = @ptrCast(@alignCast(c.malloc(@sizeOf(c.sluice_plugin_types_feature_t))));
    ptr[0] = imageFeature();
    return .{ .ptr = ptr, .len = 1 };
}

export fn exports_map_transform_info(ret: *c.map_transform_plugin_info_t) void {
    dup(&ret.name, "gray_solarize");
    dup(&ret.version, "0.1.0");
    ret.kind = c.SLUICE_PLUGIN_TYPES_KIND_MAP;
    dup(&ret.description, "random grayscale and solarize of `image` ([H, W, C], u8 or f32)");
    ret.inputs = features();
    ret.outputs = features();
}

fn fail(err: *c.exports_sluice_plugin_map_element_error_t, tag: u8, message: []const u8) bool {
    err.tag = tag;
    // Every case of the variant holds a string at the same place.
    dup(&err.val.invalid_input, message);
    return false;
}

export fn exports_sluice_plugin_map_element_static_instance_create(
    config: *c.map_transform_string_t,
    ret: *c.exports_sluice_plugin_map_element_own_instance_t,
    err: *c.exports_sluice_plugin_map_element_error_t,
) bool {
    defer c.map_transform_string_free(config);
    var message: []const u8 = "";
    const text = config.ptr[0..config.len];
    const parsed = gs.parseConfig(std.heap.c_allocator, text, &message) catch
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
    const config = me.config;
    var rng = gs.Rng{ .state = seed };
    // Both draws always happen, so each element uses its generator the same way.
    const gray = rng.float() < config.p_gray;
    const solarize = rng.float() < config.p_solarize;
    ret.ptr = null;
    ret.len = 0;
    const tensors = element.ptr[0..element.len];
    var at: ?usize = null;
    for (tensors, 0..) |t, i| {
        if (std.mem.eql(u8, t.name.ptr[0..t.name.len], "image")) at = i;
    }
    const index = at orelse {
        c.sluice_plugin_types_element_free(element);
        return fail(err, c.SLUICE_PLUGIN_TYPES_ERROR_INVALID_INPUT, "no `image` feature");
    };
    const image = &tensors[index];
    const shape = image.shape.ptr[0..image.shape.len];
    const channels: u64 = if (shape.len > 0) shape[shape.len - 1] else 0;
    if (gray and channels != 1 and channels != 3) {
        c.sluice_plugin_types_element_free(element);
        return fail(err, c.SLUICE_PLUGIN_TYPES_ERROR_INVALID_INPUT, "grayscale needs 1 or 3 channels");
    }
    switch (image.data.tag) {
        c.SLUICE_PLUGIN_TYPES_TENSOR_DATA_U8 => {
            const v = image.data.val.u8.ptr[0..image.data.val.u8.len];
            if (gray and channels == 3) gs.grayU8(v);
            if (solarize) gs.solarizeU8(v, config.threshold orelse 128.0);
        },
        c.SLUICE_PLUGIN_TYPES_TENSOR_DATA_F32 => {
            const v = image.data.val.f32.ptr[0..image.data.val.f32.len];
            if (gray and channels == 3) gs.grayF32(v);
            if (solarize) gs.solarizeF32(v, config.threshold orelse 0.5);
        },
        else => {
            c.sluice_plugin_types_element_free(element);
            return fail(err, c.SLUICE_PLUGIN_TYPES_ERROR_INVALID_INPUT, "`image` must be u8 or f32");
        },
    }
    if (!(gray or solarize)) {
        c.sluice_plugin_types_element_free(element);
        return true;
    }
    // The image moves to the output; the other features are freed.
    const out: [*c]c.sluice_plugin_types_tensor_t = @ptrCast(@alignCast(c.malloc(@sizeOf(c.sluice_plugin_types_tensor_t))));
    out[0] = image.*;
    for (tensors, 0..) |*t, i| {
        if (i != index) c.sluice_plugin_types_tensor_free(t);
    }
    c.free(element.ptr);
    ret.ptr = out;
    ret.len = 1;
    return true;
}
