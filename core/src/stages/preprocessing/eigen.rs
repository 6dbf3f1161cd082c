//! TensorFlow's CPU arithmetic where it is not IEEE's correctly rounded one: Eigen's
//! vectorized functions and reductions as TensorFlow 2.21's x86-64 wheels compile them
//! (AVX, no FMA: 8 floats or 4 doubles per packet), so that Sluice's results are TF's bit
//! for bit.
//!
//! An element-wise op in TF runs Eigen's packet function on whole packets and the C
//! library's function on the tail (the last `len % packet` values), so the same value can
//! round differently at different positions of a tensor; [`log1p_f32`] and friends do the
//! same. TF runs its kernels with denormals flushed to zero (FTZ and DAZ): a subnormal
//! input of a vectorized kernel reads as a zero of its sign ([`daz_f32`]). Checked against
//! TF on `tests/fixtures/preprocessing/adapt_more.json`.

/// Floats per AVX packet.
const F32_PACKET: usize = 8;
/// Doubles per AVX packet.
const F64_PACKET: usize = 4;

/// A subnormal float read as TF's kernels read it (denormals are zero): a zero of its sign.
pub(crate) fn daz_f32(x: f32) -> f32 {
    if x.is_subnormal() {
        0f32.copysign(x)
    } else {
        x
    }
}

/// [`daz_f32`] for `f64`.
pub(crate) fn daz_f64(x: f64) -> f64 {
    if x.is_subnormal() {
        0f64.copysign(x)
    } else {
        x
    }
}

/// Eigen's `pfrexp` for `f32`: the significand in [0.5, 1) and the exponent (positive,
/// finite inputs; others are sorted out by the callers' masks).
fn frexp_f32(a: f32) -> (f32, f32) {
    let (a, offset) = if a.abs() < f32::MIN_POSITIVE {
        (a * 16_777_216.0, -126.0 - 24.0)
    } else {
        (a, -126.0)
    };
    let bits = a.to_bits();
    let biased = ((bits >> 23) & 0xff) as f32;
    let mantissa = f32::from_bits((bits & !0x7f80_0000) | 0x3f00_0000);
    (mantissa, biased + offset)
}

/// Eigen's `pfrexp` for `f64`.
fn frexp_f64(a: f64) -> (f64, f64) {
    let (a, offset) = if a.abs() < f64::MIN_POSITIVE {
        (a * 9_007_199_254_740_992.0, -1022.0 - 53.0)
    } else {
        (a, -1022.0)
    };
    let bits = a.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as f64;
    let mantissa = f64::from_bits((bits & !0x7ff0_0000_0000_0000) | 0x3fe0_0000_0000_0000);
    (mantissa, biased + offset)
}

/// Eigen's `plog_impl_float` (natural log), one lane.
fn plog_f32(input: f32) -> f32 {
    let (mut x, mut e) = frexp_f32(input);
    let mask = x < std::f32::consts::FRAC_1_SQRT_2;
    let tmp = if mask { x } else { 0.0 };
    x -= 1.0;
    e -= if mask { 1.0 } else { 0.0 };
    x += tmp;
    // Eigen's coefficients, as float32.
    const ALPHA: [f32; 3] = [0.182_562_96, 1.0, 1.0];
    const BETA: [f32; 4] = [0.049_616_247, 0.599_232_5, 1.5, 1.0];
    let mut p = ALPHA[0];
    for c in &ALPHA[1..] {
        p = p * x + c;
    }
    p *= x;
    let mut q = BETA[0];
    for c in &BETA[1..] {
        q = q * x + c;
    }
    x = p / q;
    // IEEE addition commutes: Eigen's `e * ln2 + x`.
    x += e * std::f32::consts::LN_2;
    if input == 0.0 {
        f32::NEG_INFINITY
    } else if input.is_nan() || input < 0.0 {
        f32::NAN
    } else if input == f32::INFINITY {
        f32::INFINITY
    } else {
        x
    }
}

/// Eigen's `plog_impl_double` (natural log, Cephes), one lane.
fn plog_f64(input: f64) -> f64 {
    let (mut x, mut e) = frexp_f64(input);
    let mask = x < std::f64::consts::FRAC_1_SQRT_2;
    let tmp = if mask { x } else { 0.0 };
    x -= 1.0;
    e -= if mask { 1.0 } else { 0.0 };
    x += tmp;
    let x2 = x * x;
    let x3 = x2 * x;
    let (p0, p1, p2, p3, p4, p5) = (
        0.000_101_875_663_804_580_93,
        0.497_494_994_976_747,
        4.705_791_198_788_817,
        14.498_922_534_161_093,
        17.936_867_850_781_983,
        7.708_387_337_558_854,
    );
    let (q0, q1, q2, q3, q4, q5) = (
        1.0,
        11.287_358_718_916_746,
        45.227_914_583_753_225,
        82.987_526_691_277_67,
        71.154_475_061_856_39,
        23.125_162_012_676_533,
    );
    let mut y = p0 * x + p1;
    let mut y1 = p3 * x + p4;
    y = y * x + p2;
    y1 = y1 * x + p5;
    let mut y_ = y * x3 + y1;
    y = q0 * x + q1;
    y1 = q3 * x + q4;
    y = y * x + q2;
    y1 = y1 * x + q5;
    y = y * x3 + y1;
    y_ *= x3;
    y = y_ / y;
    y += -0.5 * x2;
    x += y;
    x += e * std::f64::consts::LN_2;
    if input == 0.0 {
        f64::NEG_INFINITY
    } else if input.is_nan() || input < 0.0 {
        f64::NAN
    } else if input == f64::INFINITY {
        f64::INFINITY
    } else {
        x
    }
}

/// Eigen's `generic_log1p` (Kahan's formula) over its packet log, one lane.
macro_rules! generic_log1p {
    ($name:ident, $t:ty, $plog:ident) => {
        fn $name(x: $t) -> $t {
            let xp1 = x + 1.0;
            if xp1 == 1.0 {
                return x;
            }
            let log1 = $plog(xp1);
            if xp1 == log1 {
                return x;
            }
            x * (log1 / (xp1 - 1.0))
        }
    };
}
generic_log1p!(packet_log1p_f32, f32, plog_f32);
generic_log1p!(packet_log1p_f64, f64, plog_f64);

/// `tf.math.log1p` of a float32 tensor's values, as TF computes it on x86-64: Eigen's
/// packet formula on whole packets of 8 (subnormals read as zeros), the C library's
/// `log1pf` on the tail.
pub(crate) fn log1p_f32(values: &[f32]) -> Vec<f32> {
    let packed = values.len() - values.len() % F32_PACKET;
    values
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            if i < packed {
                packet_log1p_f32(daz_f32(x))
            } else {
                x.ln_1p()
            }
        })
        .collect()
}

/// `tf.math.log1p` of a float64 tensor's values (packets of 4, `log1p` on the tail).
pub(crate) fn log1p_f64(values: &[f64]) -> Vec<f64> {
    let packed = values.len() - values.len() % F64_PACKET;
    values
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            if i < packed {
                packet_log1p_f64(daz_f64(x))
            } else {
                x.ln_1p()
            }
        })
        .collect()
}

/// `tf.math.log` of a float64 tensor's values (packets of 4, `log` on the tail).
pub(crate) fn log_f64(values: &[f64]) -> Vec<f64> {
    let packed = values.len() - values.len() % F64_PACKET;
    values
        .iter()
        .enumerate()
        .map(|(i, &x)| if i < packed { plog_f64(x) } else { x.ln() })
        .collect()
}

/// Eigen's `predux` of an AVX float packet: halves added, then pairs.
fn predux_f32(p: &[f32; F32_PACKET]) -> f32 {
    let b: [f32; 4] = std::array::from_fn(|i| p[i] + p[i + 4]);
    (b[0] + b[2]) + (b[1] + b[3])
}

/// Eigen's vectorized inner-most sum of float32 values of one thread (TF's `reduce_sum`,
/// and `reduce_mean`'s sum): four packet accumulators over runs of 32, then one, the
/// scalar tail, and above 8 × 1024 values halves at packet boundaries, summed apart.
pub(crate) fn sum_f32(values: &[f32]) -> f32 {
    sum_from(values, 0)
}

fn sum_from(values: &[f32], first: usize) -> f32 {
    const LEAF: usize = 1024;
    let n = values.len();
    if n > F32_PACKET * LEAF {
        let half = n.div_ceil(2);
        let split = F32_PACKET * (first + half).div_ceil(F32_PACKET);
        let left = (split - first).min(n);
        let mut accum = 0.0f32;
        accum += sum_from(&values[..left], first);
        if left < n {
            accum += sum_from(&values[left..], split);
        }
        return accum;
    }
    let add = |acc: &mut [f32; F32_PACKET], chunk: &[f32]| {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            *a += v;
        }
    };
    let mut p0 = [0.0f32; F32_PACKET];
    let mut start = 0;
    if n >= 4 * F32_PACKET {
        let (mut p1, mut p2, mut p3) = (
            [0.0f32; F32_PACKET],
            [0.0f32; F32_PACKET],
            [0.0f32; F32_PACKET],
        );
        let four = n / (4 * F32_PACKET) * (4 * F32_PACKET);
        for j in (0..four).step_by(4 * F32_PACKET) {
            add(&mut p0, &values[j..j + F32_PACKET]);
            add(&mut p1, &values[j + F32_PACKET..j + 2 * F32_PACKET]);
            add(&mut p2, &values[j + 2 * F32_PACKET..j + 3 * F32_PACKET]);
            add(&mut p3, &values[j + 3 * F32_PACKET..j + 4 * F32_PACKET]);
        }
        add(&mut p0, &p1);
        add(&mut p0, &p2);
        add(&mut p0, &p3);
        start = four;
    }
    let whole = n / F32_PACKET * F32_PACKET;
    if start + F32_PACKET <= n {
        for j in (start..whole).step_by(F32_PACKET) {
            add(&mut p0, &values[j..j + F32_PACKET]);
        }
        start = whole;
    }
    let mut accum = 0.0f32;
    for &v in &values[start..] {
        accum += v;
    }
    accum + predux_f32(&p0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_values_of_log1p() {
        let x = [-1.0f32, -0.0, f32::INFINITY, 1e-40, -2.0, 0.0, 1.0, 3.0];
        let y = log1p_f32(&x);
        assert_eq!(y[0], f32::NEG_INFINITY);
        assert!(y[1] == 0.0 && y[1].is_sign_negative());
        assert_eq!(y[2], f32::INFINITY);
        // A subnormal in a whole packet reads as 0; alone (the tail) it is kept.
        assert_eq!(y[3].to_bits(), 0);
        assert_eq!(log1p_f32(&[1e-40])[0], 1e-40);
        assert!(y[4].is_nan());
        assert!((y[6] - std::f32::consts::LN_2).abs() < 1e-7);
    }

    #[test]
    fn sums_in_eigens_order() {
        let v: Vec<f32> = (0..100).map(|i| i as f32 * 0.1).collect();
        let exact: f64 = v.iter().map(|&x| f64::from(x)).sum();
        assert!((f64::from(sum_f32(&v)) - exact).abs() < 1e-3);
        assert_eq!(sum_f32(&[1.0, 2.0, 3.0]), 6.0);
        assert_eq!(sum_f32(&[]), 0.0);
    }
}
