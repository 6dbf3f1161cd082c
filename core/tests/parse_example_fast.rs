//! The fast `parse_example` path (a wire-format scanner writing batch columns) against the
//! original prost-based path (`parse_*_reference`): same values, shapes, dtypes, row splits
//! and error messages for prost-encoded Examples, for hand-built non-canonical encodings
//! and for arbitrary (mostly broken) bytes.
//!
//! The fast path accepts exactly the records prost accepts (it checks the UTF-8 of every
//! key and the encoding of every feature, requested or not), so the properties are exact
//! equivalences; there is no leniency to carve out.

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use sluice_core::prelude::*;
use sluice_core::proto::Example;
use sluice_core::proto::TfMessage;
use sluice_core::proto::example::{
    BytesList, Feature, Features, FloatList, Int64List, feature::Kind,
};

// ---------------------------------------------------------------------------------------
// Comparison: values in a form where floats compare by bit pattern.

#[derive(Debug, PartialEq)]
enum Vals {
    Bytes(Vec<Vec<u8>>),
    F32(Vec<u32>),
    I64(Vec<i64>),
    Other(String),
}

#[derive(Debug, PartialEq)]
struct Canon {
    shape: Vec<usize>,
    vals: Vals,
    /// Row splits, for ragged values.
    splits: Option<Vec<i64>>,
}

fn canon_tensor(t: &Tensor, splits: Option<Vec<i64>>) -> Canon {
    let vals = match t.data() {
        TensorData::Bytes(v) => Vals::Bytes(v.iter().map(|b| b.to_vec()).collect()),
        TensorData::F32(v) => Vals::F32(v.iter().map(|f| f.to_bits()).collect()),
        TensorData::I64(v) => Vals::I64(v.to_vec()),
        other => Vals::Other(format!("{other:?}")),
    };
    Canon {
        shape: t.shape().to_vec(),
        vals,
        splits,
    }
}

type Outcome = Result<Vec<(String, Canon)>, String>;

fn err_text(e: &sluice_core::Error) -> String {
    // The variant (Data / Invalid) and the message.
    format!("{e:?} / {e}")
}

fn canon_one(r: sluice_core::Result<Vec<(String, Tensor)>>) -> Outcome {
    r.map(|v| {
        v.iter()
            .map(|(k, t)| (k.clone(), canon_tensor(t, None)))
            .collect()
    })
    .map_err(|e| err_text(&e))
}

fn canon_batch(r: sluice_core::Result<Vec<(String, Value)>>) -> Outcome {
    r.map(|v| {
        v.iter()
            .map(|(k, v)| {
                let c = match v {
                    Value::Dense(t) => canon_tensor(t, None),
                    Value::Ragged(r) => canon_tensor(&r.values, Some(r.row_splits.to_vec())),
                };
                (k.clone(), c)
            })
            .collect()
    })
    .map_err(|e| err_text(&e))
}

/// Checks the fast path against the reference on `records`, batched and one by one;
/// returns whether the batch parsed.
fn check_same(spec: &ParseExampleSpec, records: &[Bytes]) -> Result<bool, TestCaseError> {
    let fast = canon_batch(spec.parse_batch(records));
    let reference = canon_batch(spec.parse_batch_reference(records));
    prop_assert_eq!(&fast, &reference, "batch of {}", records.len());
    for (i, r) in records.iter().enumerate() {
        let fast = canon_one(spec.parse_one(r, i));
        let reference = canon_one(spec.parse_one_reference(r, i));
        prop_assert_eq!(fast, reference, "record {}", i);
    }
    Ok(fast.is_ok())
}

// ---------------------------------------------------------------------------------------
// Strategies: specs, and Examples built as prost messages.

/// Feature names: few enough that records and specs collide often (and `""`, the key of a
/// map entry without one).
fn name() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["", "a", "b", "ab", "image", "label"]).prop_map(String::from)
}

fn dtype() -> impl Strategy<Value = FeatureType> {
    prop_oneof![
        Just(FeatureType::Int64),
        Just(FeatureType::Float),
        Just(FeatureType::String)
    ]
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::sample::select(vec![
        vec![],
        vec![],
        vec![1],
        vec![2],
        vec![3],
        vec![0],
        vec![1, 2],
        vec![2, 0],
    ])
}

fn pad_value(dtype: FeatureType) -> BoxedStrategy<PadValue> {
    match dtype {
        FeatureType::Int64 => any::<i64>().prop_map(PadValue::Int).boxed(),
        FeatureType::Float => prop_oneof![
            any::<f64>().prop_map(PadValue::Float),
            (-5i64..5).prop_map(PadValue::Int)
        ]
        .boxed(),
        FeatureType::String => "[a-z]{0,3}".prop_map(PadValue::Bytes).boxed(),
    }
}

fn any_pad_value() -> impl Strategy<Value = PadValue> {
    dtype().prop_flat_map(pad_value)
}

fn feature_spec() -> impl Strategy<Value = FeatureSpec> {
    prop_oneof![
        dtype().prop_map(|dtype| FeatureSpec::VarLen { dtype }),
        (dtype(), shape()).prop_flat_map(|(dtype, shape)| {
            let n: usize = shape.iter().product();
            let default = prop_oneof![
                3 => Just(None),
                2 => prop::collection::vec(pad_value(dtype), 1).prop_map(Some),
                2 => prop::collection::vec(pad_value(dtype), n).prop_map(Some),
                // Often invalid: wrong count or type (an error only when it is needed).
                1 => prop::collection::vec(any_pad_value(), 0..4).prop_map(Some),
            ];
            (Just(dtype), Just(shape), default).prop_map(|(dtype, shape, default)| {
                FeatureSpec::FixedLen {
                    dtype,
                    shape,
                    default,
                }
            })
        }),
    ]
}

fn spec() -> impl Strategy<Value = ParseExampleSpec> {
    prop::collection::btree_map(name(), feature_spec(), 0..4).prop_map(ParseExampleSpec::new)
}

/// Floats by bit pattern: NaNs with payloads, infinities, subnormals, -0.
fn float() -> impl Strategy<Value = f32> {
    prop_oneof![
        any::<u32>().prop_map(f32::from_bits),
        Just(f32::NAN),
        Just(-0.0f32),
        (-3i8..3).prop_map(f32::from)
    ]
}

fn int() -> impl Strategy<Value = i64> {
    prop_oneof![any::<i64>(), -3i64..300]
}

fn kind_with(
    dtype: FeatureType,
    len: impl Into<prop::collection::SizeRange>,
) -> BoxedStrategy<Kind> {
    match dtype {
        FeatureType::String => prop::collection::vec(
            prop::collection::vec(any::<u8>(), 0..5).prop_map(Bytes::from),
            len,
        )
        .prop_map(|value| Kind::BytesList(BytesList { value }))
        .boxed(),
        FeatureType::Float => prop::collection::vec(float(), len)
            .prop_map(|value| Kind::FloatList(FloatList { value }))
            .boxed(),
        FeatureType::Int64 => prop::collection::vec(int(), len)
            .prop_map(|value| Kind::Int64List(Int64List { value }))
            .boxed(),
    }
}

/// Any Feature: no kind, or a list of 0-3 values of any kind.
fn feature() -> impl Strategy<Value = Feature> {
    prop::option::weighted(0.9, dtype().prop_flat_map(|d| kind_with(d, 0..4)))
        .prop_map(|kind| Feature { kind })
}

fn example_of(features: Option<BTreeMap<String, Feature>>) -> Bytes {
    Bytes::from(
        Example {
            features: features.map(|feature| Features { feature }),
        }
        .to_bytes(),
    )
}

/// Any Example over the small name alphabet (sometimes without `features`).
fn example() -> impl Strategy<Value = Bytes> {
    prop::option::weighted(0.95, prop::collection::btree_map(name(), feature(), 0..6))
        .prop_map(example_of)
}

/// A feature that satisfies `spec` (right kind; the right count for FixedLen).
fn conforming(spec: &FeatureSpec) -> BoxedStrategy<Feature> {
    match spec {
        FeatureSpec::VarLen { dtype } => kind_with(*dtype, 0..4),
        FeatureSpec::FixedLen { dtype, shape, .. } => {
            let n: usize = shape.iter().product();
            kind_with(*dtype, n)
        }
        // The strategies make fixed_len and var_len features only.
        other => kind_with(other.dtype(), 0..4),
    }
    .prop_map(|kind| Feature { kind: Some(kind) })
    .boxed()
}

/// An Example that mostly satisfies `spec`: each requested feature conforming, absent or
/// anything, plus other features.
fn example_for(spec: &ParseExampleSpec) -> BoxedStrategy<Bytes> {
    let requested: Vec<BoxedStrategy<Option<(String, Feature)>>> = spec
        .features
        .iter()
        .map(|(k, s)| {
            let k = k.clone();
            prop_oneof![
                6 => conforming(s).prop_map(Some),
                1 => Just(None),
                1 => feature().prop_map(Some),
            ]
            .prop_map(move |f| f.map(|f| (k.clone(), f)))
            .boxed()
        })
        .collect();
    (
        requested,
        prop::collection::btree_map(name(), feature(), 0..3),
    )
        .prop_map(|(requested, mut others)| {
            // Requested features win over others of the same name, whichever comes first.
            others.extend(requested.into_iter().flatten());
            example_of(Some(others))
        })
        .boxed()
}

fn spec_and_batch() -> impl Strategy<Value = (ParseExampleSpec, Vec<Bytes>)> {
    spec().prop_flat_map(|spec| {
        let records = prop::collection::vec(example_for(&spec), 0..5);
        (Just(spec), records)
    })
}

// ---------------------------------------------------------------------------------------
// A protobuf encoder for hand-built, non-canonical encodings.

/// Writes wire-format fields; when `seed` is non-zero, some keys and lengths are written as
/// over-long varints (legal: protobuf readers accept up to 10 bytes).
struct Wire {
    out: Vec<u8>,
    seed: u64,
    n: u64,
}

impl Wire {
    fn new(seed: u64) -> Self {
        Wire {
            out: Vec::new(),
            seed,
            n: 0,
        }
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    /// A small varint, sometimes padded with a redundant continuation byte.
    fn small(&mut self, v: u64) {
        self.n += 1;
        let long = self.seed != 0
            && self
                .seed
                .wrapping_mul(self.n)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                >> 62
                == 0;
        if long && v < 1 << 56 {
            let start = self.out.len();
            self.varint(v);
            *self.out.last_mut().unwrap() |= 0x80;
            self.out.push(0);
            debug_assert!(self.out.len() - start <= 10);
        } else {
            self.varint(v);
        }
    }

    fn key(&mut self, tag: u32, wire: u8) {
        self.small((u64::from(tag) << 3) | u64::from(wire));
    }

    fn len(&mut self, tag: u32, body: impl FnOnce(&mut Wire)) {
        let mut inner = Wire {
            out: Vec::new(),
            seed: self.seed,
            n: self.n,
        };
        body(&mut inner);
        self.n = inner.n;
        self.key(tag, 2);
        self.small(inner.out.len() as u64);
        self.out.extend_from_slice(&inner.out);
    }
}

/// Unknown fields: tags ≥ 4 never clash with a known field at any level.
#[derive(Debug, Clone)]
enum Unknown {
    Varint(u32, u64),
    Fixed64(u32, u64),
    Fixed32(u32, u32),
    Len(u32, Vec<u8>),
    Group(u32, Vec<Unknown>),
}

impl Unknown {
    fn put(&self, w: &mut Wire) {
        match self {
            Unknown::Varint(t, v) => {
                w.key(*t, 0);
                w.varint(*v);
            }
            Unknown::Fixed64(t, v) => {
                w.key(*t, 1);
                w.out.extend_from_slice(&v.to_le_bytes());
            }
            Unknown::Fixed32(t, v) => {
                w.key(*t, 5);
                w.out.extend_from_slice(&v.to_le_bytes());
            }
            Unknown::Len(t, b) => w.len(*t, |w| w.out.extend_from_slice(b)),
            Unknown::Group(t, inner) => {
                w.key(*t, 3);
                for u in inner {
                    u.put(w);
                }
                w.key(*t, 4);
            }
        }
    }
}

fn unknown() -> impl Strategy<Value = Unknown> {
    let tag = prop_oneof![4u32..20, Just((1 << 29) - 1)];
    let leaf = prop_oneof![
        (tag.clone(), any::<u64>()).prop_map(|(t, v)| Unknown::Varint(t, v)),
        (tag.clone(), any::<u64>()).prop_map(|(t, v)| Unknown::Fixed64(t, v)),
        (tag.clone(), any::<u32>()).prop_map(|(t, v)| Unknown::Fixed32(t, v)),
        (tag.clone(), prop::collection::vec(any::<u8>(), 0..6))
            .prop_map(|(t, v)| Unknown::Len(t, v)),
    ];
    leaf.prop_recursive(2, 6, 3, move |inner| {
        (tag.clone(), prop::collection::vec(inner, 0..3)).prop_map(|(t, v)| Unknown::Group(t, v))
    })
}

/// One field of a value list.
#[derive(Debug, Clone)]
enum ListField {
    Bytes(Vec<u8>),
    PackedFloats(Vec<f32>),
    Float(f32),
    PackedInts(Vec<i64>),
    Int(i64),
    Unknown(Unknown),
}

/// A `Feature` field: a list of one kind (1 bytes, 2 float, 3 int64), or an unknown field.
#[derive(Debug, Clone)]
enum FeatureField {
    List(u32, Vec<ListField>),
    Unknown(Unknown),
}

#[derive(Debug, Clone)]
enum EntryField {
    Key(String),
    Value(Vec<FeatureField>),
    Unknown(Unknown),
}

#[derive(Debug, Clone)]
enum FeaturesField {
    Entry(Vec<EntryField>),
    Unknown(Unknown),
}

#[derive(Debug, Clone)]
enum ExampleField {
    Features(Vec<FeaturesField>),
    Unknown(Unknown),
}

fn put_list(w: &mut Wire, fields: &[ListField]) {
    for f in fields {
        match f {
            ListField::Bytes(b) => w.len(1, |w| w.out.extend_from_slice(b)),
            ListField::PackedFloats(v) => w.len(1, |w| {
                for x in v {
                    w.out.extend_from_slice(&x.to_le_bytes());
                }
            }),
            ListField::Float(x) => {
                w.key(1, 5);
                w.out.extend_from_slice(&x.to_le_bytes());
            }
            ListField::PackedInts(v) => w.len(1, |w| {
                for x in v {
                    w.varint(*x as u64);
                }
            }),
            ListField::Int(x) => {
                w.key(1, 0);
                w.varint(*x as u64);
            }
            ListField::Unknown(u) => u.put(w),
        }
    }
}

fn put_feature(w: &mut Wire, fields: &[FeatureField]) {
    for f in fields {
        match f {
            FeatureField::List(tag, list) => w.len(*tag, |w| put_list(w, list)),
            FeatureField::Unknown(u) => u.put(w),
        }
    }
}

fn encode(example: &[ExampleField], seed: u64) -> Bytes {
    let mut w = Wire::new(seed);
    for f in example {
        match f {
            ExampleField::Unknown(u) => u.put(&mut w),
            ExampleField::Features(fields) => w.len(1, |w| {
                for f in fields {
                    match f {
                        FeaturesField::Unknown(u) => u.put(w),
                        FeaturesField::Entry(entry) => w.len(1, |w| {
                            for f in entry {
                                match f {
                                    EntryField::Key(k) => {
                                        w.len(1, |w| w.out.extend_from_slice(k.as_bytes()))
                                    }
                                    EntryField::Value(v) => w.len(2, |w| put_feature(w, v)),
                                    EntryField::Unknown(u) => u.put(w),
                                }
                            }
                        }),
                    }
                }
            }),
        }
    }
    Bytes::from(w.out)
}

fn list_fields(tag: u32) -> BoxedStrategy<Vec<ListField>> {
    let field = match tag {
        1 => prop_oneof![
            6 => prop::collection::vec(any::<u8>(), 0..4).prop_map(ListField::Bytes),
            1 => unknown().prop_map(ListField::Unknown),
        ]
        .boxed(),
        2 => prop_oneof![
            3 => prop::collection::vec(float(), 0..3).prop_map(ListField::PackedFloats),
            3 => float().prop_map(ListField::Float),
            1 => unknown().prop_map(ListField::Unknown),
        ]
        .boxed(),
        _ => prop_oneof![
            3 => prop::collection::vec(int(), 0..3).prop_map(ListField::PackedInts),
            3 => int().prop_map(ListField::Int),
            1 => unknown().prop_map(ListField::Unknown),
        ]
        .boxed(),
    };
    prop::collection::vec(field, 0..4).boxed()
}

fn feature_fields() -> impl Strategy<Value = Vec<FeatureField>> {
    let field = prop_oneof![
        6 => (1u32..=3).prop_flat_map(|tag| list_fields(tag).prop_map(move |l| FeatureField::List(tag, l))),
        1 => unknown().prop_map(FeatureField::Unknown),
    ];
    prop::collection::vec(field, 0..4)
}

fn entry_fields() -> impl Strategy<Value = Vec<EntryField>> {
    let field = prop_oneof![
        4 => name().prop_map(EntryField::Key),
        4 => feature_fields().prop_map(EntryField::Value),
        1 => unknown().prop_map(EntryField::Unknown),
    ];
    prop::collection::vec(field, 0..5)
}

fn wire_example() -> impl Strategy<Value = Vec<ExampleField>> {
    let features_field = prop_oneof![
        6 => entry_fields().prop_map(FeaturesField::Entry),
        1 => unknown().prop_map(FeaturesField::Unknown),
    ];
    let field = prop_oneof![
        4 => prop::collection::vec(features_field, 0..6).prop_map(ExampleField::Features),
        1 => unknown().prop_map(ExampleField::Unknown),
    ];
    prop::collection::vec(field, 0..4)
}

/// Specs that show values: mostly VarLen, scalars otherwise.
fn loose_spec() -> impl Strategy<Value = ParseExampleSpec> {
    let s = prop_oneof![
        3 => dtype().prop_map(|dtype| FeatureSpec::VarLen { dtype }),
        1 => feature_spec(),
    ];
    prop::collection::btree_map(name(), s, 0..4).prop_map(ParseExampleSpec::new)
}

/// Damages a valid encoding: flips, inserts, removes or truncates bytes.
#[derive(Debug, Clone)]
enum Damage {
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Damage::Set(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Damage::Insert(i, b)),
        any::<usize>().prop_map(Damage::Remove),
        any::<usize>().prop_map(Damage::Truncate),
    ]
}

fn apply(bytes: &[u8], damages: &[Damage]) -> Bytes {
    let mut v = bytes.to_vec();
    for d in damages {
        let n = v.len();
        match *d {
            Damage::Set(i, b) if n > 0 => v[i % n] = b,
            Damage::Insert(i, b) => v.insert(i % (n + 1), b),
            Damage::Remove(i) if n > 0 => {
                v.remove(i % n);
            }
            Damage::Truncate(i) => v.truncate(i % (n + 1)),
            _ => {}
        }
    }
    Bytes::from(v)
}

/// A byte, often one that means something in an Example: keys of fields 1-4 of each wire
/// type, small lengths, varint continuations, a requested name.
fn wire_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        any::<u8>(),
        prop::sample::select(vec![
            0x08, 0x0a, 0x0d, 0x12, 0x15, 0x1a, 0x20, 0x22, 0x23, 0x24, 0x25, 0x00, 0x01, 0x02,
            0x03, 0x04, 0x05, 0x80, 0xff, b'a',
        ]),
    ]
}

/// Parses `bytes` both ways; the fast path must accept exactly what prost accepts.
fn check_arbitrary(spec: &ParseExampleSpec, bytes: &Bytes) -> Result<(), TestCaseError> {
    let prost_ok = Example::from_bytes(bytes).is_ok();
    let fast = spec.parse_batch(std::slice::from_ref(bytes));
    let malformed =
        matches!(&fast, Err(e) if e.to_string().starts_with("Could not parse example input"));
    prop_assert_eq!(!malformed, prost_ok, "{:?}", bytes);
    check_same(spec, std::slice::from_ref(bytes))?;
    Ok(())
}

/// Cases per property: 1024, or `PROPTEST_CASES` for a longer soak.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// (a) Random Examples and random specs: exactly the reference's values or error.
    #[test]
    fn arbitrary_examples_parse_as_the_reference_parses(
        spec in spec(),
        records in prop::collection::vec(example(), 0..5),
    ) {
        check_same(&spec, &records)?;
    }

    /// (a) Examples that mostly satisfy their spec (so most batches parse).
    #[test]
    fn conforming_examples_parse_as_the_reference_parses((spec, records) in spec_and_batch()) {
        check_same(&spec, &records)?;
    }

    /// (b) Non-canonical encodings: repeated `features`, entries with repeated or missing
    /// keys and split values, features with several kinds, unpacked and mixed numbers,
    /// unknown fields (groups too) everywhere, over-long varints.
    #[test]
    fn non_canonical_encodings_parse_as_prost_reads_them(
        spec in loose_spec(),
        examples in prop::collection::vec(wire_example(), 1..4),
        seed in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let records: Vec<Bytes> = examples.iter().map(|e| encode(e, seed)).collect();
        for r in &records {
            prop_assert!(Example::from_bytes(r).is_ok(), "a valid encoding: {:?}", r);
        }
        check_same(&spec, &records)?;
    }

    /// (c) Damaged encodings: never a panic; the fast path fails exactly when prost does,
    /// with the same message, and otherwise gives the same values.
    #[test]
    fn damaged_encodings_fail_exactly_when_prost_fails(
        spec in loose_spec(),
        example in wire_example(),
        seed in prop_oneof![Just(0u64), any::<u64>()],
        damages in prop::collection::vec(damage(), 1..4),
    ) {
        let bytes = apply(&encode(&example, seed), &damages);
        check_arbitrary(&spec, &bytes)?;
    }

    /// (c) Arbitrary bytes, likewise (biased towards the keys and lengths of Examples).
    #[test]
    fn arbitrary_bytes_fail_exactly_when_prost_fails(
        spec in loose_spec(),
        bytes in prop::collection::vec(wire_byte(), 0..48),
    ) {
        check_arbitrary(&spec, &Bytes::from(bytes))?;
    }
}

// ---------------------------------------------------------------------------------------
// The merge semantics, spelled out.

fn spec_of(features: &[(&str, FeatureSpec)]) -> ParseExampleSpec {
    ParseExampleSpec::new(features.iter().cloned())
}

fn varlen_i64() -> FeatureSpec {
    FeatureSpec::var_len(FeatureType::Int64)
}

/// Parses one hand-built record with a fast path and the reference, which must agree;
/// returns the fast path's values.
fn parse(spec: &ParseExampleSpec, example: &[ExampleField]) -> Vec<(String, Tensor)> {
    let record = encode(example, 0);
    let reference = canon_one(spec.parse_one_reference(&record, 0));
    let fast = spec.parse_one(&record, 0).unwrap();
    assert_eq!(canon_one(Ok(fast.clone())), reference);
    fast
}

fn ints(values: &[(String, Tensor)], name: &str) -> Vec<i64> {
    let t = &values.iter().find(|(k, _)| k == name).unwrap().1;
    t.as_i64()
        .unwrap_or_else(|| panic!("{name}: {t:?}"))
        .to_vec()
}

fn entry(key: &str, value: Vec<FeatureField>) -> FeaturesField {
    FeaturesField::Entry(vec![EntryField::Key(key.into()), EntryField::Value(value)])
}

fn int_list(fields: Vec<ListField>) -> FeatureField {
    FeatureField::List(3, fields)
}

#[test]
fn unpacked_and_mixed_numbers_concatenate() {
    let spec = spec_of(&[
        ("i", varlen_i64()),
        ("f", FeatureSpec::var_len(FeatureType::Float)),
    ]);
    let got = parse(
        &spec,
        &[ExampleField::Features(vec![
            entry(
                "i",
                vec![int_list(vec![
                    ListField::Int(1),
                    ListField::PackedInts(vec![2, -3]),
                    ListField::Int(4),
                ])],
            ),
            entry(
                "f",
                vec![FeatureField::List(
                    2,
                    vec![
                        ListField::Float(1.5),
                        ListField::PackedFloats(vec![2.5, 3.5]),
                    ],
                )],
            ),
        ])],
    );
    assert_eq!(ints(&got, "i"), [1, 2, -3, 4]);
    assert_eq!(got[0].1.as_f32().unwrap(), [1.5, 2.5, 3.5]);
}

#[test]
fn the_last_entry_of_a_key_wins_and_repeated_features_merge() {
    let spec = spec_of(&[("a", varlen_i64()), ("b", varlen_i64())]);
    let got = parse(
        &spec,
        &[
            ExampleField::Features(vec![
                entry("a", vec![int_list(vec![ListField::Int(1)])]),
                entry("b", vec![int_list(vec![ListField::Int(10)])]),
            ]),
            // A second `features` field merges into the first: `a` is replaced, `b` kept.
            ExampleField::Features(vec![entry("a", vec![int_list(vec![ListField::Int(2)])])]),
        ],
    );
    assert_eq!(ints(&got, "a"), [2]);
    assert_eq!(ints(&got, "b"), [10]);
}

#[test]
fn within_an_entry_the_last_key_counts_and_values_merge() {
    let spec = spec_of(&[("a", varlen_i64()), ("b", varlen_i64()), ("", varlen_i64())]);
    let got = parse(
        &spec,
        &[ExampleField::Features(vec![
            FeaturesField::Entry(vec![
                EntryField::Value(vec![int_list(vec![ListField::Int(1)])]),
                EntryField::Key("a".into()),
                EntryField::Value(vec![int_list(vec![ListField::Int(2)])]),
                EntryField::Key("b".into()),
            ]),
            // No key: the empty name.
            FeaturesField::Entry(vec![EntryField::Value(vec![int_list(vec![
                ListField::Int(7),
            ])])]),
        ])],
    );
    assert_eq!(ints(&got, "a"), Vec::<i64>::new());
    assert_eq!(ints(&got, "b"), [1, 2]);
    assert_eq!(ints(&got, ""), [7]);
}

#[test]
fn the_last_kind_wins_and_the_same_kind_merges() {
    let spec = spec_of(&[("a", varlen_i64()), ("b", varlen_i64())]);
    let got = parse(
        &spec,
        &[ExampleField::Features(vec![entry(
            "a",
            vec![
                int_list(vec![ListField::Int(1)]),
                FeatureField::List(1, vec![ListField::Bytes(b"x".to_vec())]),
                int_list(vec![ListField::Int(2)]),
                int_list(vec![ListField::Int(3)]),
            ],
        )])],
    );
    assert_eq!(ints(&got, "a"), [2, 3]);
    assert_eq!(ints(&got, "b"), Vec::<i64>::new());
    let err = spec
        .parse_one(
            &encode(
                &[ExampleField::Features(vec![entry(
                    "b",
                    vec![
                        int_list(vec![ListField::Int(1)]),
                        FeatureField::List(2, vec![]),
                    ],
                )])],
                0,
            ),
            0,
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Key: b, Index: 0.  Data types don't match. Expected type: int64, Actual type: float"
    );
}

#[test]
fn unknown_fields_and_groups_are_skipped_everywhere() {
    let u = || {
        Unknown::Group(
            9,
            vec![
                Unknown::Varint(4, u64::MAX),
                Unknown::Group(5, vec![Unknown::Fixed64(6, 1)]),
                Unknown::Len(7, b"zz".to_vec()),
                Unknown::Fixed32(8, 3),
            ],
        )
    };
    let spec = spec_of(&[("a", varlen_i64())]);
    let got = parse(
        &spec,
        &[
            ExampleField::Unknown(u()),
            ExampleField::Features(vec![
                FeaturesField::Unknown(u()),
                FeaturesField::Entry(vec![
                    EntryField::Unknown(u()),
                    EntryField::Key("a".into()),
                    EntryField::Value(vec![
                        FeatureField::Unknown(u()),
                        int_list(vec![
                            ListField::Unknown(u()),
                            ListField::Int(5),
                            ListField::Unknown(u()),
                        ]),
                    ]),
                ]),
            ]),
        ],
    );
    assert_eq!(ints(&got, "a"), [5]);
}

/// Wraps an empty group in `depth` groups at the top level of an Example.
fn nested_groups(depth: usize) -> Bytes {
    let mut u = Unknown::Group(4, vec![]);
    for _ in 1..depth {
        u = Unknown::Group(4, vec![u]);
    }
    encode(&[ExampleField::Unknown(u)], 0)
}

#[test]
fn groups_nest_as_deep_as_prost_allows() {
    let spec = spec_of(&[("a", varlen_i64())]);
    let mut accepted = 0;
    for depth in 90..110 {
        let record = nested_groups(depth);
        let prost_ok = Example::from_bytes(&record).is_ok();
        assert_eq!(
            spec.parse_one(&record, 0).is_ok(),
            prost_ok,
            "depth {depth}"
        );
        accepted += usize::from(prost_ok);
    }
    // prost's recursion limit is 100: both limits were exercised.
    assert!(accepted > 0 && accepted < 20);
}

#[test]
fn keys_must_be_utf8_even_when_not_requested() {
    let spec = spec_of(&[("a", varlen_i64())]);
    let mut w = Wire::new(0);
    w.len(1, |w| {
        w.len(1, |w| {
            w.len(1, |w| w.out.extend_from_slice(&[0xff, 0xfe]));
        })
    });
    let record = Bytes::from(w.out);
    let err = spec.parse_one(&record, 3).unwrap_err().to_string();
    assert!(
        err.starts_with("Could not parse example input (index 3): "),
        "{err}"
    );
    assert!(err.contains("UTF-8"), "{err}");
    assert_eq!(
        err,
        spec.parse_one_reference(&record, 3)
            .unwrap_err()
            .to_string()
    );
}

#[test]
fn byte_values_are_slices_of_the_record() {
    let spec = spec_of(&[("image", FeatureSpec::scalar(FeatureType::String))]);
    let image = Feature {
        kind: Some(Kind::BytesList(BytesList {
            value: vec![Bytes::from(vec![7u8; 1000])],
        })),
    };
    let records: Vec<Bytes> = (0..3)
        .map(|_| example_of(Some([("image".to_string(), image.clone())].into())))
        .collect();
    let out = spec.parse_batch(&records).unwrap();
    let t = out[0].1.as_dense().unwrap();
    assert_eq!(t.shape(), &[3]);
    for (value, record) in t.as_bytes_list().unwrap().iter().zip(&records) {
        let inside = record.as_ptr_range();
        assert!(
            inside.contains(&value.as_ptr()),
            "not a slice of the record"
        );
        assert_eq!(&value[..], &[7u8; 1000][..]);
    }
}

#[test]
fn errors_name_the_first_bad_record_and_the_first_bad_feature() {
    let spec = spec_of(&[
        ("a", FeatureSpec::scalar(FeatureType::Int64)),
        ("b", FeatureSpec::scalar(FeatureType::Int64)),
    ]);
    let int = |v: Vec<i64>| Feature {
        kind: Some(Kind::Int64List(Int64List { value: v })),
    };
    let good = example_of(Some(
        [
            ("a".to_string(), int(vec![1])),
            ("b".to_string(), int(vec![2])),
        ]
        .into(),
    ));
    let bad_b = example_of(Some(
        [
            ("a".to_string(), int(vec![1])),
            ("b".to_string(), int(vec![])),
        ]
        .into(),
    ));
    let missing_a = example_of(Some([("b".to_string(), int(vec![2]))].into()));
    let broken = Bytes::from_static(&[0x0a, 0x05, 0x0a]);
    let err = |records: &[Bytes]| spec.parse_batch(records).unwrap_err().to_string();
    assert_eq!(
        err(&[good.clone(), bad_b.clone(), missing_a.clone()]),
        "Key: b, Index: 1.  Number of int64 values != expected.  Values size: 0 but output shape: []"
    );
    assert_eq!(
        err(&[good.clone(), missing_a, bad_b]),
        "Feature: a (data type: int64) is required but could not be found."
    );
    let msg = err(&[good.clone(), good, broken.clone()]);
    assert!(
        msg.starts_with("Could not parse example input (index 2): "),
        "{msg}"
    );
    assert_eq!(
        msg,
        spec.parse_batch_reference(&[broken.clone(), broken.clone(), broken])
            .unwrap_err()
            .to_string()
            .replace("(index 0)", "(index 2)")
    );
}

#[test]
fn an_empty_batch_gives_empty_tensors() {
    let spec = spec_of(&[
        (
            "f",
            FeatureSpec::FixedLen {
                dtype: FeatureType::Float,
                shape: vec![2, 3],
                default: None,
            },
        ),
        ("v", FeatureSpec::var_len(FeatureType::String)),
    ]);
    let fast = spec.parse_batch(&[]).unwrap();
    assert_eq!(
        canon_batch(Ok(fast.clone())),
        canon_batch(spec.parse_batch_reference(&[]))
    );
    assert_eq!(fast[0].1.as_dense().unwrap().shape(), &[0, 2, 3]);
    assert_eq!(fast[1].1.as_dense().unwrap().shape(), &[0, 0]);
}

#[test]
fn a_map_entry_is_read_whatever_its_wire_type_as_prost_reads_it() {
    // `features { 1: varint-typed key, then 3 bytes: an entry with key "a" }`.
    let record = Bytes::from_static(&[0x0a, 0x05, 0x08, 0x03, 0x0a, 0x01, b'a']);
    assert!(Example::from_bytes(&record).is_ok());
    let spec = spec_of(&[("a", varlen_i64())]);
    assert_eq!(
        canon_one(spec.parse_one(&record, 0)),
        canon_one(spec.parse_one_reference(&record, 0))
    );
    assert!(spec.parse_one(&record, 0).unwrap()[0].1.is_empty());
}

#[test]
fn an_empty_default_of_an_empty_shape_has_the_feature_type() {
    let spec = spec_of(&[(
        "x",
        FeatureSpec::FixedLen {
            dtype: FeatureType::Float,
            shape: vec![0],
            default: Some(vec![]),
        },
    )]);
    let missing = example_of(None);
    let present = example_of(Some(
        [(
            "x".to_string(),
            Feature {
                kind: Some(Kind::FloatList(FloatList { value: vec![] })),
            },
        )]
        .into(),
    ));
    let one = spec.parse_one(&missing, 0).unwrap();
    assert_eq!(one[0].1.dtype(), DType::F32);
    assert_eq!(one[0].1.shape(), &[0]);
    let batch = spec.parse_batch(&[missing, present]).unwrap();
    let t = batch[0].1.as_dense().unwrap();
    assert_eq!((t.dtype(), t.shape()), (DType::F32, &[2, 0][..]));
}
