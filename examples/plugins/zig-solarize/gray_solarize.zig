//! `gray_solarize` in Zig: the same transform as the Rust example (examples/plugins/solarize),
//! the same bits for the same seed and configuration. Plain Zig (no bindings): plugin.zig
//! exports it through the C bindings of the world; `zig test gray_solarize.zig` tests it.
const std = @import("std");

/// The SDK's per-element generator (SplitMix64), as `sluice_sdk::Rng`.
pub const Rng = struct {
    state: u64,

    pub fn next(self: *Rng) u64 {
        self.state +%= 0x9e3779b97f4a7c15;
        var z = self.state;
        z = (z ^ (z >> 30)) *% 0xbf58476d1ce4e5b9;
        z = (z ^ (z >> 27)) *% 0x94d049bb133111eb;
        return z ^ (z >> 31);
    }

    /// Uniform in [0, 1): 24 random bits.
    pub fn float(self: *Rng) f32 {
        const bits: u32 = @intCast(self.next() >> 40);
        return @as(f32, @floatFromInt(bits)) * (1.0 / 16777216.0);
    }
};

pub const Config = struct {
    p_gray: f32 = 0.2,
    p_solarize: f32 = 0.2,
    threshold: ?f32 = null,
};

pub const ConfigError = error{ NotJson, NotObject, UnknownKey, NotNumber, OutOfRange };

/// Parses the JSON configuration; on failure `message` says why.
pub fn parseConfig(allocator: std.mem.Allocator, json: []const u8, message: *[]const u8) ConfigError!Config {
    var config = Config{};
    if (std.mem.trim(u8, json, " \t\r\n").len == 0) return config;
    const parsed = std.json.parseFromSlice(std.json.Value, allocator, json, .{}) catch {
        message.* = "the configuration is not JSON";
        return error.NotJson;
    };
    defer parsed.deinit();
    if (parsed.value != .object) {
        message.* = "the configuration must be a JSON object";
        return error.NotObject;
    }
    var it = parsed.value.object.iterator();
    while (it.next()) |entry| {
        const key = entry.key_ptr.*;
        const value: ?f32 = switch (entry.value_ptr.*) {
            .integer => |i| @floatFromInt(i),
            .float => |f| @floatCast(f),
            .null => null,
            else => {
                message.* = "p_gray, p_solarize and threshold must be numbers";
                return error.NotNumber;
            },
        };
        if (std.mem.eql(u8, key, "threshold")) {
            config.threshold = value;
        } else if (std.mem.eql(u8, key, "p_gray") or std.mem.eql(u8, key, "p_solarize")) {
            const p = value orelse {
                message.* = "p_gray and p_solarize must be numbers";
                return error.NotNumber;
            };
            if (key[2] == 'g') config.p_gray = p else config.p_solarize = p;
        } else {
            message.* = "unknown key (known: [\"p_gray\", \"p_solarize\", \"threshold\"])";
            return error.UnknownKey;
        }
    }
    if (!(config.p_gray >= 0 and config.p_gray <= 1)) {
        message.* = "p_gray must be in [0, 1]";
        return error.OutOfRange;
    }
    if (!(config.p_solarize >= 0 and config.p_solarize <= 1)) {
        message.* = "p_solarize must be in [0, 1]";
        return error.OutOfRange;
    }
    return config;
}

const W0: f32 = 0.2989;
const W1: f32 = 0.5870;
const W2: f32 = 0.1140;

/// Each [.., 3] pixel becomes its luma (u8: rounded half away from zero).
pub fn grayU8(v: []u8) void {
    var i: usize = 0;
    while (i + 3 <= v.len) : (i += 3) {
        const r: f32 = @floatFromInt(v[i]);
        const g: f32 = @floatFromInt(v[i + 1]);
        const b: f32 = @floatFromInt(v[i + 2]);
        const l = std.math.clamp(@round(W0 * r + W1 * g + W2 * b), 0, 255);
        const y: u8 = @intFromFloat(l);
        v[i] = y;
        v[i + 1] = y;
        v[i + 2] = y;
    }
}

pub fn grayF32(v: []f32) void {
    var i: usize = 0;
    while (i + 3 <= v.len) : (i += 3) {
        const l = W0 * v[i] + W1 * v[i + 1] + W2 * v[i + 2];
        v[i] = l;
        v[i + 1] = l;
        v[i + 2] = l;
    }
}

/// Every value at or above `t` inverted: 255 - x.
pub fn solarizeU8(v: []u8, t: f32) void {
    var table: [256]u8 = undefined;
    for (&table, 0..) |*e, x| {
        const xf: f32 = @floatFromInt(x);
        e.* = if (xf >= t) @intCast(255 - x) else @intCast(x);
    }
    for (v) |*x| x.* = table[x.*];
}

pub fn solarizeF32(v: []f32, t: f32) void {
    for (v) |*x| {
        if (x.* >= t) x.* = 1.0 - x.*;
    }
}

test "the generator is the SDK's SplitMix64" {
    var rng = Rng{ .state = 0 };
    try std.testing.expectEqual(@as(u64, 0xe220a8397b1dcdaf), rng.next());
}

test "grayscale then solarize, by hand" {
    var px = [_]u8{ 255, 0, 0, 10, 20, 30 };
    grayU8(&px);
    solarizeU8(&px, 128);
    try std.testing.expectEqualSlices(u8, &[_]u8{ 76, 76, 76, 18, 18, 18 }, &px);
}

test "configurations" {
    var message: []const u8 = "";
    const a = std.testing.allocator;
    const c = try parseConfig(a, "{\"p_gray\": 1, \"threshold\": 100}", &message);
    try std.testing.expectEqual(@as(f32, 1), c.p_gray);
    try std.testing.expectEqual(@as(?f32, 100), c.threshold);
    try std.testing.expectError(error.OutOfRange, parseConfig(a, "{\"p_gray\": 2}", &message));
    try std.testing.expectError(error.UnknownKey, parseConfig(a, "{\"q\": 1}", &message));
}
