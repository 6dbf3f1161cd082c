//! {{name}}: the transform itself, plain Zig (`zig test transform.zig`).
const std = @import("std");

/// SplitMix64, the generator of Sluice's SDKs: uniform in [0, 1) from 24 random bits.
pub fn uniform(seed: u64) f32 {
    var z = seed +% 0x9e3779b97f4a7c15;
    z = (z ^ (z >> 30)) *% 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) *% 0x94d049bb133111eb;
    const bits: u32 = @intCast((z ^ (z >> 31)) >> 40);
    return @as(f32, @floatFromInt(bits)) * (1.0 / 16777216.0);
}

/// In place: values at or above `threshold` inverted.
pub fn solarize(values: []u8, threshold: u8) void {
    for (values) |*v| {
        if (v.* >= threshold) v.* = 255 - v.*;
    }
}

pub const Config = struct { threshold: u8 = 128, p: f32 = 1.0 };

/// Parses the JSON configuration; on failure `message` says why.
pub fn parseConfig(allocator: std.mem.Allocator, json: []const u8, message: *[]const u8) !Config {
    var config = Config{};
    if (std.mem.trim(u8, json, " \t\r\n").len == 0) return config;
    const parsed = std.json.parseFromSlice(std.json.Value, allocator, json, .{}) catch {
        message.* = "the configuration is not JSON";
        return error.Invalid;
    };
    defer parsed.deinit();
    if (parsed.value != .object) {
        message.* = "the configuration must be a JSON object";
        return error.Invalid;
    }
    var it = parsed.value.object.iterator();
    while (it.next()) |entry| {
        const key = entry.key_ptr.*;
        const value = entry.value_ptr.*;
        if (std.mem.eql(u8, key, "threshold")) {
            if (value != .integer or value.integer < 0 or value.integer > 255) {
                message.* = "threshold must be an integer from 0 to 255";
                return error.Invalid;
            }
            config.threshold = @intCast(value.integer);
        } else if (std.mem.eql(u8, key, "p")) {
            const p: f64 = switch (value) {
                .integer => |i| @floatFromInt(i),
                .float => |f| f,
                else => -1,
            };
            if (!(p >= 0 and p <= 1)) {
                message.* = "p must be in [0, 1]";
                return error.Invalid;
            }
            config.p = @floatCast(p);
        } else {
            message.* = "unknown key (known: threshold, p)";
            return error.Invalid;
        }
    }
    return config;
}

test "solarizes at and above the threshold" {
    var v = [_]u8{ 0, 127, 128, 255 };
    solarize(&v, 128);
    try std.testing.expectEqualSlices(u8, &[_]u8{ 0, 127, 127, 0 }, &v);
}

test "the generator is the SDK's SplitMix64" {
    const want: f32 = @as(f32, @floatFromInt(@as(u32, @intCast(@as(u64, 0xe220a8397b1dcdaf) >> 40)))) / 16777216.0;
    try std.testing.expectEqual(want, uniform(0));
}

test "configurations" {
    var message: []const u8 = "";
    const a = std.testing.allocator;
    const c = try parseConfig(a, "{\"threshold\": 10, \"p\": 0.5}", &message);
    try std.testing.expectEqual(@as(u8, 10), c.threshold);
    try std.testing.expectError(error.Invalid, parseConfig(a, "{\"threshold\": 300}", &message));
    try std.testing.expectError(error.Invalid, parseConfig(a, "{\"q\": 1}", &message));
}
