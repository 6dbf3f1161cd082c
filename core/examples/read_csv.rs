//! Reads a CSV file into batches of typed columns and prints the rows per second: the
//! Rust side of `bench/csv_read.py`.
//!
//! ```sh
//! python bench/csv_read.py gen /tmp/csv                     # 1 M rows, 10 numeric + 2 string columns
//! cargo run --release -p sluice-core --example read_csv /tmp/csv/numbers.csv [ROUNDS]
//! ```

use std::time::Instant;

use sluice_core::prelude::*;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: read_csv FILE [ROUNDS]"))?;
    let rounds: usize = args.next().map_or(Ok(3), |r| r.parse())?;
    let mut defaults = vec![ColumnDefault::with_default(CsvType::Int64, CsvValue::Int(0)); 5];
    defaults.extend(vec![
        ColumnDefault::with_default(
            CsvType::Float32,
            CsvValue::Float(0.0)
        );
        5
    ]);
    defaults.extend(vec![
        ColumnDefault::with_default(
            CsvType::String,
            CsvValue::Bytes("".into())
        );
        2
    ]);
    let spec = CsvSpec {
        header: true,
        record_defaults: defaults,
        ..CsvSpec::default()
    };
    for round in 0..rounds {
        let ds = Dataset::csv([&path], spec.clone())?.batch(1024);
        let start = Instant::now();
        let mut rows = 0;
        for batch in ds.iter()? {
            rows += batch?.tensor("i0").map_or(0, |t| t.len());
        }
        let seconds = start.elapsed().as_secs_f64();
        println!(
            "round {round}: {rows} rows in {seconds:.3} s: {:.0} rows/s",
            rows as f64 / seconds
        );
    }
    Ok(())
}
