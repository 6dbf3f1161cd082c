//! The checks: each runs a stage over `Dataset::range(0, n)` and says what broke.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sluice_core::prelude::*;
use sluice_core::{ByteLedger, Error, ErrorKind, Tensor, TensorData, Value};

type Stage<'a> = &'a dyn Fn(Dataset) -> Dataset;

/// The `i64` values of `value` in every element of `ds` (batched values flattened), in
/// output order.
pub fn values_of(ds: &Dataset) -> Result<Vec<i64>, String> {
    let elements = ds.collect().map_err(|e| e.to_string())?;
    Ok(elements.iter().flat_map(element_values).collect())
}

fn element_values(e: &Element) -> Vec<i64> {
    match e.get("value") {
        Some(Value::Dense(t)) => match t.data() {
            TensorData::I64(v) => v.to_vec(),
            _ => Vec::new(),
        },
        Some(Value::Ragged(r)) => (0..r.rows())
            .filter_map(|i| r.row(i).ok())
            .flat_map(|t| t.as_i64().map(<[i64]>::to_vec).unwrap_or_default())
            .collect(),
        None => Vec::new(),
    }
}

fn input(n: i64, seed: u64, cpu: usize) -> Dataset {
    Dataset::range(0, n).with_options(Options::default().with_seed(seed).with_cpu_budget(cpu))
}

fn run(stage: Stage<'_>, ds: Dataset, seed: u64, cpu: usize) -> Dataset {
    stage(ds).with_options(Options::default().with_seed(seed).with_cpu_budget(cpu))
}

/// The output values are `reference(input)`, in that order.
pub fn check_ordered(
    stage: impl Fn(Dataset) -> Dataset,
    n: i64,
    reference: impl Fn(&[i64]) -> Vec<i64>,
) -> Result<(), String> {
    let want = reference(&(0..n).collect::<Vec<_>>());
    let got = values_of(&run(&stage, input(n, 1, 4), 1, 4))?;
    if got != want {
        return Err(format!(
            "ordering: got {got:?}, the reference gives {want:?}"
        ));
    }
    Ok(())
}

/// The output values are `reference(input)` as a multiset: each input's contribution
/// appears exactly as often as the reference says, in any order.
pub fn check_exactly_once(
    stage: impl Fn(Dataset) -> Dataset,
    n: i64,
    reference: impl Fn(&[i64]) -> Vec<i64>,
) -> Result<(), String> {
    let mut want = reference(&(0..n).collect::<Vec<_>>());
    let mut got = values_of(&run(&stage, input(n, 3, 4), 3, 4))?;
    want.sort_unstable();
    got.sort_unstable();
    if got != want {
        return Err(format!(
            "exactly once: got the values {got:?}, the reference gives {want:?} (sorted)"
        ));
    }
    Ok(())
}

/// Every element in full: its id, and each feature's name, dtype, shape and values (floats
/// as bit patterns), so equal digests mean bit-identical output.
fn digest(ds: &Dataset) -> Result<Vec<String>, String> {
    Ok(ds
        .collect()
        .map_err(|e| e.to_string())?
        .iter()
        .map(|e| {
            let mut names: Vec<&str> = e.iter().map(|(n, _)| n).collect();
            names.sort_unstable();
            let features: Vec<String> = names
                .into_iter()
                .map(|name| match e.get(name) {
                    Some(Value::Dense(t)) => format!("{name} {:?} {}", t.shape(), bits(t.data())),
                    Some(Value::Ragged(r)) => format!(
                        "{name} ragged {:?}",
                        (0..r.rows())
                            .map(|i| r.row(i).map(|t| bits(t.data())).unwrap_or_default())
                            .collect::<Vec<_>>()
                    ),
                    None => String::new(),
                })
                .collect();
            format!("{} | {}", e.id(), features.join(" | "))
        })
        .collect())
}

fn bits(data: &TensorData) -> String {
    match data {
        TensorData::F32(v) => format!(
            "f32 {:?}",
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        ),
        TensorData::F64(v) => format!(
            "f64 {:?}",
            v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        ),
        other => format!("{other:?}"),
    }
}

/// The same seed gives the same elements (ids and every feature's bits, in order) twice, and
/// at 1 thread as at 4.
pub fn check_deterministic(
    stage: impl Fn(Dataset) -> Dataset,
    n: i64,
    seed: u64,
) -> Result<(), String> {
    let one = digest(&run(&stage, input(n, seed, 1), seed, 1))?;
    let again = digest(&run(&stage, input(n, seed, 1), seed, 1))?;
    let four = digest(&run(&stage, input(n, seed, 4), seed, 4))?;
    if one != again {
        return Err(format!("determinism: two runs with seed {seed} differ"));
    }
    if one != four {
        return Err(format!(
            "determinism: seed {seed} gives different output at 1 and at 4 threads:\n{one:?}\n{four:?}"
        ));
    }
    Ok(())
}

/// Bytes of the padding each element carries in the bytes half of [`check_bounded`].
const PAD: usize = 4096;

/// With a consumer that takes 200 µs per output element, the stage never holds more than
/// `bound` input elements beyond `per_output` inputs per output received; and, its
/// elements padded to 4 KiB under a RAM budget of `max(8 × per_output, min(bound, 64))`
/// elements, the bytes its buffers hold (the run's byte ledger) never exceed the budget
/// plus one item per buffer (a stage that refuses with `ResourceExhausted` instead keeps
/// its bound too).
///
/// Both are observed while the stage runs, at every element it pulls from its input (on
/// whichever thread pulls it), not only when the consumer receives an output: a parallel
/// stage or a prefetch that runs ahead between two outputs is seen at its peak.
pub fn check_bounded(
    stage: impl Fn(Dataset) -> Dataset,
    n: i64,
    per_output: usize,
    bound: usize,
) -> Result<(), String> {
    bounded_run(&stage, n, per_output, bound, false)?;
    bounded_run(&stage, n, per_output, bound, true)
}

/// What [`bounded_run`] observes at every pull.
#[derive(Default)]
struct Watch {
    pulled: AtomicUsize,
    consumed: AtomicUsize,
    max_ahead: AtomicUsize,
    max_bytes: AtomicU64,
    ledger: OnceLock<Arc<ByteLedger>>,
}

impl Watch {
    fn pulled_one(&self, per_output: usize) {
        let pulled = self.pulled.fetch_add(1, Ordering::SeqCst) + 1;
        let ahead = pulled.saturating_sub(self.consumed.load(Ordering::SeqCst) * per_output);
        self.max_ahead.fetch_max(ahead, Ordering::SeqCst);
        if let Some(ledger) = self.ledger.get() {
            self.max_bytes.fetch_max(ledger.held(), Ordering::SeqCst);
        }
    }
}

fn bounded_run(
    stage: Stage<'_>,
    n: i64,
    per_output: usize,
    bound: usize,
    bytes: bool,
) -> Result<(), String> {
    let watch = Arc::new(Watch::default());
    let seen = Arc::clone(&watch);
    let source = input(n, 5, 4).map(move |e| {
        seen.pulled_one(per_output);
        if !bytes {
            return Ok(e);
        }
        let pad = Tensor::new(&[PAD], TensorData::U8(vec![0u8; PAD].into()))?;
        Ok(e.with("pad", pad))
    });
    let item = per_output.max(1);
    let element_bytes = (PAD + 8) as u64;
    let budget_elements = (8 * item).max(bound.min(64));
    let budget = budget_elements as u64 * element_bytes;
    let mut options = Options::default().with_seed(5).with_cpu_budget(4);
    if bytes {
        options = options.with_ram_budget(budget);
    }
    let ds = stage(source).with_options(options);
    let it = ds.iter().map_err(|e| e.to_string())?;
    let _ = watch.ledger.set(it.ledger());
    let mut outputs = 0;
    for e in it {
        match e {
            Ok(_) => {}
            // Refusing to hold more than the budget is keeping a bound.
            Err(e) if bytes && e.kind() == ErrorKind::ResourceExhausted => break,
            Err(e) => return Err(e.to_string()),
        }
        outputs += 1;
        watch.consumed.store(outputs, Ordering::SeqCst);
        std::thread::sleep(Duration::from_micros(200));
    }
    let ahead = watch.max_ahead.load(Ordering::SeqCst);
    if !bytes && ahead > bound {
        return Err(format!(
            "bounded buffering: {ahead} elements in flight (pulled ahead of the consumer), seen \
             while the stage ran (bound {bound})"
        ));
    }
    // One item per buffer past the budget (a buffer its consumer waits for may take one),
    // for a few buffers.
    let limit = budget + 4 * item as u64 * element_bytes;
    let held = watch.max_bytes.load(Ordering::SeqCst);
    if bytes && held > limit {
        return Err(format!(
            "bounded buffering: {held} bytes in the stage's buffers, seen while it ran, over the \
             RAM budget of {budget} bytes and one item per buffer ({limit})"
        ));
    }
    Ok(())
}

/// An error injected at element `k` upstream of the stage reaches the consumer naming the
/// failing stage and the element (fail policy); under the skip policy it is skipped and
/// counted, and the output is `reference(input without k)` as a multiset.
pub fn check_error_propagation(
    stage: impl Fn(Dataset) -> Dataset,
    n: i64,
    k: i64,
    reference: impl Fn(&[i64]) -> Vec<i64>,
) -> Result<(), String> {
    let failing = |policy| {
        let source = Dataset::range(0, n).map(move |e| {
            let v = e
                .tensor("value")
                .and_then(|t| t.as_i64())
                .map_or(-1, |v| v[0]);
            if v == k {
                return Err(Error::user(format!("injected failure at {v}")));
            }
            Ok(e)
        });
        stage(source).with_options(Options::default().with_seed(9).with_error_policy(policy))
    };
    // Fail: the error arrives, naming the stage that failed and the element.
    let err = match failing(ErrorPolicy::Fail).collect() {
        Ok(_) => {
            return Err(format!(
                "error propagation: the injected error at {k} was lost"
            ));
        }
        Err(e) => e.to_string(),
    };
    if !err.contains(&format!("injected failure at {k}")) || !err.contains("map") {
        return Err(format!(
            "error propagation: the error does not name its cause and stage: {err}"
        ));
    }
    if !err.contains(&format!("0:{k}")) {
        return Err(format!(
            "error propagation: the error does not name element 0:{k}: {err}"
        ));
    }
    // Skip: counted, and everything else arrives.
    let ds = failing(ErrorPolicy::Skip);
    let mut it = ds.iter().map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    for e in it.by_ref() {
        got.extend(element_values(&e.map_err(|e| e.to_string())?));
    }
    if it.stats().skipped == 0 {
        return Err("error propagation: a skipped error was not counted".to_string());
    }
    let rest: Vec<i64> = (0..n).filter(|&v| v != k).collect();
    let mut want = reference(&rest);
    want.sort_unstable();
    got.sort_unstable();
    if got != want {
        return Err(format!(
            "error propagation: under skip got {got:?}, the reference without {k} gives {want:?}"
        ));
    }
    Ok(())
}

/// Threads of this process (Linux: `/proc/self/task`).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// Dropping the iterator after a few elements joins every thread the stage started. Other
/// threads of the process must not come and go meanwhile (run it alone in its test binary).
pub fn check_drop_stops_threads(stage: impl Fn(Dataset) -> Dataset, n: i64) -> Result<(), String> {
    let before = threads();
    {
        let ds = run(&stage, input(n, 11, 4), 11, 4);
        let mut it = ds.iter().map_err(|e| e.to_string())?;
        for _ in 0..3 {
            if it.next().is_none() {
                break;
            }
        }
    }
    for _ in 0..100 {
        if threads() <= before {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(format!(
        "shutdown: {} threads before, {} after dropping the iterator",
        before,
        threads()
    ))
}
