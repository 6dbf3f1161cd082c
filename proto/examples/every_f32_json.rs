//! Exhaustive check that every finite `f32` survives `FloatList`'s canonical JSON: printed,
//! then read back (as any f64-based JSON reader does), it is the same bit pattern.
//!
//! ```sh
//! cargo run --release -p sluice-proto --example every_f32_json   # ~16 minutes on 2 cores
//! ```

use sluice_proto::example::FloatList;

fn survives(bits: u32) -> bool {
    let v = f32::from_bits(bits);
    if !v.is_finite() {
        return true;
    }
    let json = serde_json::to_string(&FloatList { value: vec![v] }).expect("serializes");
    let back: FloatList = serde_json::from_str(&json).expect("parses");
    back.value[0].to_bits() == bits
}

fn main() {
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get()) as u64;
    let chunk = (1u64 << 32).div_ceil(threads);
    let failures: Vec<u32> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let end = ((t + 1) * chunk).min(1 << 32);
                    (t * chunk..end)
                        .map(|b| b as u32)
                        .filter(|&b| !survives(b))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("worker"))
            .collect()
    });
    if failures.is_empty() {
        println!("all 2^32 f32 bit patterns survive JSON");
    } else {
        eprintln!(
            "{} fail, first: {:x?}",
            failures.len(),
            &failures[..failures.len().min(20)]
        );
        std::process::exit(1);
    }
}
