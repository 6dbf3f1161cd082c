//! `sluice gen`: a synthetic labelled JPEG dataset as TFRecord shards, with no download.

use std::f64::consts::TAU;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use rayon::prelude::*;

use crate::image_records::{ImageRecord, MAX_SHARDS, Shards, Written, write_labels};

/// JPEG quality of the generated images.
const QUALITY: u8 = 90;

/// Write a synthetic labelled JPEG dataset as TFRecord shards.
#[derive(Debug, Args)]
#[command(
    long_about = "\
Write a synthetic labelled JPEG dataset as TFRecord shards, for demos and benchmarks, with \
no download.

Each image is a smooth picture (a sinusoid per colour channel, four filled circles, slight \
Gaussian noise) encoded as a JPEG at quality 90 with 4:2:0 chroma subsampling, so its size \
in bytes is like a photo's. Labels are drawn uniformly from --classes classes named class_0, \
class_1, ... (zero-padded to sort in label order); the class sets the horizontal frequency \
of the red channel's wave, so the labels can be learnt.

Records go round-robin to --shards files named {name}.tfrecord-00000-of-0000K (5-digit \
indices, as TensorFlow names shards) in --out, which is created if needed, with labels.txt \
beside them (one class name per line; line i, counting from 0, is label i). The files are \
uncompressed TFRecords. The output depends only on the options: the same --seed gives \
byte-identical files, whatever the number of threads (on one platform: the waves use the \
system's sine and cosine, which may differ in the last bit elsewhere).

A one-line summary (files, records, bytes) is printed on stdout.",
    after_help = "\
Examples:
  sluice gen --out data
  sluice gen --out data/val --images 256 --shards 1 --name val --seed 1
  sluice gen --out big --images 100000 --size 320 --shards 64 --classes 100

Each record is a tf.train.Example with these features (one value each):
  image/encoded      bytes   the JPEG
  image/class/label  int64   0-based class index: the class's line in labels.txt
  image/class/text   bytes   the class name (class_3)
  image/height       int64   height in pixels (--size)
  image/width        int64   width in pixels (--size)
  image/format       bytes   `jpeg`
  image/filename     bytes   a made-up path, <class>/<index>.jpg (class_3/00042.jpg)
These are the features `sluice convert` writes."
)]
pub(crate) struct GenArgs {
    /// Output folder (created if needed) or object-store prefix (s3://bucket/data/, gs://,
    /// az://, file://). Each file appears whole under its name when it is finished, or not
    /// at all.
    #[arg(long, value_name = "DIR|URL")]
    out: String,

    /// Number of images.
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..))]
    images: u64,

    /// Height and width of the (square) images, in pixels.
    #[arg(long, value_name = "S", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(8..=4096))]
    size: u32,

    /// Number of TFRecord files.
    #[arg(long, value_name = "K", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_SHARDS)))]
    shards: u32,

    /// Number of classes.
    #[arg(long, value_name = "C", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    classes: u32,

    /// Seed: the same seed gives the same files.
    #[arg(long, value_name = "X", default_value_t = 0)]
    seed: u64,

    /// Start of the shard file names: {name}.tfrecord-00000-of-0000K.
    #[arg(long, value_name = "NAME", default_value = "train")]
    name: String,
}

impl GenArgs {
    /// `sluice gen --out DIR --images N --size S --shards K` with the other options at their
    /// defaults (10 classes, seed 0, name `train`).
    pub(crate) fn new(out: PathBuf, images: u64, size: u32, shards: u32) -> Self {
        GenArgs {
            out: out.display().to_string(),
            images,
            size,
            shards,
            classes: 10,
            seed: 0,
            name: "train".to_string(),
        }
    }
}

/// Runs `sluice gen`.
pub(crate) fn run(args: &GenArgs) -> Result<ExitCode> {
    let written = generate(args)?;
    println!("sluice gen: wrote {written}");
    Ok(ExitCode::SUCCESS)
}

/// Writes the dataset `args` describe (the shards and `labels.txt`) and says what it wrote.
pub(crate) fn generate(args: &GenArgs) -> Result<Written> {
    let classes = class_names(args.classes);
    let out = sluice_storage::Location::parse(&args.out)?;
    let mut shards = Shards::create(&out, &args.name, args.shards)?;
    let digits = decimal_digits(args.images - 1).max(5);
    // Images are made in parallel a chunk at a time and written in index order, so the
    // output does not depend on the threads and memory stays bounded.
    let chunk = (rayon::current_num_threads() as u64 * 16).max(64);
    let mut start = 0;
    while start < args.images {
        let end = (start + chunk).min(args.images);
        let records = (start..end)
            .into_par_iter()
            .map(|index| {
                make_record(args, &classes, index, digits)
                    .with_context(|| format!("cannot encode image {index}"))
            })
            .collect::<Result<Vec<_>>>()?;
        for record in records {
            shards.write(&record)?;
        }
        start = end;
    }
    let written = shards.finish()?;
    write_labels(&out, &classes)?;
    Ok(written)
}

/// `class_0` ... `class_{n-1}`, zero-padded so that sorting by name keeps label order.
fn class_names(n: u32) -> Vec<String> {
    let width = decimal_digits(u64::from(n - 1));
    (0..n).map(|c| format!("class_{c:0width$}")).collect()
}

fn decimal_digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The serialized Example of image `index`.
fn make_record(args: &GenArgs, classes: &[String], index: u64, digits: usize) -> Result<Vec<u8>> {
    let mut rng = Pcg64::seed_from_u64(splitmix64(splitmix64(args.seed) ^ index));
    let label = rng.random_range(0..classes.len());
    let size = args.size as usize;
    let pixels = synthetic_image(&mut rng, size, label, classes.len());
    let side = u16::try_from(args.size).expect("--size is at most 4096");
    let mut jpeg = Vec::new();
    let mut encoder = Encoder::new(&mut jpeg, QUALITY);
    encoder.set_sampling_factor(SamplingFactor::F_2_2);
    encoder.encode(&pixels, side, side, ColorType::Rgb)?;
    let class = &classes[label];
    Ok(ImageRecord {
        encoded: jpeg,
        format: "jpeg",
        height: args.size,
        width: args.size,
        label,
        class,
        filename: format!("{class}/{index:0digits$}.jpg"),
    }
    .into_example_bytes())
}

/// An RGB image `size` x `size` (row-major, interleaved), like `synthetic_image` in the
/// tf.data baseline: per channel `127 + 100 sin(2π fx x/w + φ) cos(2π fy y/h)`, four circles
/// of random colours, Gaussian noise of σ 6, clipped to 0..=255. The red channel's `fx` lies
/// in the class's own band of [0.5, 4).
fn synthetic_image(rng: &mut Pcg64, size: usize, label: usize, classes: usize) -> Vec<u8> {
    let mut img = vec![0f32; size * size * 3];
    for c in 0..3 {
        let fx = if c == 0 {
            let band = 3.5 / classes as f64;
            0.5 + band * (label as f64 + rng.random::<f64>())
        } else {
            rng.random_range(0.5..4.0)
        };
        let fy: f64 = rng.random_range(0.5..4.0);
        let phase: f64 = rng.random_range(0.0..TAU);
        let n = size as f64;
        let across: Vec<f64> = (0..size)
            .map(|x| (fx * x as f64 / n * TAU + phase).sin())
            .collect();
        let down: Vec<f64> = (0..size).map(|y| (fy * y as f64 / n * TAU).cos()).collect();
        for (y, row) in img.chunks_exact_mut(size * 3).enumerate() {
            for (x, pixel) in row.chunks_exact_mut(3).enumerate() {
                pixel[c] = (127.0 + 100.0 * across[x] * down[y]) as f32;
            }
        }
    }
    for _ in 0..4 {
        let cy = rng.random_range(0..size) as i64;
        let cx = rng.random_range(0..size) as i64;
        let r = rng.random_range(4..(size / 4).max(5)) as i64;
        let colour: [f32; 3] = std::array::from_fn(|_| rng.random_range(0.0..255.0));
        let clamp = |v: i64| v.clamp(0, size as i64 - 1) as usize;
        for y in clamp(cy - r)..=clamp(cy + r) {
            for x in clamp(cx - r)..=clamp(cx + r) {
                let (dy, dx) = (y as i64 - cy, x as i64 - cx);
                if dy * dy + dx * dx < r * r {
                    let at = (y * size + x) * 3;
                    img[at..at + 3].copy_from_slice(&colour);
                }
            }
        }
    }
    let mut noise = Gaussian::default();
    img.into_iter()
        .map(|v| (v + 6.0 * noise.sample(rng)).round().clamp(0.0, 255.0) as u8)
        .collect()
}

/// Standard normal samples by the Box-Muller transform, two per pair of uniforms.
#[derive(Default)]
struct Gaussian {
    spare: Option<f32>,
}

impl Gaussian {
    fn sample(&mut self, rng: &mut Pcg64) -> f32 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        // 1 - u lies in (0, 1]: its logarithm is finite.
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random();
        let radius = (-2.0 * u1.ln()).sqrt();
        let (sin, cos) = (TAU * u2).sin_cos();
        self.spare = Some((radius * sin) as f32);
        (radius * cos) as f32
    }
}

/// A 64-bit mix (SplitMix64's finalizer): nearby seeds and indices give unrelated streams.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_sort_in_label_order() {
        assert_eq!(class_names(3), ["class_0", "class_1", "class_2"]);
        let names = class_names(12);
        assert_eq!(names[0], "class_00");
        assert_eq!(names[11], "class_11");
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, names);
    }

    #[test]
    fn digits() {
        assert_eq!(
            [0, 9, 10, 99_999, 100_000].map(decimal_digits),
            [1, 1, 2, 5, 6]
        );
    }

    #[test]
    fn images_are_smooth_with_some_noise() {
        let mut rng = Pcg64::seed_from_u64(1);
        let img = synthetic_image(&mut rng, 64, 2, 10);
        assert_eq!(img.len(), 64 * 64 * 3);
        // Neighbouring pixels differ by little on average (smooth), but not by nothing (noise).
        let diffs: Vec<u32> = img
            .chunks_exact(3)
            .zip(img.chunks_exact(3).skip(1))
            .map(|(a, b)| u32::from(a[1].abs_diff(b[1])))
            .collect();
        let mean = diffs.iter().sum::<u32>() as f64 / diffs.len() as f64;
        assert!((1.0..30.0).contains(&mean), "{mean}");
    }
}
