//! Property tests of the TFRecord reader and writer and of the `Example` /
//! `SequenceExample` messages: round trips in every compression, damage (flipped bytes,
//! truncation, bad checksums) always detected or harmless, no panics on arbitrary input.

use std::collections::BTreeMap;
use std::io::Write;

use bytes::Bytes;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::Index;
use sluice_proto::example::{
    BytesList, Feature, FeatureList, FeatureLists, Features, FloatList, Int64List, feature::Kind,
};
use sluice_proto::tfrecord::{
    Compression, CorruptionPolicy, FOOTER_LEN, HEADER_LEN, ReaderOptions, Record, SkippedRecord,
    TfRecordReader, TfRecordWriter, masked_crc32c,
};
use sluice_proto::{Checksum, Error, Example, SequenceExample, TfMessage};

/// The compressions a file can be written with.
const WRITTEN: [Compression; 3] = [Compression::None, Compression::Gzip, Compression::Zlib];

// ---------------------------------------------------------------------------------------
// Helpers.

fn write(records: &[Vec<u8>], compression: Compression) -> Vec<u8> {
    let mut w = TfRecordWriter::new(Vec::new(), compression).expect("a concrete compression");
    for r in records {
        w.write_record(r).expect("writing to memory");
    }
    assert_eq!(w.records(), records.len() as u64);
    w.finish().expect("writing to memory")
}

/// Compresses an uncompressed record stream as the writer would.
fn compress(plain: &[u8], compression: Compression) -> Vec<u8> {
    let level = flate2::Compression::default();
    match compression {
        Compression::None => plain.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
            e.write_all(plain).unwrap();
            e.finish().unwrap()
        }
        Compression::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), level);
            e.write_all(plain).unwrap();
            e.finish().unwrap()
        }
        Compression::Auto => unreachable!("not a file's compression"),
    }
}

/// Everything a reader produced: the records, the error that ended the stream, and the
/// skip counters.
#[derive(Debug)]
struct Outcome {
    records: Vec<Record>,
    error: Option<Error>,
    skipped: u64,
    skipped_records: Vec<SkippedRecord>,
}

impl Outcome {
    fn data(&self) -> Vec<&[u8]> {
        self.records.iter().map(|r| &r.data[..]).collect()
    }
}

fn read(file: &[u8], options: ReaderOptions) -> Outcome {
    let mut reader = TfRecordReader::new(file, "prop", options);
    let mut records = Vec::new();
    let mut error = None;
    for r in reader.by_ref() {
        match r {
            Ok(r) => records.push(r),
            Err(e) => error = Some(e),
        }
    }
    // The iterator ends after an error (the `for` loop above would otherwise go on).
    assert!(matches!(reader.read_record(), Ok(None)));
    Outcome {
        records,
        error,
        skipped: reader.skipped(),
        skipped_records: reader.skipped_records().to_vec(),
    }
}

fn with(compression: Compression) -> ReaderOptions {
    ReaderOptions::default().with_compression(compression)
}

/// Start offset of every record in the uncompressed stream, and the end of the stream.
fn boundaries(records: &[Vec<u8>]) -> Vec<u64> {
    let mut offsets = vec![0u64];
    for r in records {
        offsets.push(offsets.last().unwrap() + (HEADER_LEN + r.len() + FOOTER_LEN) as u64);
    }
    offsets
}

fn as_slices(records: &[Vec<u8>]) -> Vec<&[u8]> {
    records.iter().map(Vec::as_slice).collect()
}

/// Asserts that `got` is a prefix of `want`: damage may end a stream early, but never
/// changes what comes back.
fn assert_prefix(got: &Outcome, want: &[Vec<u8>]) -> Result<(), TestCaseError> {
    prop_assert!(got.records.len() <= want.len(), "more records than written");
    prop_assert_eq!(got.data(), as_slices(&want[..got.records.len()]));
    let offsets = boundaries(want);
    for (i, r) in got.records.iter().enumerate() {
        prop_assert_eq!((r.index, r.offset), (i as u64, offsets[i]));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Strategies.

/// One record: mostly short, some empty, some repetitive (compressible), a few large.
fn record() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => vec(any::<u8>(), 0..48),
        2 => Just(Vec::new()),
        2 => (vec(any::<u8>(), 1..6), 1usize..2000)
            .prop_map(|(pattern, n)| pattern.iter().copied().cycle().take(n).collect()),
        1 => vec(any::<u8>(), 1000..20_000),
    ]
}

fn records(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Vec<u8>>> {
    vec(record(), n)
}

fn compression() -> impl Strategy<Value = Compression> {
    prop::sample::select(WRITTEN.to_vec())
}

/// Any `f32` bit pattern (NaNs with payloads included), with the special values often.
fn float() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => any::<u32>().prop_map(f32::from_bits),
        2 => any::<f32>(),
        1 => prop::sample::select(vec![
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::MAX,
            f32::MIN,
            // Its shortest decimal, 7.038531e-26, parsed via f64 rounds to its neighbour.
            f32::from_bits(0x15ae_43fd),
        ]),
    ]
}

fn feature() -> impl Strategy<Value = Feature> {
    let bytes = vec(vec(any::<u8>(), 0..12).prop_map(Bytes::from), 0..4);
    prop_oneof![
        1 => Just(None),
        3 => bytes.prop_map(|value| Some(Kind::BytesList(BytesList { value }))),
        3 => vec(float(), 0..6).prop_map(|value| Some(Kind::FloatList(FloatList { value }))),
        3 => vec(any::<i64>(), 0..6).prop_map(|value| Some(Kind::Int64List(Int64List { value }))),
    ]
    .prop_map(|kind| Feature { kind })
}

/// Feature names: any Unicode, control characters and the empty name included.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z_/]{1,10}",
        1 => "(?s).{0,8}",
    ]
}

fn features() -> impl Strategy<Value = Features> {
    btree_map(name(), feature(), 0..5).prop_map(|feature| Features { feature })
}

fn example() -> impl Strategy<Value = Example> {
    prop::option::weighted(0.9, features()).prop_map(|features| Example { features })
}

fn sequence_example() -> impl Strategy<Value = SequenceExample> {
    let lists = btree_map(
        name(),
        vec(feature(), 0..4).prop_map(|feature| FeatureList { feature }),
        0..4,
    )
    .prop_map(|feature_list| FeatureLists { feature_list });
    (
        prop::option::weighted(0.8, features()),
        prop::option::weighted(0.8, lists),
    )
        .prop_map(|(context, feature_lists)| SequenceExample {
            context,
            feature_lists,
        })
}

// ---------------------------------------------------------------------------------------
// NaN handling. `NaN != NaN`, so messages are compared by their encodings (bit patterns).
// The JSON mapping has a single `"NaN"`, so a NaN's sign and payload do not survive JSON:
// the expected result of a JSON round trip has every NaN replaced by `f32::NAN`.

fn canonical_nans_in(features: &mut Features) {
    for f in features.feature.values_mut() {
        canonical_nans_in_feature(f);
    }
}

fn canonical_nans_in_feature(f: &mut Feature) {
    if let Some(Kind::FloatList(list)) = &mut f.kind {
        for v in &mut list.value {
            if v.is_nan() {
                *v = f32::NAN;
            }
        }
    }
}

fn canonical_example(e: &Example) -> Example {
    let mut e = e.clone();
    if let Some(f) = &mut e.features {
        canonical_nans_in(f);
    }
    e
}

fn canonical_sequence_example(e: &SequenceExample) -> SequenceExample {
    let mut e = e.clone();
    if let Some(f) = &mut e.context {
        canonical_nans_in(f);
    }
    if let Some(lists) = &mut e.feature_lists {
        for list in lists.feature_list.values_mut() {
            list.feature.iter_mut().for_each(canonical_nans_in_feature);
        }
    }
    e
}

/// Checks a message's JSON round trip: the same encoding, NaNs made canonical.
fn assert_json_round_trip<M: TfMessage + Clone>(
    msg: &M,
    canonical: impl Fn(&M) -> M,
) -> Result<(), TestCaseError> {
    let json = msg.to_json();
    let back = M::from_json(&json).map_err(|e| TestCaseError::fail(format!("{e}: {json}")))?;
    prop_assert_eq!(back.to_bytes(), canonical(msg).to_bytes(), "via {}", json);
    // Printing is a fixed point, and the `serde_json::Value` path agrees.
    prop_assert_eq!(back.to_json(), json.clone());
    let via_value = M::from_json_value(msg.to_json_value()).unwrap();
    prop_assert_eq!(via_value.to_bytes(), canonical(msg).to_bytes());
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Round trips.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Records written in each compression read back identical, with the compression
    /// given or detected; indices count from 0 and offsets are those of the uncompressed
    /// stream (each record takes 16 + its length bytes).
    #[test]
    fn records_round_trip_in_every_compression(records in records(0..12)) {
        let offsets = boundaries(&records);
        for compression in WRITTEN {
            let file = write(&records, compression);
            if compression == Compression::None {
                prop_assert_eq!(file.len() as u64, *offsets.last().unwrap());
            }
            for read_as in [compression, Compression::Auto] {
                let mut reader = TfRecordReader::new(&file[..], "rt", with(read_as));
                let got: Vec<Record> = reader.by_ref().collect::<Result<_, _>>()
                    .map_err(|e| TestCaseError::fail(format!("{compression}/{read_as}: {e}")))?;
                prop_assert_eq!(got.len(), records.len());
                for (i, (r, want)) in got.iter().zip(&records).enumerate() {
                    prop_assert_eq!(&r.data[..], &want[..]);
                    prop_assert_eq!(r.index, i as u64);
                    prop_assert_eq!(r.offset, offsets[i]);
                }
                prop_assert_eq!(reader.compression(), compression);
                prop_assert_eq!(reader.records(), records.len() as u64);
                prop_assert_eq!(
                    reader.record_bytes(),
                    records.iter().map(|r| r.len() as u64).sum::<u64>()
                );
                prop_assert_eq!(reader.stream_offset(), *offsets.last().unwrap());
                prop_assert_eq!(reader.skipped(), 0);
            }
        }
    }

    /// A tiny read buffer (many refills, records straddling them) reads exactly what the
    /// default buffer reads, intact or damaged. (In compressed streams the decoder reports
    /// damage per block of input, so how many good records precede a decompression error,
    /// and whether a damaged record's checksum or the decoder notices first, may depend on
    /// the buffer; there both must fail, agreeing on the records before.)
    #[test]
    fn a_tiny_buffer_reads_the_same(
        records in records(0..10),
        compression in compression(),
        buffer_size in 1usize..64,
        damage in prop::option::of((any::<Index>(), 1u8..=255)),
        cut in prop::option::of(any::<Index>()),
    ) {
        let mut file = write(&records, compression);
        if let (Some((at, xor)), false) = (damage, file.is_empty()) {
            let at = at.index(file.len());
            file[at] ^= xor;
        }
        if let Some(cut) = cut {
            file.truncate(cut.index(file.len() + 1));
        }
        for read_as in [compression, Compression::Auto] {
            let big = read(&file, with(read_as));
            let tiny = read(&file, ReaderOptions { buffer_size, ..with(read_as) });
            let decompress = |o: &Outcome| matches!(o.error, Some(Error::Decompress { .. }));
            if decompress(&big) || decompress(&tiny) {
                // The other may have met the damage first as a bad record checksum.
                prop_assert!(big.error.is_some() && tiny.error.is_some(), "{:?} vs {:?}", big.error, tiny.error);
                let n = big.records.len().min(tiny.records.len());
                prop_assert_eq!(&big.records[..n], &tiny.records[..n]);
            } else {
                prop_assert_eq!(&big.records, &tiny.records);
                prop_assert_eq!(
                    big.error.map(|e| e.to_string()),
                    tiny.error.map(|e| e.to_string())
                );
            }
        }
    }

    /// Examples written in each compression read back with the same encoding, NaN
    /// payloads and all; and their JSON round-trips.
    #[test]
    fn examples_round_trip_through_files_and_json(
        examples in vec(example(), 0..6),
        compression in compression(),
    ) {
        let records: Vec<Vec<u8>> = examples.iter().map(TfMessage::to_bytes).collect();
        let file = write(&records, compression);
        let got = read(&file, with(Compression::Auto));
        prop_assert!(got.error.is_none(), "{:?}", got.error);
        prop_assert_eq!(got.records.len(), examples.len());
        for (r, want) in got.records.iter().zip(&examples) {
            let back = Example::from_record("prop", r).unwrap();
            prop_assert_eq!(back.to_bytes(), want.to_bytes());
            if !want.to_json().contains("NaN") {
                prop_assert_eq!(&back, want);
            }
            assert_json_round_trip(&back, canonical_example)?;
        }
    }

    /// The same for SequenceExamples.
    #[test]
    fn sequence_examples_round_trip_through_files_and_json(
        examples in vec(sequence_example(), 0..4),
        compression in compression(),
    ) {
        let records: Vec<Vec<u8>> = examples.iter().map(TfMessage::to_bytes).collect();
        let file = write(&records, compression);
        let got = read(&file, with(compression));
        prop_assert!(got.error.is_none(), "{:?}", got.error);
        prop_assert_eq!(got.records.len(), examples.len());
        for (r, want) in got.records.iter().zip(&examples) {
            let back = SequenceExample::from_record("prop", r).unwrap();
            prop_assert_eq!(back.to_bytes(), want.to_bytes());
            assert_json_round_trip(&back, canonical_sequence_example)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// JSON alone (cheap, so more cases): every float bit pattern, every name.
    #[test]
    fn example_json_round_trips(e in example(), s in sequence_example()) {
        assert_json_round_trip(&e, canonical_example)?;
        assert_json_round_trip(&s, canonical_sequence_example)?;
    }

    /// Every finite `f32` survives JSON exactly (shortest printing, parsing back).
    #[test]
    fn every_finite_float_survives_json(bits in any::<u32>()) {
        let v = f32::from_bits(bits);
        let e = Example {
            features: Some(Features {
                feature: BTreeMap::from([(
                    "f".to_string(),
                    Feature { kind: Some(Kind::FloatList(FloatList { value: vec![v] })) },
                )]),
            }),
        };
        let back = Example::from_json(&e.to_json()).unwrap();
        let Some(Kind::FloatList(list)) = &back.features.unwrap().feature["f"].kind else {
            panic!("a float list");
        };
        if v.is_nan() {
            prop_assert_eq!(list.value[0].to_bits(), f32::NAN.to_bits());
        } else {
            prop_assert_eq!(list.value[0].to_bits(), bits);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Damage.

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// One flipped byte in an uncompressed file is always detected (CRC32C catches every
    /// burst of up to 32 bits), at exactly the record TensorFlow would name: a damaged
    /// header at the record's start, damaged data or footer at start + 12.
    #[test]
    fn a_flipped_byte_in_an_uncompressed_file_is_always_detected(
        records in records(1..8),
        at in any::<Index>(),
        xor in 1u8..=255,
        policy in prop::sample::select(vec![CorruptionPolicy::Fail, CorruptionPolicy::SkipBadData]),
    ) {
        let mut file = write(&records, Compression::None);
        let at = at.index(file.len()) as u64;
        file[at as usize] ^= xor;
        let offsets = boundaries(&records);
        let k = offsets.iter().rposition(|&o| o <= at).unwrap();
        let in_header = at < offsets[k] + HEADER_LEN as u64;

        let got = read(&file, with(Compression::None).with_corruption_policy(policy));
        if policy == CorruptionPolicy::SkipBadData && !in_header {
            // The damaged record is skipped; all the others come back.
            let mut want = records.clone();
            want.remove(k);
            prop_assert!(got.error.is_none(), "{:?}", got.error);
            prop_assert_eq!(got.data(), as_slices(&want));
            prop_assert_eq!(got.skipped, 1);
            prop_assert_eq!(
                &got.skipped_records,
                &[SkippedRecord { offset: offsets[k], index: k as u64, length: records[k].len() as u64 }]
            );
        } else {
            assert_prefix(&got, &records)?;
            prop_assert_eq!(got.records.len(), k);
            let (offset, checksum) = if in_header {
                (offsets[k], Checksum::Length)
            } else {
                (offsets[k] + HEADER_LEN as u64, Checksum::Data)
            };
            match &got.error {
                Some(Error::CorruptedRecord { offset: o, index, checksum: c, .. }) => {
                    prop_assert_eq!((*o, *index, *c), (offset, k as u64, checksum));
                }
                other => prop_assert!(false, "byte {} of record {}: {:?}", at, k, other),
            }
        }

        // Detecting the compression: the same, unless the damaged first header now looks
        // like a GZIP or ZLIB header (then the "compressed" stream fails to decode).
        let auto = read(&file, with(Compression::Auto).with_corruption_policy(policy));
        if at < HEADER_LEN as u64 && !matches!(Compression::detect(&file), Compression::None) {
            prop_assert!(auto.records.is_empty());
            prop_assert!(auto.error.is_some());
        } else {
            prop_assert_eq!(auto.data(), got.data());
            prop_assert_eq!(
                auto.error.map(|e| e.to_string()),
                got.error.map(|e| e.to_string())
            );
        }
    }

    /// One flipped byte in a GZIP or ZLIB file gives an error, or the original records:
    /// never data that was not written. (A flip can be harmless: a GZIP mtime, a ZLIB
    /// level, padding bits, or a back-reference distance that copies the same bytes in
    /// repetitive data.) What a stream cannot promise: a damaged back-reference makes the
    /// decompressor repeat bytes it produced before, and when those are whole records they
    /// come back again, each with its right CRCs, before the damage shows (the stream's
    /// checksum, or the next record's); then the stream ends with an error. So every
    /// record returned is a written one, and the records all come back, in order, exactly
    /// when there is no error. (Found by this test: ZLIB records `[146, 112, 48, 169]` and
    /// `[]`, byte 30 of 35 flipped by 121, gives the empty record four more times, then
    /// `corrupted record at 84`.)
    #[test]
    fn a_flipped_byte_in_a_compressed_file_never_changes_the_records(
        records in records(1..8),
        compressed_with in prop::sample::select(vec![Compression::Gzip, Compression::Zlib]),
        at in any::<Index>(),
        xor in 1u8..=255,
    ) {
        let mut file = write(&records, compressed_with);
        let at = at.index(file.len());
        file[at] ^= xor;
        for read_as in [compressed_with, Compression::Auto] {
            let got = read(&file, with(read_as));
            for r in &got.records {
                prop_assert!(
                    records.iter().any(|w| w[..] == r.data[..]),
                    "a record that was not written: {:?}",
                    &r.data[..]
                );
            }
            if got.error.is_none() {
                assert_prefix(&got, &records)?;
                prop_assert_eq!(got.records.len(), records.len(), "records dropped silently");
            }
        }
    }

    /// Cutting an uncompressed file anywhere: the records before the cut, then clean EOF
    /// if the cut is at a record boundary, else a truncated record at the cut record's start.
    #[test]
    fn truncating_an_uncompressed_file(records in records(0..8), cut in any::<Index>()) {
        let file = write(&records, Compression::None);
        let cut = cut.index(file.len() + 1) as u64;
        let offsets = boundaries(&records);
        let k = offsets.iter().rposition(|&o| o <= cut).unwrap();
        for read_as in [Compression::None, Compression::Auto] {
            let got = read(&file[..cut as usize], with(read_as));
            assert_prefix(&got, &records)?;
            prop_assert_eq!(got.records.len(), k);
            if cut == offsets[k] {
                prop_assert!(got.error.is_none(), "{:?}", got.error);
            } else {
                match &got.error {
                    Some(Error::TruncatedRecord { offset, index, .. }) => {
                        prop_assert_eq!((*offset, *index), (offsets[k], k as u64));
                    }
                    other => prop_assert!(false, "cut at {}: {:?}", cut, other),
                }
            }
        }
    }

    /// Cutting a compressed file anywhere but its end is an error (both formats end with a
    /// checksum trailer), after original records only.
    #[test]
    fn truncating_a_compressed_file(
        records in records(0..8),
        compressed_with in prop::sample::select(vec![Compression::Gzip, Compression::Zlib]),
        cut in any::<Index>(),
    ) {
        let file = write(&records, compressed_with);
        let cut = cut.index(file.len() + 1);
        for read_as in [compressed_with, Compression::Auto] {
            let got = read(&file[..cut], with(read_as));
            assert_prefix(&got, &records)?;
            if cut == file.len() {
                prop_assert!(got.error.is_none());
                prop_assert_eq!(got.records.len(), records.len());
            } else if cut > 0 || read_as != Compression::Auto {
                // (An empty file read with `auto` is an empty uncompressed stream.)
                prop_assert!(got.error.is_some(), "{} of {} bytes read without error", cut, file.len());
            }
        }
    }

    /// Damaging the data (or data checksum) of some records but no header: with
    /// `SkipBadData` exactly the intact records come back with their own indices and
    /// offsets, every damaged one is counted and logged; with `Fail` the first one stops
    /// the stream. The same through GZIP and ZLIB.
    #[test]
    fn the_skip_policy_skips_exactly_the_damaged_records(
        records in records(1..12),
        damaged in vec(any::<bool>(), 12),
        positions in vec((any::<Index>(), 1u8..=255), 12),
        compression in compression(),
    ) {
        let offsets = boundaries(&records);
        let mut plain = write(&records, Compression::None);
        let mut bad = Vec::new();
        for (i, r) in records.iter().enumerate() {
            if damaged[i] {
                // A byte of the data or of the footer: after the header.
                let (at, xor) = positions[i];
                let at = offsets[i] as usize + HEADER_LEN + at.index(r.len() + FOOTER_LEN);
                plain[at] ^= xor;
                bad.push(i);
            }
        }
        let file = compress(&plain, compression);

        let skip = read(&file, with(compression).with_corruption_policy(CorruptionPolicy::SkipBadData));
        prop_assert!(skip.error.is_none(), "{:?}", skip.error);
        let good: Vec<usize> = (0..records.len()).filter(|i| !bad.contains(i)).collect();
        prop_assert_eq!(skip.records.len(), good.len());
        for (r, &i) in skip.records.iter().zip(&good) {
            prop_assert_eq!(&r.data[..], &records[i][..]);
            prop_assert_eq!((r.index, r.offset), (i as u64, offsets[i]));
        }
        prop_assert_eq!(skip.skipped, bad.len() as u64);
        let want: Vec<SkippedRecord> = bad
            .iter()
            .map(|&i| SkippedRecord { offset: offsets[i], index: i as u64, length: records[i].len() as u64 })
            .collect();
        prop_assert_eq!(&skip.skipped_records, &want);

        let fail = read(&file, with(compression));
        match bad.first() {
            None => {
                prop_assert!(fail.error.is_none());
                prop_assert_eq!(fail.records.len(), records.len());
            }
            Some(&first) => {
                assert_prefix(&fail, &records)?;
                prop_assert_eq!(fail.records.len(), first);
                match fail.error {
                    Some(Error::CorruptedRecord { offset, index, checksum: Checksum::Data, .. }) => {
                        prop_assert_eq!((offset, index), (offsets[first] + HEADER_LEN as u64, first as u64));
                    }
                    other => prop_assert!(false, "{:?}", other),
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Arbitrary input.

/// A record header claiming `length` bytes, with a valid length checksum.
fn header(length: u64) -> Vec<u8> {
    let len = length.to_le_bytes();
    let mut h = len.to_vec();
    h.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    h
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes, read with any options, never panic; whatever is returned respects
    /// the length limit and is consistent.
    #[test]
    fn arbitrary_bytes_never_panic_the_reader(
        bytes in prop_oneof![
            vec(any::<u8>(), 0..600),
            // Starting with a GZIP or ZLIB header, to get past detection.
            vec(any::<u8>(), 0..600).prop_map(|b| [&[0x1f, 0x8b, 8][..], &b].concat()),
            vec(any::<u8>(), 0..600).prop_map(|b| [&[0x78, 0x9c][..], &b].concat()),
            // A valid header, then anything.
            (any::<u16>(), vec(any::<u8>(), 0..600))
                .prop_map(|(n, b)| [header(u64::from(n)), b].concat()),
        ],
        read_as in prop::sample::select(vec![
            Compression::Auto, Compression::None, Compression::Gzip, Compression::Zlib,
        ]),
        max_record_len in prop_oneof![Just(u64::MAX), 0u64..1024],
        buffer_size in prop_oneof![Just(1 << 18), 0usize..32],
        policy in prop::sample::select(vec![CorruptionPolicy::Fail, CorruptionPolicy::SkipBadData]),
    ) {
        let options = ReaderOptions {
            compression: read_as,
            max_record_len,
            on_corruption: policy,
            buffer_size,
        };
        let got = read(&bytes, options);
        let mut next = 0u64;
        for r in &got.records {
            prop_assert!(r.data.len() as u64 <= max_record_len);
            prop_assert!(r.index >= next);
            next = r.index + 1;
        }
        if policy == CorruptionPolicy::Fail {
            prop_assert_eq!(got.skipped, 0);
        }
        // Uncompressed, nothing is created: no more data than input.
        if read_as == Compression::None {
            let total: usize = got.records.iter().map(|r| r.data.len()).sum();
            prop_assert!(total <= bytes.len());
        }
    }

    /// A header claiming more than `max_record_len` (up to `u64::MAX`), valid checksum and
    /// all, is `RecordTooLarge` at that record, whatever the compression.
    #[test]
    fn a_huge_claimed_length_is_record_too_large(
        before in vec(vec(any::<u8>(), 0..100), 0..3),
        length in prop_oneof![Just(u64::MAX), 1025u64..],
        compression in compression(),
    ) {
        let mut plain = write(&before, Compression::None);
        plain.extend_from_slice(&header(length));
        plain.extend_from_slice(&[0; 64]);
        let file = compress(&plain, compression);
        let got = read(&file, with(Compression::Auto).with_max_record_len(1024));
        assert_prefix(&got, &before)?;
        prop_assert_eq!(got.records.len(), before.len());
        let at = *boundaries(&before).last().unwrap();
        match got.error {
            Some(Error::RecordTooLarge { offset, index, length: l, limit, .. }) => {
                prop_assert_eq!((offset, index, l, limit), (at, before.len() as u64, length, 1024));
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    /// Arbitrary bytes never panic the message decoders; what decodes re-encodes to a
    /// message that decodes the same, and round-trips through JSON.
    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(
        bytes in prop_oneof![
            vec(any::<u8>(), 0..256),
            // Valid messages with a byte flipped, to reach deeper into the decoder.
            (example(), any::<Index>(), 1u8..=255).prop_map(|(e, at, xor)| {
                let mut b = e.to_bytes();
                if !b.is_empty() {
                    let at = at.index(b.len());
                    b[at] ^= xor;
                }
                b
            }),
            (sequence_example(), any::<Index>(), 1u8..=255).prop_map(|(e, at, xor)| {
                let mut b = e.to_bytes();
                if !b.is_empty() {
                    let at = at.index(b.len());
                    b[at] ^= xor;
                }
                b
            }),
        ],
    ) {
        if let Ok(e) = Example::from_bytes(&bytes) {
            let again = Example::from_bytes(&e.to_bytes()).unwrap();
            prop_assert_eq!(again.to_bytes(), e.to_bytes());
            assert_json_round_trip(&e, canonical_example)?;
        }
        if let Ok(s) = SequenceExample::from_bytes(&bytes) {
            let again = SequenceExample::from_bytes(&s.to_bytes()).unwrap();
            prop_assert_eq!(again.to_bytes(), s.to_bytes());
            assert_json_round_trip(&s, canonical_sequence_example)?;
        }
    }
}
