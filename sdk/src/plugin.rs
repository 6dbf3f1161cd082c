//! The author's side: the [`Plugin`] trait, its metadata ([`PluginInfo`]), configuration
//! ([`Config`]) and randomness ([`Rng`]).

use std::cell::Cell;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::abi::ABI_VERSION;
use crate::error::{Error, Result};
use crate::lent::{Arena, ElementRef, Outputs, Sink};
use crate::wire::{DType, Element, Encoder, Entry, decode_batch};

/// What a plugin does with the elements of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// One element out per element in ([`Plugin::map`]).
    Map,
    /// Each element kept or dropped ([`Plugin::filter`]).
    Filter,
    /// Zero or more elements out per element in ([`Plugin::flat_map`]).
    FlatMap,
    /// The whole call's elements at once, any number out, each naming its parent
    /// ([`Plugin::batch`]); for augmentations that mix elements (mixup, cutmix). The
    /// output of an element may depend on its neighbours in the call.
    Batch,
}

/// A feature a plugin requires (inputs) or promises (outputs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Feature {
    /// The feature's name.
    pub name: String,
    /// The dtype, or `None` for any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<DType>,
    /// The rank, or `None` for any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u8>,
}

impl Feature {
    /// A feature of this name, any dtype and rank.
    pub fn new(name: impl Into<String>) -> Feature {
        Feature {
            name: name.into(),
            dtype: None,
            rank: None,
        }
    }

    /// With a dtype.
    pub fn dtype(mut self, dtype: DType) -> Feature {
        self.dtype = Some(dtype);
        self
    }

    /// With a rank.
    pub fn rank(mut self, rank: u8) -> Feature {
        self.rank = Some(rank);
        self
    }

    /// Checks `element` has this feature as declared; the error names the feature.
    pub fn check(&self, element: &Element, index: usize) -> Result<()> {
        let found = element
            .get(&self.name)
            .map(|t| (t.dtype(), t.shape.as_slice()));
        self.check_found(found, index, || {
            element.tensors.iter().map(|t| t.name.clone()).collect()
        })
    }

    /// [`Feature::check`] on a lent element.
    pub fn check_ref(&self, element: &ElementRef<'_>, index: usize) -> Result<()> {
        let found = element.get(&self.name).map(|t| (t.dtype(), t.shape));
        self.check_found(found, index, || {
            element.tensors.iter().map(|t| t.name.to_string()).collect()
        })
    }

    fn check_found(
        &self,
        found: Option<(DType, &[u64])>,
        index: usize,
        names: impl FnOnce() -> Vec<String>,
    ) -> Result<()> {
        let Some((dtype, shape)) = found else {
            return Err(Error::invalid_input(format!(
                "element {index}: missing feature {:?} (has {:?})",
                self.name,
                names()
            )));
        };
        if let Some(want) = self.dtype
            && dtype != want
        {
            return Err(Error::invalid_input(format!(
                "element {index}: feature {:?} is {dtype}, expected {want}",
                self.name,
            )));
        }
        if let Some(rank) = self.rank
            && shape.len() != usize::from(rank)
        {
            return Err(Error::invalid_input(format!(
                "element {index}: feature {:?} has rank {} (shape {shape:?}), expected rank {rank}",
                self.name,
                shape.len(),
            )));
        }
        Ok(())
    }
}

/// A plugin's metadata, read by the host at load time (`sluice_info_ptr`, as JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginInfo {
    /// The ABI version the plugin was built for.
    pub abi_version: u32,
    /// The plugin's name (used in error messages).
    pub name: String,
    /// The plugin's own version.
    pub version: String,
    /// What it does with elements.
    pub kind: Kind,
    /// One line on what it does.
    #[serde(default)]
    pub description: String,
    /// Features every input element must have.
    #[serde(default)]
    pub inputs: Vec<Feature>,
    /// Features every output element has.
    #[serde(default)]
    pub outputs: Vec<Feature>,
}

impl PluginInfo {
    /// Metadata for this SDK's ABI version.
    pub fn new(name: impl Into<String>, version: impl Into<String>, kind: Kind) -> PluginInfo {
        PluginInfo {
            abi_version: ABI_VERSION,
            name: name.into(),
            version: version.into(),
            kind,
            description: String::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// With a description.
    pub fn description(mut self, text: impl Into<String>) -> PluginInfo {
        self.description = text.into();
        self
    }

    /// With a required input feature.
    pub fn input(mut self, feature: Feature) -> PluginInfo {
        self.inputs.push(feature);
        self
    }

    /// With a promised output feature.
    pub fn output(mut self, feature: Feature) -> PluginInfo {
        self.outputs.push(feature);
        self
    }

    /// The JSON the ABI carries.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("plugin info serializes")
    }
}

/// The plugin's configuration: the table the pipeline gave it, as a JSON object (the bytes
/// `sluice_init` receives are that JSON in UTF-8; empty bytes mean `{}`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    value: serde_json::Map<String, serde_json::Value>,
}

impl Config {
    /// Reads configuration bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Config> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Config::default());
        }
        match serde_json::from_slice::<serde_json::Value>(bytes) {
            Ok(serde_json::Value::Object(value)) => Ok(Config { value }),
            Ok(other) => Err(Error::config(format!(
                "expected a JSON object (a table), got {other}"
            ))),
            Err(e) => Err(Error::config(format!("not valid JSON: {e}"))),
        }
    }

    /// The whole configuration as `T` (use `#[serde(deny_unknown_fields)]` on `T` to refuse
    /// misspelt keys).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(serde_json::Value::Object(self.value.clone()))
            .map_err(|e| Error::config(e.to_string()))
    }

    /// One key as `T`, or `default` when absent.
    pub fn get_or<T: DeserializeOwned>(&self, key: &str, default: T) -> Result<T> {
        match self.value.get(key) {
            None => Ok(default),
            Some(v) => {
                serde_json::from_value(v.clone()).map_err(|e| Error::config(format!("{key}: {e}")))
            }
        }
    }

    /// The keys given.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.value.keys().map(String::as_str)
    }

    /// Fails on a key not in `known`, naming it.
    pub fn only(&self, known: &[&str]) -> Result<()> {
        match self.keys().find(|k| !known.contains(k)) {
            Some(k) => Err(Error::config(format!(
                "unknown key {k:?} (known: {known:?})"
            ))),
            None => Ok(()),
        }
    }
}

/// A small deterministic random generator (SplitMix64) seeded per element by the host.
/// Its outputs are the same on every platform and in wasm32 (the normal draw uses `libm`),
/// so native and WASM builds of a plugin agree bit for bit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Uniform in `[lo, hi)`.
    pub fn range_f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.f32()
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A standard normal draw (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = 1.0 - self.f32(); // (0, 1]
        let u2 = self.f32();
        libm::sqrtf(-2.0 * libm::logf(u1)) * libm::cosf(2.0 * std::f32::consts::PI * u2)
    }
}

/// A transform written against the SDK. Implement [`Plugin::info`], [`Plugin::new`] and the
/// method of your [`Kind`]; then `sluice_sdk::export_plugin!(YourType);` exports the ABI.
///
/// The host creates one instance per worker thread and never calls one instance from two
/// threads at once, so methods take `&mut self` (scratch buffers are fine). Randomness must
/// come from the [`Rng`] given for each element, so results are reproducible.
///
/// **Two paths.** A native host of ABI version 2 calls `map` and `filter` plugins through the
/// *lent path*: [`Plugin::map_lent`] and [`Plugin::filter_lent`] read each element's tensors
/// where the host keeps them ([`ElementRef`]) and write outputs straight into buffers the
/// host allocated ([`Outputs`]), so no values are copied across the boundary. Everywhere
/// else (WASM hosts, version-1 hosts, calls with byte strings, declined calls, `flat_map`
/// and `batch`) the *wire path* runs [`Plugin::map`] and friends on owned, decoded elements.
/// Each pair has defaults in terms of the other, so implementing one method of a pair is
/// enough (implementing neither is an error at the first call): `map_lent` by default copies
/// the element, runs `map` and copies its changed tensors into host buffers (two copies,
/// against four on the wire); `map` by default runs `map_lent` on the owned element.
/// Implement `map_lent` for speed, and `map` too when an in-place kernel is faster on owned
/// data; both must give the same bits (`sluice plugin check` compares the paths).
pub trait Plugin: Sized + Send + 'static {
    /// The plugin's metadata.
    fn info() -> PluginInfo;

    /// Creates an instance from its configuration; an invalid configuration is an
    /// [`Error::Config`], shown to the user.
    fn new(config: &Config) -> Result<Self>;

    /// [`Kind::Map`]: the element's output (the wire path). Returned tensors replace or add
    /// features; features left out are kept. Default: [`run_map_lent`] (runs
    /// [`Plugin::map_lent`] on the owned element).
    fn map(&mut self, element: Element, rng: &mut Rng) -> Result<Element> {
        let _guard = Defaulting::enter("map", "map_lent")?;
        run_map_lent(self, element, rng)
    }

    /// [`Kind::Map`] on the lent path: read `element` in place, write each new or replaced
    /// feature into a buffer from `out` ([`Outputs::like`] for one of the input's shape and
    /// dtype). Features not written are kept; an element with nothing written passes on
    /// unchanged. Default: [`map_lent_via_map`] (copies in, runs [`Plugin::map`], copies the
    /// changed tensors out).
    fn map_lent(
        &mut self,
        element: &ElementRef<'_>,
        out: &mut Outputs<'_>,
        rng: &mut Rng,
    ) -> Result<()> {
        let _guard = Defaulting::enter("map_lent", "map")?;
        map_lent_via_map(self, element, out, rng)
    }

    /// [`Kind::Filter`]: keep the element? Default: [`Plugin::filter_lent`] on a view of it
    /// (no copy).
    fn filter(&mut self, element: &Element, rng: &mut Rng) -> Result<bool> {
        let _guard = Defaulting::enter("filter", "filter_lent")?;
        self.filter_lent(&element.view(), rng)
    }

    /// [`Kind::Filter`] on the lent path: keep the element? Default: [`Plugin::filter`] on an
    /// owned copy of it.
    fn filter_lent(&mut self, element: &ElementRef<'_>, rng: &mut Rng) -> Result<bool> {
        let _guard = Defaulting::enter("filter_lent", "filter")?;
        self.filter(&element.to_element(), rng)
    }

    /// [`Kind::FlatMap`]: the element's outputs (any number).
    fn flat_map(&mut self, element: Element, rng: &mut Rng) -> Result<Vec<Element>> {
        let _ = (element, rng);
        Err(Error::plugin("this plugin does not implement flat_map"))
    }

    /// [`Kind::Batch`]: the call's outputs, each with the index of the input it comes from
    /// (indices must not decrease).
    fn batch(&mut self, elements: Vec<Element>, rngs: &mut [Rng]) -> Result<Vec<(u32, Element)>> {
        let _ = (elements, rngs);
        Err(Error::plugin("this plugin does not implement batch"))
    }
}

thread_local! {
    /// Set while a default method runs its counterpart: a counterpart that is a default too
    /// means the plugin implements neither.
    static DEFAULTING: Cell<bool> = const { Cell::new(false) };
}

/// The guard of a default method running its counterpart (see [`DEFAULTING`]).
struct Defaulting;

impl Defaulting {
    fn enter(method: &str, counterpart: &str) -> Result<Defaulting> {
        if DEFAULTING.with(|d| d.replace(true)) {
            return Err(Error::plugin(format!(
                "this plugin implements neither `{counterpart}` nor `{method}`"
            )));
        }
        Ok(Defaulting)
    }
}

impl Drop for Defaulting {
    fn drop(&mut self) {
        DEFAULTING.with(|d| d.set(false));
    }
}

/// Runs `plugin`'s [`Plugin::map_lent`] on an owned element: its tensors lent from
/// `element`, its outputs written into new vectors and merged into `element` (what the
/// default [`Plugin::map`] does; also a way to test `map_lent` without a host).
pub fn run_map_lent<P: Plugin>(plugin: &mut P, element: Element, rng: &mut Rng) -> Result<Element> {
    let mut element = element;
    let arena = Arena::default();
    {
        let view = element.view();
        let mut out = Outputs::new(Sink::Arena(&arena), 0);
        plugin.map_lent(&view, &mut out, rng)?;
    }
    for t in arena.into_tensors(0) {
        element.set(t);
    }
    Ok(element)
}

/// The lent path through [`Plugin::map`] (what the default [`Plugin::map_lent`] does): copies
/// `element` into an owned one, runs `map`, and writes the returned tensors that differ
/// from the lent ones into host buffers (tensors returned unchanged are not copied back;
/// for a name returned twice, the last one counts, as on the wire).
pub fn map_lent_via_map<P: Plugin>(
    plugin: &mut P,
    element: &ElementRef<'_>,
    out: &mut Outputs<'_>,
    rng: &mut Rng,
) -> Result<()> {
    let result = plugin.map(element.to_element(), rng)?;
    let mut tensors = result.tensors;
    let mut i = 0;
    while i < tensors.len() {
        let later = tensors[i + 1..].iter().any(|t| t.name == tensors[i].name);
        if later
            || element
                .get(&tensors[i].name)
                .is_some_and(|t| t.same_as(&tensors[i]))
        {
            tensors.remove(i);
        } else {
            i += 1;
        }
    }
    for t in tensors {
        out.set(t)?;
    }
    Ok(())
}

/// One call, as the exported `sluice_process` runs it: decodes the input batch, checks the
/// declared input contract, runs the plugin's method for its kind, checks the declared
/// output contract, and encodes the output batch. Tests call it in-process to compare with
/// a loaded build of the same plugin.
pub fn process<P: Plugin>(
    plugin: &mut P,
    info: &PluginInfo,
    input: &[u8],
    seeds: &[u64],
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    process_into(plugin, info, input, seeds, &mut out)?;
    Ok(out)
}

/// [`process`] writing the output batch into `out` (cleared first; its memory is reused).
pub fn process_into<P: Plugin>(
    plugin: &mut P,
    info: &PluginInfo,
    input: &[u8],
    seeds: &[u64],
    out: &mut Vec<u8>,
) -> Result<()> {
    let buf = std::mem::take(out);
    let entries = decode_batch(input)?;
    if entries.len() != seeds.len() {
        return Err(Error::invalid_input(format!(
            "{} elements but {} seeds",
            entries.len(),
            seeds.len()
        )));
    }
    let mut elements = Vec::with_capacity(entries.len());
    for (i, Entry { element, .. }) in entries.into_iter().enumerate() {
        let element = element.ok_or_else(|| {
            Error::invalid_input(format!("input element {i} is a pass-through marker"))
        })?;
        for f in &info.inputs {
            f.check(&element, i)?;
        }
        elements.push(element);
    }
    let mut rngs: Vec<Rng> = seeds.iter().map(|&s| Rng::new(s)).collect();
    let check_out = |e: &Element, parent: usize| -> Result<()> {
        for f in &info.outputs {
            f.check(e, parent).map_err(|err| {
                Error::plugin(format!("the plugin broke its output contract: {err}"))
            })?;
        }
        Ok(())
    };
    match info.kind {
        Kind::Map => {
            let mut outs = Vec::with_capacity(elements.len());
            for (i, (e, rng)) in elements.into_iter().zip(&mut rngs).enumerate() {
                let out = plugin.map(e, rng)?;
                check_out(&out, i)?;
                outs.push(out);
            }
            let parents: Vec<u32> = (0..outs.len() as u32).collect();
            let mut enc = Encoder::reusing(buf, &parents, input.len());
            outs.iter().for_each(|e| enc.whole(e));
            {
                *out = enc.finish();
                Ok(())
            }
        }
        Kind::Filter => {
            let mut kept = Vec::new();
            for (i, (e, rng)) in elements.iter().zip(&mut rngs).enumerate() {
                if plugin.filter(e, rng)? {
                    kept.push(i as u32);
                }
            }
            let mut enc = Encoder::reusing(buf, &kept, 0);
            kept.iter().for_each(|_| enc.pass_through());
            {
                *out = enc.finish();
                Ok(())
            }
        }
        Kind::FlatMap => {
            let mut parents = Vec::new();
            let mut outs = Vec::new();
            for (i, (e, rng)) in elements.into_iter().zip(&mut rngs).enumerate() {
                for out in plugin.flat_map(e, rng)? {
                    check_out(&out, i)?;
                    parents.push(i as u32);
                    outs.push(out);
                }
            }
            let mut enc = Encoder::reusing(buf, &parents, input.len());
            outs.iter().for_each(|e| enc.whole(e));
            {
                *out = enc.finish();
                Ok(())
            }
        }
        Kind::Batch => {
            let n = elements.len();
            let outs = plugin.batch(elements, &mut rngs)?;
            let mut last = 0;
            for (parent, e) in &outs {
                if *parent as usize >= n || *parent < last {
                    return Err(Error::plugin(format!(
                        "batch output names parent {parent} (inputs: {n}, previous parent \
                         {last})"
                    )));
                }
                last = *parent;
                check_out(e, *parent as usize)?;
            }
            let parents: Vec<u32> = outs.iter().map(|(p, _)| *p).collect();
            let mut enc = Encoder::reusing(buf, &parents, input.len());
            outs.iter().for_each(|(_, e)| enc.whole(e));
            {
                *out = enc.finish();
                Ok(())
            }
        }
    }
}

/// One call of the lent path, as the exported `sluice_process_lent` runs it: checks the
/// declared input contract and the seeds, runs [`Plugin::map_lent`] (outputs through
/// `sink`, one [`Outputs`] per element) or [`Plugin::filter_lent`] (decisions into `keep`),
/// and checks the declared output contract against each element's outputs and kept inputs.
/// `flat_map` and `batch` plugins decline (they take the wire path).
pub(crate) fn process_lent<P: Plugin>(
    plugin: &mut P,
    info: &PluginInfo,
    elements: &[ElementRef<'_>],
    seeds: &[u64],
    sink: Sink<'_>,
    keep: &mut [u8],
) -> Result<()> {
    if elements.len() != seeds.len() {
        return Err(Error::invalid_input(format!(
            "{} elements but {} seeds",
            elements.len(),
            seeds.len()
        )));
    }
    if matches!(info.kind, Kind::FlatMap | Kind::Batch) {
        return Err(Error::declined(format!(
            "{:?} plugins take the wire path",
            info.kind
        )));
    }
    for (i, e) in elements.iter().enumerate() {
        for f in &info.inputs {
            f.check_ref(e, i)?;
        }
    }
    match info.kind {
        Kind::Map => {
            for (i, (e, &seed)) in elements.iter().zip(seeds).enumerate() {
                let mut out = Outputs::new(sink, i as u32);
                plugin.map_lent(e, &mut out, &mut Rng::new(seed))?;
                for f in &info.outputs {
                    let found = match out.written().iter().rev().find(|w| w.name == f.name) {
                        Some(w) => Some((w.dtype, w.shape.as_slice())),
                        None => e.get(&f.name).map(|t| (t.dtype(), t.shape)),
                    };
                    f.check_found(found, i, || {
                        let mut names: Vec<String> =
                            e.tensors.iter().map(|t| t.name.to_string()).collect();
                        names.extend(out.written().iter().map(|w| w.name.clone()));
                        names
                    })
                    .map_err(|err| {
                        Error::plugin(format!("the plugin broke its output contract: {err}"))
                    })?;
                }
            }
            Ok(())
        }
        Kind::Filter => {
            if keep.len() != elements.len() {
                return Err(Error::invalid_input(format!(
                    "{} keep flags for {} elements",
                    keep.len(),
                    elements.len()
                )));
            }
            for ((e, &seed), k) in elements.iter().zip(seeds).zip(keep.iter_mut()) {
                *k = u8::from(plugin.filter_lent(e, &mut Rng::new(seed))?);
            }
            Ok(())
        }
        Kind::FlatMap | Kind::Batch => unreachable!("declined above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Data, Tensor, encode_batch};

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let xs: Vec<f32> = (0..1000).map(|_| a.f32()).collect();
        let ys: Vec<f32> = (0..1000).map(|_| b.f32()).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        assert_ne!(Rng::new(8).next_u64(), Rng::new(7).next_u64());
        let mean: f32 = (0..10_000).map(|_| a.normal()).sum::<f32>() / 10_000.0;
        assert!(mean.abs() < 0.05, "{mean}");
        assert!((0..1000).all(|_| a.below(3) < 3));
    }

    #[test]
    fn config_reads_json_tables_and_refuses_others() {
        let c = Config::from_bytes(br#"{"sigma": 0.5}"#).unwrap();
        assert_eq!(c.get_or("sigma", 1.0f32).unwrap(), 0.5);
        assert_eq!(c.get_or("p", 1.0f32).unwrap(), 1.0);
        assert!(c.get_or::<u32>("sigma", 1).is_err());
        assert!(c.only(&["sigma"]).is_ok());
        assert!(
            c.only(&["p"])
                .unwrap_err()
                .to_string()
                .contains("\"sigma\"")
        );
        assert_eq!(Config::from_bytes(b"").unwrap(), Config::default());
        assert!(Config::from_bytes(b"[1]").is_err());
        assert!(Config::from_bytes(b"{").is_err());
    }

    struct Halve;

    impl Plugin for Halve {
        fn info() -> PluginInfo {
            PluginInfo::new("halve", "1", Kind::FlatMap)
                .input(Feature::new("x").dtype(DType::I64).rank(0))
        }
        fn new(_: &Config) -> Result<Self> {
            Ok(Halve)
        }
        fn flat_map(&mut self, e: Element, _: &mut Rng) -> Result<Vec<Element>> {
            let Data::I64(v) = &e.get("x").unwrap().data else {
                unreachable!()
            };
            Ok((0..v[0]).map(|_| e.clone()).collect())
        }
    }

    fn x(v: i64) -> Element {
        Element {
            tensors: vec![Tensor::new("x", vec![], Data::I64(vec![v])).unwrap()],
        }
    }

    #[test]
    fn process_runs_flat_maps_and_checks_contracts() {
        let info = Halve::info();
        let mut p = Halve;
        let out = process(
            &mut p,
            &info,
            &encode_batch(&[x(2), x(0), x(1)]),
            &[1, 2, 3],
        )
        .unwrap();
        let parents: Vec<u32> = decode_batch(&out)
            .unwrap()
            .iter()
            .map(|e| e.parent)
            .collect();
        assert_eq!(parents, vec![0, 0, 2]);
        let bad = Element {
            tensors: vec![Tensor::new("x", vec![1], Data::I64(vec![1])).unwrap()],
        };
        let err = process(&mut p, &info, &encode_batch(&[x(1), bad]), &[1, 2]).unwrap_err();
        assert_eq!(err.status(), crate::abi::status::INVALID_INPUT);
        assert!(
            err.to_string()
                .contains("element 1: feature \"x\" has rank 1"),
            "{err}"
        );
        let err = process(&mut p, &info, &encode_batch(&[x(1)]), &[]).unwrap_err();
        assert!(err.to_string().contains("1 elements but 0 seeds"), "{err}");
    }
}
