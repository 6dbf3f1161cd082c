//! Tests of `sluice_image::color`: TensorFlow reference vectors, hand-computed
//! values, errors, and properties.
//!
//! # Reference vectors
//!
//! Every `const` in the `tf` module below was produced by TensorFlow 2.21 (CPU, eager) with
//! this exact Python (numpy 2), whose output was pasted in unchanged (`print` lines):
//!
//! ```python
//! import numpy as np, tensorflow as tf
//! F = np.array([[[0.1, 0.5, 0.9], [0.8, 0.2, 0.3], [0.4, 0.4, 0.4]],
//!               [[1.0, 0.0, 0.5], [0.25, 0.75, 0.6], [0.9, 0.85, 0.05]]], np.float32)
//! U = np.array([[[12, 130, 250], [200, 40, 77], [99, 99, 99]],
//!               [[255, 0, 128], [64, 191, 153], [230, 217, 13]]], np.uint8)
//! k = (np.arange(9 * 7 * 3) * 37 + 11) % 256
//! BIG_F = (k.astype(np.float32) / np.float32(255)).reshape(9, 7, 3)
//! BIG_U = k.astype(np.uint8).reshape(9, 7, 3)
//! ti = tf.image
//! cases = [
//!     ("BRIGHTNESS_F32_M015", ti.adjust_brightness(F, -0.15)),
//!     ("BRIGHTNESS_U8_P02", ti.adjust_brightness(U, 0.2)),
//!     ("BRIGHTNESS_U8_M03", ti.adjust_brightness(U, -0.3)),
//!     ("CONTRAST_F32_18", ti.adjust_contrast(F, 1.8)),
//!     ("CONTRAST_U8_18", ti.adjust_contrast(U, 1.8)),
//!     ("CONTRAST_U8_03", ti.adjust_contrast(U, 0.3)),
//!     ("SATURATION_F32_04", ti.adjust_saturation(F, 0.4)),
//!     ("SATURATION_F32_25", ti.adjust_saturation(F, 2.5)),
//!     ("SATURATION_U8_04", ti.adjust_saturation(U, 0.4)),
//!     ("SATURATION_U8_25", ti.adjust_saturation(U, 2.5)),
//!     ("HUE_F32_02", ti.adjust_hue(F, 0.2)),
//!     ("HUE_F32_M07", ti.adjust_hue(F, -0.7)),
//!     ("HUE_U8_02", ti.adjust_hue(U, 0.2)),
//!     ("HUE_U8_M07", ti.adjust_hue(U, -0.7)),
//!     ("TO_UNIT_F32", ti.convert_image_dtype(U, tf.float32)),
//!     ("FROM_UNIT_F32", ti.convert_image_dtype(
//!         np.array([[[-0.1, 0.0, 0.001], [0.5, 0.998, 0.999]], [[1.0, 1.2, 0.25], [0.0019, 0.0020, 0.7]]], np.float32),
//!         tf.uint8, saturate=True)),
//!     ("BIG_CONTRAST_F32_18", ti.adjust_contrast(BIG_F, 1.8)),
//!     ("BIG_SATURATION_F32_25", ti.adjust_saturation(BIG_F, 2.5)),
//!     ("BIG_HUE_F32_037", ti.adjust_hue(BIG_F, 0.37)),
//!     ("BIG_CONTRAST_U8_05", ti.adjust_contrast(BIG_U, 0.5)),
//!     ("BIG_SATURATION_U8_17", ti.adjust_saturation(BIG_U, 1.7)),
//!     ("BIG_HUE_U8_M03", ti.adjust_hue(BIG_U, -0.3)),
//! ]
//! for name, t in cases:
//!     a = t.numpy()
//!     assert a.shape[-1] == 3 or name.startswith("FROM")
//!     if a.dtype == np.uint8:
//!         body = ", ".join(str(int(x)) for x in a.ravel())
//!         print(f"const {name}: [u8; {a.size}] = [{body}];")
//!     else:
//!         body = ", ".join(str(np.float32(x)) for x in a.ravel())
//!         print(f"const {name}: [f32; {a.size}] = [{body}];")
//! ```
//!
//! `F`/`U` are [`F_IMAGE`]/[`U_IMAGE`] here and `BIG_F`/`BIG_U` are [`big_f32`]/[`big_u8`].

use proptest::prelude::*;
use rand::Rng;
use rand::SeedableRng;
use sluice_image::color::{
    adjust_brightness, adjust_brightness_contrast, adjust_contrast, adjust_hue, adjust_saturation,
    cast, denormalize, from_unit_f32, normalize, random_brightness, random_contrast, random_hue,
    random_saturation, to_unit_f32,
};
use sluice_tensor::{DType, Tensor, TensorData};

/// The RNG `sluice_core::rng::rng_from_seed` gives (PCG-64 MCG from a `u64` seed).
fn rng_from_seed(seed: u64) -> rand_pcg::Pcg64Mcg {
    rand_pcg::Pcg64Mcg::seed_from_u64(seed)
}

#[allow(clippy::approx_constant, clippy::excessive_precision)]
mod tf {
    pub(crate) const BRIGHTNESS_F32_M015: [f32; 18] = [
        -0.050000004,
        0.35,
        0.75,
        0.65,
        0.049999997,
        0.15,
        0.25,
        0.25,
        0.25,
        0.85,
        -0.15,
        0.35,
        0.099999994,
        0.6,
        0.45000002,
        0.75,
        0.70000005,
        -0.10000001,
    ];
    pub(crate) const BRIGHTNESS_U8_P02: [u8; 18] = [
        63, 181, 255, 251, 91, 128, 150, 150, 150, 255, 51, 179, 115, 242, 204, 255, 255, 64,
    ];
    pub(crate) const BRIGHTNESS_U8_M03: [u8; 18] = [
        0, 53, 173, 123, 0, 0, 22, 22, 22, 178, 0, 51, 0, 114, 76, 153, 140, 0,
    ];
    pub(crate) const CONTRAST_F32_18: [f32; 18] = [
        -0.28000003,
        0.53999996,
        1.2533332,
        0.97999996,
        2.9802322e-08,
        0.17333335,
        0.26,
        0.36,
        0.35333335,
        1.3399999,
        -0.35999998,
        0.5333333,
        -0.01000005,
        0.99,
        0.71333337,
        1.1599998,
        1.17,
        -0.2766666,
    ];
    pub(crate) const CONTRAST_U8_18: [u8; 18] = [
        0, 144, 255, 245, 0, 42, 63, 88, 82, 255, 0, 134, 0, 254, 179, 255, 255, 0,
    ];
    pub(crate) const CONTRAST_U8_03: [u8; 18] = [
        104, 118, 159, 160, 91, 107, 130, 108, 113, 177, 79, 122, 119, 136, 130, 169, 144, 88,
    ];
    pub(crate) const SATURATION_F32_04: [f32; 18] = [
        0.58000004, 0.74, 0.9, 0.8, 0.56, 0.6000001, 0.4, 0.4, 0.4, 1.0, 0.6, 0.8, 0.54999995,
        0.75, 0.68999994, 0.9, 0.88, 0.55999994,
    ];
    pub(crate) const SATURATION_F32_25: [f32; 18] = [
        0.0, 0.45, 0.9, 0.8, 0.0, 0.1333336, 0.4, 0.4, 0.4, 1.0, 0.0, 0.5, 0.0, 0.75, 0.52500004,
        0.9, 0.84705883, 0.0,
    ];
    pub(crate) const SATURATION_U8_04: [u8; 18] = [
        155, 202, 250, 200, 136, 151, 99, 99, 99, 255, 153, 204, 140, 191, 176, 230, 225, 143,
    ];
    pub(crate) const SATURATION_U8_25: [u8; 18] = [
        0, 124, 250, 200, 0, 46, 99, 99, 99, 255, 0, 128, 0, 191, 134, 230, 216, 0,
    ];
    pub(crate) const HUE_F32_02: [f32; 18] = [
        0.65999985, 0.1, 0.9, 0.77999973, 0.8, 0.2, 0.4, 0.4, 0.4, 1.0, 0.6999998, 0.0, 0.25,
        0.29999995, 0.75, 0.05, 0.9, 0.1700002,
    ];
    pub(crate) const HUE_F32_M07: [f32; 18] = [
        0.9, 0.1, 0.65999985, 0.4199998, 0.8, 0.2, 0.4, 0.4, 0.4, 0.6999998, 1.0, 0.0, 0.5, 0.25,
        0.75, 0.05, 0.9, 0.6800001,
    ];
    pub(crate) const HUE_U8_02: [u8; 18] = [
        179, 12, 250, 200, 195, 40, 99, 99, 99, 255, 178, 0, 64, 76, 191, 13, 230, 43,
    ];
    pub(crate) const HUE_U8_M07: [u8; 18] = [
        250, 12, 177, 109, 200, 40, 99, 99, 99, 179, 255, 0, 127, 64, 191, 13, 230, 173,
    ];
    pub(crate) const TO_UNIT_F32: [f32; 18] = [
        0.04705883,
        0.50980395,
        0.9803922,
        0.7843138,
        0.15686275,
        0.3019608,
        0.38823533,
        0.38823533,
        0.38823533,
        1.0,
        0.0,
        0.5019608,
        0.2509804,
        0.7490196,
        0.6,
        0.90196085,
        0.85098046,
        0.050980397,
    ];
    pub(crate) const FROM_UNIT_F32: [u8; 12] = [0, 0, 0, 127, 254, 255, 255, 255, 63, 0, 0, 178];
    pub(crate) const BIG_CONTRAST_F32_18: [f32; 189] = [
        -0.32412082,
        -0.051540643,
        0.20829129,
        0.4594086,
        0.7319888,
        0.9918207,
        1.242938,
        -0.29154065,
        -0.031708688,
        0.21940863,
        0.49198875,
        0.7518207,
        1.002938,
        1.2755182,
        -0.2717087,
        -0.020591438,
        0.25198877,
        0.51182073,
        0.762938,
        1.0355182,
        1.2953501,
        -0.2605914,
        0.011988789,
        0.2718207,
        0.5229381,
        0.79551816,
        1.0553501,
        1.3064674,
        -0.22801122,
        0.031820714,
        0.28293803,
        0.5555182,
        0.8153501,
        1.0664674,
        1.3390476,
        -0.20817932,
        0.042937994,
        0.31551817,
        0.57535017,
        0.82646745,
        1.0990475,
        1.3588794,
        -0.19706196,
        0.07551819,
        0.3353501,
        0.58646744,
        0.8590476,
        1.1188796,
        1.3699968,
        -0.16448179,
        0.09535012,
        0.34646744,
        0.61904764,
        0.87887955,
        1.1299968,
        1.4025769,
        -0.14464983,
        0.106467456,
        0.37904757,
        0.63887954,
        0.8899969,
        1.162577,
        -0.3846499,
        -0.13353258,
        0.1390476,
        0.39887953,
        0.6499969,
        0.922577,
        1.1824089,
        -0.37353253,
        -0.10095236,
        0.15887952,
        0.40999684,
        0.682577,
        0.9424089,
        1.1935263,
        -0.34095243,
        -0.08112046,
        0.16999686,
        0.442577,
        0.70240897,
        0.95352626,
        1.2261064,
        -0.32112047,
        -0.07000315,
        0.202577,
        0.46240893,
        0.71352625,
        0.9861064,
        1.2459383,
        -0.31000316,
        -0.037422985,
        0.22240895,
        0.47352624,
        0.7461064,
        1.0059383,
        1.2570556,
        -0.277423,
        -0.01759103,
        0.23352626,
        0.5061064,
        0.7659384,
        1.0170557,
        1.2896358,
        -0.2575911,
        -0.0064737797,
        0.26610643,
        0.5259384,
        0.7770557,
        1.0496358,
        1.3094677,
        -0.24647373,
        0.026106447,
        0.28593835,
        0.53705573,
        0.8096359,
        1.0694678,
        1.320585,
        -0.21389362,
        0.045938343,
        0.29705566,
        0.56963587,
        0.8294678,
        1.080585,
        1.3531651,
        -0.19406167,
        0.057055682,
        0.3296358,
        0.58946776,
        0.8405851,
        1.1131653,
        1.3729972,
        -0.18294436,
        0.08963585,
        0.34946775,
        0.6005851,
        0.87316525,
        1.1329972,
        1.3841145,
        -0.15036413,
        0.109467775,
        0.3605851,
        0.63316524,
        0.89299715,
        1.1441145,
        -0.3903642,
        -0.13053223,
        0.120585114,
        0.39316523,
        0.6529972,
        0.9041145,
        1.1766946,
        -0.37053224,
        -0.119414926,
        0.15316525,
        0.41299716,
        0.66411453,
        0.9366946,
        1.1965265,
        -0.35941494,
        -0.08683476,
        0.17299718,
        0.4241145,
        0.6966947,
        0.9565266,
        1.2076439,
        -0.32683477,
        -0.0670028,
        0.18411452,
        0.45669463,
        0.7165266,
        0.9676439,
        1.240224,
        -0.3070028,
        -0.055885553,
        0.21669465,
        0.47652656,
        0.7276439,
        1.000224,
        1.260056,
        -0.2958855,
        -0.023305327,
        0.23652658,
        0.4876439,
        0.7602241,
        1.020056,
        1.2711732,
        -0.26330534,
        -0.003473401,
    ];
    pub(crate) const BIG_SATURATION_F32_25: [f32; 189] = [
        0.0,
        0.16666667,
        0.33333334,
        0.043137252,
        0.40588236,
        0.76862746,
        0.9137255,
        0.0,
        0.154374,
        0.0,
        0.31764692,
        0.63529414,
        0.76912886,
        0.9254902,
        0.0,
        0.0,
        0.2509804,
        0.5019608,
        0.2117647,
        0.5745098,
        0.9372549,
        0.0,
        0.18431364,
        0.36862746,
        0.07843137,
        0.44117647,
        0.8039216,
        0.9490196,
        0.0,
        0.16033694,
        0.0,
        0.33529413,
        0.67058825,
        0.79846007,
        0.9607843,
        0.0,
        0.0,
        0.26862746,
        0.5372549,
        0.24705887,
        0.6098039,
        0.972549,
        0.0,
        0.20196079,
        0.40392157,
        0.11372548,
        0.4764706,
        0.8392157,
        0.9843137,
        0.0,
        0.16629988,
        0.0,
        0.3529412,
        0.7058824,
        0.8277913,
        0.99607843,
        0.0,
        0.0,
        0.28627437,
        0.57254905,
        0.71698457,
        0.8627451,
        0.0,
        0.0,
        0.21960784,
        0.4392157,
        0.1490196,
        0.5117647,
        0.8745098,
        0.0,
        0.15294118,
        0.30588236,
        0.015686274,
        0.37843138,
        0.7411765,
        0.8862745,
        0.0,
        0.14973615,
        0.0,
        0.30392143,
        0.60784316,
        0.7463157,
        0.8980392,
        0.0,
        0.0,
        0.2372549,
        0.4745098,
        0.18431383,
        0.5470589,
        0.9098039,
        0.0,
        0.17058824,
        0.34117648,
        0.05098039,
        0.4137255,
        0.7764706,
        0.92156863,
        0.0,
        0.15569909,
        0.0,
        0.3215685,
        0.6431373,
        0.7756469,
        0.93333334,
        0.0,
        0.0,
        0.25490198,
        0.50980395,
        0.21960789,
        0.582353,
        0.94509804,
        0.0,
        0.18823521,
        0.3764706,
        0.086274564,
        0.44901964,
        0.8117647,
        0.95686275,
        0.0,
        0.16166204,
        0.0,
        0.3392157,
        0.6784314,
        0.80497813,
        0.96862745,
        0.0,
        0.0,
        0.2725489,
        0.54509807,
        0.254902,
        0.61764705,
        0.98039216,
        0.0,
        0.20588236,
        0.4117647,
        0.12156868,
        0.48431376,
        0.84705883,
        0.99215686,
        0.0,
        0.16762498,
        0.0,
        0.35686275,
        0.7137255,
        0.85882354,
        0.0,
        0.1450983,
        0.0,
        0.29019594,
        0.5803922,
        0.7235026,
        0.87058824,
        0.0,
        0.0,
        0.22352941,
        0.44705883,
        0.1568628,
        0.5196079,
        0.88235295,
        0.0,
        0.15686275,
        0.3137255,
        0.02352935,
        0.3862745,
        0.7490196,
        0.89411765,
        0.0,
        0.15106125,
        0.0,
        0.307843,
        0.6156863,
        0.7528338,
        0.90588236,
        0.0,
        0.0,
        0.24117647,
        0.48235294,
        0.19215685,
        0.55490196,
        0.91764706,
        0.0,
        0.17450981,
        0.34901962,
        0.058823526,
        0.42156863,
        0.78431374,
        0.92941177,
        0.0,
        0.15702419,
    ];
    pub(crate) const BIG_HUE_F32_037: [f32; 189] = [
        0.33333334,
        0.043137256,
        0.12439208,
        0.76862746,
        0.47843137,
        0.5596862,
        0.05490196,
        0.9137255,
        0.09874506,
        0.63529414,
        0.34509805,
        0.42635286,
        0.06666667,
        0.59145087,
        0.9254902,
        0.5019608,
        0.21176471,
        0.29301953,
        0.9372549,
        0.64705884,
        0.7283137,
        0.36862746,
        0.078431375,
        0.15968621,
        0.8039216,
        0.5137255,
        0.59498036,
        0.09019608,
        0.9490196,
        0.13403918,
        0.67058825,
        0.38039216,
        0.46164697,
        0.101960786,
        0.626745,
        0.9607843,
        0.5372549,
        0.24705882,
        0.32831365,
        0.972549,
        0.68235296,
        0.7636078,
        0.40392157,
        0.11372549,
        0.19498032,
        0.8392157,
        0.54901963,
        0.6302745,
        0.1254902,
        0.9843137,
        0.16933331,
        0.7058824,
        0.41568628,
        0.4969411,
        0.13725491,
        0.6620391,
        0.99607843,
        0.57254905,
        0.28235295,
        0.36360776,
        0.003921569,
        0.5287058,
        0.8627451,
        0.4392157,
        0.14901961,
        0.23027444,
        0.8745098,
        0.58431375,
        0.6655686,
        0.30588236,
        0.015686275,
        0.0969411,
        0.7411765,
        0.4509804,
        0.5322352,
        0.02745098,
        0.8862745,
        0.071294084,
        0.60784316,
        0.31764707,
        0.39890188,
        0.039215688,
        0.5639999,
        0.8980392,
        0.4745098,
        0.18431373,
        0.26556855,
        0.9098039,
        0.61960787,
        0.7008627,
        0.34117648,
        0.050980393,
        0.13223521,
        0.7764706,
        0.4862745,
        0.5675293,
        0.0627451,
        0.92156863,
        0.1065882,
        0.6431373,
        0.3529412,
        0.434196,
        0.07450981,
        0.599294,
        0.93333334,
        0.50980395,
        0.21960784,
        0.30086267,
        0.94509804,
        0.654902,
        0.7361568,
        0.3764706,
        0.08627451,
        0.16752934,
        0.8117647,
        0.52156866,
        0.6028235,
        0.09803922,
        0.95686275,
        0.14188232,
        0.6784314,
        0.3882353,
        0.4694901,
        0.10980392,
        0.6345881,
        0.96862745,
        0.54509807,
        0.25490198,
        0.3361568,
        0.98039216,
        0.6901961,
        0.77145094,
        0.4117647,
        0.12156863,
        0.20282346,
        0.84705883,
        0.5568628,
        0.6381176,
        0.13333334,
        0.99215686,
        0.17717645,
        0.7137255,
        0.42352942,
        0.5047842,
        0.0,
        0.85882354,
        0.0438431,
        0.5803922,
        0.2901961,
        0.3714509,
        0.011764706,
        0.5365489,
        0.87058824,
        0.44705883,
        0.15686275,
        0.23811758,
        0.88235295,
        0.5921569,
        0.6734117,
        0.3137255,
        0.023529412,
        0.104784235,
        0.7490196,
        0.45882353,
        0.54007834,
        0.03529412,
        0.89411765,
        0.07913722,
        0.6156863,
        0.3254902,
        0.40674502,
        0.047058824,
        0.571843,
        0.90588236,
        0.48235294,
        0.19215687,
        0.2734117,
        0.91764706,
        0.627451,
        0.70870584,
        0.34901962,
        0.05882353,
        0.14007835,
        0.78431374,
        0.49411765,
        0.57537246,
        0.07058824,
        0.92941177,
        0.11443134,
    ];
    pub(crate) const BIG_CONTRAST_U8_05: [u8; 189] = [
        69, 86, 105, 125, 141, 160, 180, 69, 88, 108, 124, 143, 163, 180, 71, 91, 107, 126, 146,
        163, 182, 74, 90, 109, 129, 146, 165, 185, 73, 92, 112, 129, 148, 168, 185, 75, 95, 112,
        131, 151, 168, 186, 78, 95, 114, 134, 151, 169, 189, 78, 97, 117, 133, 152, 172, 189, 80,
        100, 116, 135, 155, 172, 63, 83, 99, 118, 138, 155, 174, 66, 82, 101, 121, 138, 157, 177,
        65, 84, 104, 121, 140, 160, 177, 67, 87, 104, 123, 143, 160, 178, 70, 87, 106, 126, 142,
        161, 181, 70, 89, 109, 125, 144, 164, 181, 72, 92, 108, 127, 147, 164, 183, 75, 91, 110,
        130, 147, 166, 186, 74, 93, 113, 130, 149, 169, 186, 76, 96, 113, 132, 152, 169, 187, 79,
        96, 115, 135, 152, 170, 190, 79, 98, 118, 134, 153, 173, 62, 81, 101, 117, 136, 156, 173,
        64, 84, 100, 119, 139, 156, 175, 67, 83, 102, 122, 139, 158, 178, 66, 85, 105, 122, 141,
        161, 178, 68, 88, 105, 124, 144, 161, 179, 71, 88, 107, 127, 143, 162, 182, 71, 90,
    ];
    pub(crate) const BIG_SATURATION_U8_17: [u8; 189] = [
        0, 42, 85, 70, 133, 196, 233, 0, 39, 36, 99, 162, 196, 236, 0, 2, 65, 128, 113, 176, 239,
        0, 47, 94, 79, 142, 205, 242, 0, 40, 45, 108, 171, 204, 245, 0, 11, 74, 137, 122, 185, 248,
        0, 51, 103, 88, 151, 214, 251, 0, 42, 54, 117, 180, 211, 254, 0, 20, 83, 146, 183, 220, 0,
        0, 56, 112, 97, 160, 223, 0, 39, 78, 63, 126, 189, 226, 0, 38, 29, 92, 155, 190, 229, 0, 0,
        60, 121, 106, 169, 232, 0, 43, 87, 72, 135, 198, 235, 0, 39, 38, 101, 164, 198, 238, 0, 4,
        67, 130, 115, 178, 241, 0, 48, 96, 81, 144, 207, 244, 0, 41, 47, 110, 173, 205, 247, 0, 13,
        76, 139, 124, 187, 250, 0, 52, 105, 90, 153, 216, 253, 0, 42, 56, 119, 182, 219, 0, 37, 22,
        85, 148, 184, 222, 0, 0, 57, 114, 99, 162, 225, 0, 40, 80, 65, 128, 191, 228, 0, 38, 31,
        94, 157, 192, 231, 0, 0, 61, 123, 108, 171, 234, 0, 44, 89, 74, 137, 200, 237, 0, 40,
    ];
    pub(crate) const BIG_HUE_U8_M03: [u8; 189] = [
        33, 85, 11, 144, 196, 122, 20, 14, 233, 110, 162, 88, 236, 17, 155, 76, 128, 54, 187, 239,
        165, 42, 94, 20, 153, 205, 131, 29, 23, 242, 119, 171, 97, 245, 26, 164, 85, 137, 63, 196,
        248, 174, 51, 103, 29, 162, 214, 140, 38, 32, 251, 128, 180, 106, 254, 35, 173, 94, 146,
        72, 220, 1, 139, 60, 112, 38, 171, 223, 149, 26, 78, 4, 137, 189, 115, 13, 7, 226, 103,
        155, 81, 229, 10, 148, 69, 121, 47, 180, 232, 158, 35, 87, 13, 146, 198, 124, 22, 16, 235,
        112, 164, 90, 238, 19, 157, 78, 130, 56, 189, 241, 167, 44, 96, 22, 155, 207, 133, 31, 25,
        244, 121, 173, 99, 247, 28, 166, 87, 139, 65, 198, 250, 176, 53, 105, 31, 164, 216, 142,
        40, 34, 253, 130, 182, 108, 6, 0, 219, 96, 148, 74, 222, 3, 141, 62, 114, 40, 173, 225,
        151, 28, 80, 6, 139, 191, 117, 15, 9, 228, 105, 157, 83, 231, 12, 150, 71, 123, 49, 182,
        234, 160, 37, 89, 15, 148, 200, 126, 24, 18, 237,
    ];
}

/// `F` of the reference script.
const F_IMAGE: [f32; 18] = [
    0.1, 0.5, 0.9, 0.8, 0.2, 0.3, 0.4, 0.4, 0.4, //
    1.0, 0.0, 0.5, 0.25, 0.75, 0.6, 0.9, 0.85, 0.05,
];
/// `U` of the reference script.
const U_IMAGE: [u8; 18] = [
    12, 130, 250, 200, 40, 77, 99, 99, 99, //
    255, 0, 128, 64, 191, 153, 230, 217, 13,
];

fn f32_img(shape: &[usize], values: &[f32]) -> Tensor {
    Tensor::new(shape, TensorData::F32(values.to_vec().into())).unwrap()
}

fn u8_img(shape: &[usize], values: &[u8]) -> Tensor {
    Tensor::new(shape, TensorData::U8(values.to_vec().into())).unwrap()
}

fn f() -> Tensor {
    f32_img(&[2, 3, 3], &F_IMAGE)
}

fn u() -> Tensor {
    u8_img(&[2, 3, 3], &U_IMAGE)
}

/// `k = (arange(9 * 7 * 3) * 37 + 11) % 256`, as in the reference script.
fn big_k() -> Vec<u32> {
    (0..9 * 7 * 3).map(|i| (i * 37 + 11) % 256).collect()
}

/// `BIG_F`: `k / 255` in float32.
fn big_f32() -> Tensor {
    let v: Vec<f32> = big_k().iter().map(|&k| k as f32 / 255.0).collect();
    f32_img(&[9, 7, 3], &v)
}

/// `BIG_U`: `k` as uint8.
fn big_u8() -> Tensor {
    let v: Vec<u8> = big_k().iter().map(|&k| k as u8).collect();
    u8_img(&[9, 7, 3], &v)
}

fn max_abs_diff(got: &Tensor, want: &[f32]) -> f32 {
    let got = got.as_f32().expect("an f32 result");
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

/// Asserts an f32 result matches TensorFlow's within `tol` (and keeps shape and dtype).
#[track_caller]
fn assert_tf_f32(name: &str, got: &Tensor, shape: &[usize], want: &[f32], tol: f32) {
    assert_eq!(got.shape(), shape, "{name}: shape");
    let d = max_abs_diff(got, want);
    println!("{name}: max |ours - TF| = {d:e}");
    assert!(d <= tol, "{name}: max |ours - TF| = {d:e} > {tol:e}");
}

/// Asserts a u8 result equals TensorFlow's (and keeps shape and dtype).
#[track_caller]
fn assert_tf_u8(name: &str, got: &Tensor, shape: &[usize], want: &[u8]) {
    assert_eq!(got.shape(), shape, "{name}: shape");
    assert_eq!(got.as_u8().expect("a u8 result"), want, "{name}");
}

/// TensorFlow agreement for f32: the kernels are replicated operation for operation, so
/// this is expected to be exact (it was, with TF 2.21 on x86-64); the tolerance leaves room
/// for platforms whose TensorFlow build rounds differently.
const TF_TOL: f32 = 1e-6;

// ---------------------------------------------------------------------------------------
// TensorFlow reference vectors

#[test]
fn tf_brightness() {
    let s = [2, 3, 3];
    assert_tf_f32(
        "brightness f32",
        &adjust_brightness(&f(), -0.15).unwrap(),
        &s,
        &tf::BRIGHTNESS_F32_M015,
        TF_TOL,
    );
    assert_tf_u8(
        "brightness u8 +0.2",
        &adjust_brightness(&u(), 0.2).unwrap(),
        &s,
        &tf::BRIGHTNESS_U8_P02,
    );
    assert_tf_u8(
        "brightness u8 -0.3",
        &adjust_brightness(&u(), -0.3).unwrap(),
        &s,
        &tf::BRIGHTNESS_U8_M03,
    );
}

#[test]
fn tf_contrast() {
    let s = [2, 3, 3];
    assert_tf_f32(
        "contrast f32",
        &adjust_contrast(&f(), 1.8).unwrap(),
        &s,
        &tf::CONTRAST_F32_18,
        TF_TOL,
    );
    assert_tf_u8(
        "contrast u8 1.8",
        &adjust_contrast(&u(), 1.8).unwrap(),
        &s,
        &tf::CONTRAST_U8_18,
    );
    assert_tf_u8(
        "contrast u8 0.3",
        &adjust_contrast(&u(), 0.3).unwrap(),
        &s,
        &tf::CONTRAST_U8_03,
    );
    let s = [9, 7, 3];
    assert_tf_f32(
        "contrast f32 9x7",
        &adjust_contrast(&big_f32(), 1.8).unwrap(),
        &s,
        &tf::BIG_CONTRAST_F32_18,
        TF_TOL,
    );
    assert_tf_u8(
        "contrast u8 9x7",
        &adjust_contrast(&big_u8(), 0.5).unwrap(),
        &s,
        &tf::BIG_CONTRAST_U8_05,
    );
}

#[test]
fn tf_saturation() {
    let s = [2, 3, 3];
    assert_tf_f32(
        "saturation f32 0.4",
        &adjust_saturation(&f(), 0.4).unwrap(),
        &s,
        &tf::SATURATION_F32_04,
        TF_TOL,
    );
    assert_tf_f32(
        "saturation f32 2.5",
        &adjust_saturation(&f(), 2.5).unwrap(),
        &s,
        &tf::SATURATION_F32_25,
        TF_TOL,
    );
    assert_tf_u8(
        "saturation u8 0.4",
        &adjust_saturation(&u(), 0.4).unwrap(),
        &s,
        &tf::SATURATION_U8_04,
    );
    assert_tf_u8(
        "saturation u8 2.5",
        &adjust_saturation(&u(), 2.5).unwrap(),
        &s,
        &tf::SATURATION_U8_25,
    );
    let s = [9, 7, 3];
    assert_tf_f32(
        "saturation f32 9x7",
        &adjust_saturation(&big_f32(), 2.5).unwrap(),
        &s,
        &tf::BIG_SATURATION_F32_25,
        TF_TOL,
    );
    assert_tf_u8(
        "saturation u8 9x7",
        &adjust_saturation(&big_u8(), 1.7).unwrap(),
        &s,
        &tf::BIG_SATURATION_U8_17,
    );
}

#[test]
fn tf_hue() {
    let s = [2, 3, 3];
    assert_tf_f32(
        "hue f32 0.2",
        &adjust_hue(&f(), 0.2).unwrap(),
        &s,
        &tf::HUE_F32_02,
        TF_TOL,
    );
    assert_tf_f32(
        "hue f32 -0.7",
        &adjust_hue(&f(), -0.7).unwrap(),
        &s,
        &tf::HUE_F32_M07,
        TF_TOL,
    );
    assert_tf_u8(
        "hue u8 0.2",
        &adjust_hue(&u(), 0.2).unwrap(),
        &s,
        &tf::HUE_U8_02,
    );
    assert_tf_u8(
        "hue u8 -0.7",
        &adjust_hue(&u(), -0.7).unwrap(),
        &s,
        &tf::HUE_U8_M07,
    );
    let s = [9, 7, 3];
    assert_tf_f32(
        "hue f32 9x7",
        &adjust_hue(&big_f32(), 0.37).unwrap(),
        &s,
        &tf::BIG_HUE_F32_037,
        TF_TOL,
    );
    assert_tf_u8(
        "hue u8 9x7",
        &adjust_hue(&big_u8(), -0.3).unwrap(),
        &s,
        &tf::BIG_HUE_U8_M03,
    );
}

#[test]
fn tf_convert_image_dtype() {
    let s = [2, 3, 3];
    let unit = to_unit_f32(&u()).unwrap();
    assert_tf_f32("to_unit_f32", &unit, &s, &tf::TO_UNIT_F32, 0.0);
    let x = f32_img(
        &[2, 2, 3],
        &[
            -0.1, 0.0, 0.001, 0.5, 0.998, 0.999, 1.0, 1.2, 0.25, 0.0019, 0.0020, 0.7,
        ],
    );
    assert_tf_u8(
        "from_unit_f32",
        &from_unit_f32(&x).unwrap(),
        &[2, 2, 3],
        &tf::FROM_UNIT_F32,
    );
    // u8 -> [0, 1] -> u8 is the identity, as in TensorFlow.
    assert_eq!(from_unit_f32(&unit).unwrap(), u());
    // Converting to the image's own dtype changes nothing.
    assert_eq!(to_unit_f32(&f()).unwrap(), f());
    assert_eq!(from_unit_f32(&u()).unwrap(), u());
}

// ---------------------------------------------------------------------------------------
// Hand-computed values

#[test]
fn brightness_by_hand() {
    let img = f32_img(&[1, 2, 1], &[0.5, 0.875]);
    let out = adjust_brightness(&img, 0.25).unwrap();
    // Not clipped on f32, as in TensorFlow.
    assert_eq!(out.as_f32().unwrap(), &[0.75, 1.125]);
    // u8: trunc(clamp((x / 255 + delta) * 255.5, 0, 255)).
    let img = u8_img(&[1, 3, 1], &[0, 100, 250]);
    let out = adjust_brightness(&img, 0.5).unwrap();
    // 0.5 * 255.5 = 127.75 -> 127; (100/255 + 0.5) * 255.5 = 227.94 -> 227; 250 -> 255.
    assert_eq!(out.as_u8().unwrap(), &[127, 227, 255]);
}

#[test]
fn contrast_by_hand() {
    // One channel, mean 0.5: 0.5 + 2 * (x - 0.5).
    let img = f32_img(&[1, 2, 1], &[0.25, 0.75]);
    assert_eq!(
        adjust_contrast(&img, 2.0).unwrap().as_f32().unwrap(),
        &[0.0, 1.0]
    );
    // Two channels, each with its own mean (0.5 and 0.25), factor 0 gives the means.
    let img = f32_img(&[2, 1, 2], &[0.0, 0.5, 1.0, 0.0]);
    assert_eq!(
        adjust_contrast(&img, 0.0).unwrap().as_f32().unwrap(),
        &[0.5, 0.25, 0.5, 0.25]
    );
    // u8: [0, 255] -> [0, 1], mean 0.5, factor 0.5 -> [0.25, 0.75] -> 63.875, 191.625.
    let img = u8_img(&[1, 2, 1], &[0, 255]);
    assert_eq!(
        adjust_contrast(&img, 0.5).unwrap().as_u8().unwrap(),
        &[63, 191]
    );
    // f32 results are not clipped.
    let img = f32_img(&[1, 2, 1], &[0.0, 1.0]);
    assert_eq!(
        adjust_contrast(&img, 3.0).unwrap().as_f32().unwrap(),
        &[-1.0, 2.0]
    );
}

#[test]
fn saturation_and_hue_by_hand() {
    // Saturation 0 makes each pixel grey at its value (the maximum).
    let img = f32_img(&[1, 2, 3], &[0.2, 0.6, 0.4, 1.0, 0.0, 0.5]);
    assert_eq!(
        adjust_saturation(&img, 0.0).unwrap().as_f32().unwrap(),
        &[0.6, 0.6, 0.6, 1.0, 1.0, 1.0]
    );
    // A third of the colour circle: red -> green -> blue -> red.
    let red = f32_img(&[1, 1, 3], &[1.0, 0.0, 0.0]);
    let green = adjust_hue(&red, 1.0 / 3.0).unwrap();
    assert_eq!(green.as_f32().unwrap(), &[0.0, 1.0, 0.0]);
    let blue = adjust_hue(&green, 1.0 / 3.0).unwrap();
    assert_eq!(blue.as_f32().unwrap(), &[0.0, 0.0, 1.0]);
    assert_eq!(
        adjust_hue(&red, -1.0 / 3.0).unwrap().as_f32().unwrap(),
        &[0.0, 0.0, 1.0]
    );
    // Half the circle: a colour to its complement; greys do not change.
    let img = u8_img(&[1, 2, 3], &[255, 255, 0, 77, 77, 77]);
    assert_eq!(
        adjust_hue(&img, 0.5).unwrap().as_u8().unwrap(),
        &[0, 0, 255, 77, 77, 77]
    );
}

#[test]
fn cast_keeps_values() {
    let img = u8_img(&[1, 2, 2], &[0, 1, 128, 255]);
    let f = cast(&img, DType::F32).unwrap();
    assert_eq!(f.as_f32().unwrap(), &[0.0, 1.0, 128.0, 255.0]);
    assert_eq!(cast(&f, DType::U8).unwrap(), img);
    // f32 -> u8 saturates and truncates, as tf.saturate_cast; NaN gives 0.
    let img = f32_img(&[1, 2, 2], &[-3.0, 12.7, 300.0, f32::NAN]);
    assert_eq!(
        cast(&img, DType::U8).unwrap().as_u8().unwrap(),
        &[0, 12, 255, 0]
    );
    assert_eq!(cast(&f, DType::F32).unwrap(), f);
    assert!(cast(&f, DType::I64).is_err());
}

#[test]
fn normalize_by_hand() {
    // ImageNet-style: u8 scaled by 1/255, per-channel mean and std.
    let img = u8_img(&[1, 2, 2], &[0, 255, 255, 0]);
    let out = normalize(&img, &[0.5, 0.25], &[0.25, 0.5], 1.0 / 255.0).unwrap();
    assert_eq!(out.dtype(), DType::F32);
    let want = [-2.0, 1.5, 2.0, -0.5];
    for (a, b) in out.as_f32().unwrap().iter().zip(want) {
        assert!((a - b).abs() <= 1e-6, "{a} vs {b}");
    }
    // Pixel units (scale 1), one mean and std for all channels.
    let img = f32_img(&[1, 1, 3], &[10.0, 20.0, 30.0]);
    let out = normalize(&img, &[20.0], &[10.0], 1.0).unwrap();
    assert_eq!(out.as_f32().unwrap(), &[-1.0, 0.0, 1.0]);
    let back = denormalize(&out, &[20.0], &[10.0], 1.0).unwrap();
    assert_eq!(back, img);
}

#[test]
fn batches_are_adjusted_image_by_image() {
    let a = f();
    let b = adjust_brightness(&f(), 0.3).unwrap();
    let batch = Tensor::stack(&[&a, &b]).unwrap();
    let out = adjust_contrast(&batch, 1.8).unwrap();
    assert_eq!(out.shape(), &[2, 2, 3, 3]);
    assert_eq!(out.row(0).unwrap(), adjust_contrast(&a, 1.8).unwrap());
    assert_eq!(out.row(1).unwrap(), adjust_contrast(&b, 1.8).unwrap());
    let out = adjust_hue(&batch, 0.2).unwrap();
    assert_eq!(out.row(1).unwrap(), adjust_hue(&b, 0.2).unwrap());
}

#[test]
fn bad_arguments_are_errors() {
    let img = f();
    let grey = f32_img(&[2, 2, 1], &[0.0, 0.1, 0.2, 0.3]);
    let flat = f32_img(&[6], &[0.0; 6]);
    let ints = Tensor::new(&[1, 1, 1], TensorData::I64(vec![1].into())).unwrap();
    let mut rng = rng_from_seed(1);
    assert!(adjust_brightness(&flat, 0.1).is_err());
    assert!(adjust_contrast(&ints, 1.0).is_err());
    assert!(adjust_saturation(&grey, 1.0).is_err());
    assert!(adjust_hue(&grey, 0.1).is_err());
    assert!(adjust_hue(&img, 1.5).is_err());
    assert!(random_brightness(&img, -0.1, &mut rng).is_err());
    assert!(random_contrast(&img, 0.5, 0.5, &mut rng).is_err());
    assert!(random_contrast(&img, -0.5, 0.5, &mut rng).is_err());
    assert!(random_saturation(&img, 2.0, 1.0, &mut rng).is_err());
    assert!(random_hue(&img, 0.6, &mut rng).is_err());
    assert!(random_hue(&img, -0.1, &mut rng).is_err());
    assert!(normalize(&img, &[0.0, 0.0], &[1.0], 1.0).is_err());
    assert!(normalize(&img, &[0.0], &[0.0], 1.0).is_err());
    assert!(denormalize(&img, &[0.0], &[1.0], 0.0).is_err());
    // Bad arguments draw nothing.
    assert_eq!(rng.random::<u64>(), rng_from_seed(1).random::<u64>());
    // Edge values are accepted.
    assert!(random_brightness(&img, 0.0, &mut rng).is_ok());
    assert!(random_hue(&img, 0.5, &mut rng).is_ok());
    assert!(adjust_hue(&img, -1.0).is_ok());
}

#[test]
fn empty_images() {
    let img = f32_img(&[0, 4, 3], &[]);
    assert_eq!(adjust_contrast(&img, 2.0).unwrap().shape(), &[0, 4, 3]);
    assert_eq!(adjust_hue(&img, 0.1).unwrap().shape(), &[0, 4, 3]);
    let img = u8_img(&[3, 0, 3], &[]);
    assert_eq!(adjust_contrast(&img, 2.0).unwrap().shape(), &[3, 0, 3]);
}

// ---------------------------------------------------------------------------------------
// Randomness

/// The value `random_*` maps its single draw to: `u * (hi - lo) + lo`.
fn expected_draw(seed: u64, lo: f32, hi: f32) -> f32 {
    let u: f32 = rng_from_seed(seed).random();
    u * (hi - lo) + lo
}

/// After one op, the RNG is where it is after one `f32` draw.
fn one_draw_later(seed: u64) -> u64 {
    let mut r = rng_from_seed(seed);
    let _: f32 = r.random();
    r.random()
}

#[test]
fn random_ops_draw_once_and_apply_the_drawn_parameter() {
    let (img, seed) = (f(), 7);
    let mut rng = rng_from_seed(seed);
    let out = random_brightness(&img, 0.3, &mut rng).unwrap();
    assert_eq!(rng.random::<u64>(), one_draw_later(seed));
    let delta = expected_draw(seed, -0.3, 0.3);
    assert_eq!(out, adjust_brightness(&img, delta).unwrap());

    let mut rng = rng_from_seed(seed);
    let out = random_contrast(&img, 0.2, 1.8, &mut rng).unwrap();
    assert_eq!(rng.random::<u64>(), one_draw_later(seed));
    assert_eq!(
        out,
        adjust_contrast(&img, expected_draw(seed, 0.2, 1.8)).unwrap()
    );

    let mut rng = rng_from_seed(seed);
    let out = random_saturation(&img, 0.5, 1.5, &mut rng).unwrap();
    assert_eq!(rng.random::<u64>(), one_draw_later(seed));
    assert_eq!(
        out,
        adjust_saturation(&img, expected_draw(seed, 0.5, 1.5)).unwrap()
    );

    let mut rng = rng_from_seed(seed);
    let out = random_hue(&u(), 0.4, &mut rng).unwrap();
    assert_eq!(rng.random::<u64>(), one_draw_later(seed));
    assert_eq!(
        out,
        adjust_hue(&u(), expected_draw(seed, -0.4, 0.4)).unwrap()
    );
}

// ---------------------------------------------------------------------------------------
// Properties

/// An image of either dtype: `(shape, values as f32 in [0, 1] or u8)`.
#[derive(Debug, Clone)]
struct Img {
    tensor: Tensor,
}

fn image(channels: impl Strategy<Value = usize>) -> impl Strategy<Value = Img> {
    (1usize..7, 1usize..7, channels, any::<bool>(), any::<bool>()).prop_flat_map(
        |(h, w, c, is_u8, batched)| {
            let shape: Vec<usize> = if batched {
                vec![2, h, w, c]
            } else {
                vec![h, w, c]
            };
            let n: usize = shape.iter().product();
            if is_u8 {
                proptest::collection::vec(any::<u8>(), n)
                    .prop_map(move |v| Img {
                        tensor: u8_img(&shape, &v),
                    })
                    .boxed()
            } else {
                proptest::collection::vec(0.0f32..=1.0, n)
                    .prop_map(move |v| Img {
                        tensor: f32_img(&shape, &v),
                    })
                    .boxed()
            }
        },
    )
}

fn rgb() -> impl Strategy<Value = Img> {
    image(Just(3usize))
}

fn any_channels() -> impl Strategy<Value = Img> {
    image(1usize..6)
}

/// Asserts `got` equals `want` exactly for u8 and within `tol` for f32.
fn assert_close(got: &Tensor, want: &Tensor, tol: f32) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.shape(), want.shape());
    prop_assert_eq!(got.dtype(), want.dtype());
    match (got.data(), want.data()) {
        (TensorData::U8(a), TensorData::U8(b)) => prop_assert_eq!(a, b),
        (TensorData::F32(a), TensorData::F32(b)) => {
            for (x, y) in a.iter().zip(b.iter()) {
                prop_assert!((x - y).abs() <= tol, "{} vs {}", x, y);
            }
        }
        _ => prop_assert!(false, "unexpected dtypes"),
    }
    Ok(())
}

proptest! {
    #[test]
    fn neutral_parameters_are_the_identity(img in rgb()) {
        let t = &img.tensor;
        assert_close(&adjust_brightness(t, 0.0).unwrap(), t, 0.0)?;
        assert_close(&adjust_contrast(t, 1.0).unwrap(), t, 1e-6)?;
        assert_close(&adjust_saturation(t, 1.0).unwrap(), t, 1e-6)?;
        assert_close(&adjust_hue(t, 0.0).unwrap(), t, 1e-6)?;
    }

    #[test]
    fn fused_brightness_contrast_is_the_two_ops(
        img in any_channels(),
        delta in -0.5f32..0.5,
        factor in 0.0f32..3.0,
    ) {
        let t = &img.tensor;
        let fused = adjust_brightness_contrast(t, delta, factor).unwrap();
        let chained = adjust_contrast(&adjust_brightness(t, delta).unwrap(), factor).unwrap();
        prop_assert_eq!(fused, chained);
    }

    #[test]
    fn contrast_identity_any_channels(img in any_channels()) {
        assert_close(&adjust_contrast(&img.tensor, 1.0).unwrap(), &img.tensor, 1e-6)?;
    }

    #[test]
    fn ops_keep_shape_and_dtype(img in rgb(), seed in any::<u64>()) {
        let t = &img.tensor;
        let mut rng = rng_from_seed(seed);
        let outs = [
            adjust_brightness(t, 0.1).unwrap(),
            adjust_contrast(t, 0.7).unwrap(),
            adjust_saturation(t, 1.3).unwrap(),
            adjust_hue(t, -0.2).unwrap(),
            random_brightness(t, 0.2, &mut rng).unwrap(),
            random_contrast(t, 0.5, 1.5, &mut rng).unwrap(),
            random_saturation(t, 0.5, 1.5, &mut rng).unwrap(),
            random_hue(t, 0.5, &mut rng).unwrap(),
        ];
        for out in &outs {
            prop_assert_eq!(out.shape(), t.shape());
            prop_assert_eq!(out.dtype(), t.dtype());
        }
        for out in [
            normalize(t, &[0.5], &[0.2], 1.0 / 255.0).unwrap(),
            to_unit_f32(t).unwrap(),
            cast(t, DType::F32).unwrap(),
        ] {
            prop_assert_eq!(out.shape(), t.shape());
            prop_assert_eq!(out.dtype(), DType::F32);
        }
        prop_assert_eq!(from_unit_f32(t).unwrap().dtype(), DType::U8);
    }

    #[test]
    fn same_rng_same_output(img in rgb(), seed in any::<u64>()) {
        let t = &img.tensor;
        let run = |seed: u64| {
            let mut rng = rng_from_seed(seed);
            let x = random_brightness(t, 0.2, &mut rng).unwrap();
            let x = random_contrast(&x, 0.5, 1.5, &mut rng).unwrap();
            let x = random_saturation(&x, 0.5, 1.5, &mut rng).unwrap();
            random_hue(&x, 0.1, &mut rng).unwrap()
        };
        prop_assert_eq!(run(seed), run(seed));
    }

    #[test]
    fn normalize_then_denormalize_round_trips(
        img in any_channels(),
        scale_is_unit in any::<bool>(),
        params in proptest::collection::vec((0.0f32..1.0, 0.05f32..2.0), 5),
    ) {
        let t = &img.tensor;
        let c = *t.shape().last().unwrap();
        // Means and stds in the units of the scaled values (x * scale).
        let scale = if scale_is_unit { 1.0 / 255.0 } else { 1.0 };
        let unit = if t.dtype() == DType::U8 { 255.0 * scale } else { scale };
        let mean: Vec<f32> = params[..c].iter().map(|p| p.0 * unit).collect();
        let std: Vec<f32> = params[..c].iter().map(|p| p.1 * unit).collect();
        let y = normalize(t, &mean, &std, scale).unwrap();
        let back = denormalize(&y, &mean, &std, scale).unwrap();
        let x = cast(t, DType::F32).unwrap();
        for (i, (a, b)) in x.as_f32().unwrap().iter().zip(back.as_f32().unwrap()).enumerate() {
            // Relative to the magnitude of the values involved (the pixel, or the mean in
            // pixel units when the pixel is near 0).
            let magnitude = a.abs().max(mean[i % c] / scale).max(f32::MIN_POSITIVE);
            prop_assert!((a - b).abs() <= 1e-5 * magnitude, "{} vs {} (channel {})", a, b, i % c);
        }
    }
}
