//! The plugins' declared contracts: the features a plugin declares as inputs (checked on
//! every element before a call) and as outputs (checked on every element it gives back).

use sluice_core::{Element, Value};

use crate::wire::sdk_dtype;

/// Checks a declared feature against an element: `Err` says what is wrong (a missing or
/// ragged feature, another dtype or rank than declared).
pub fn check_feature(
    f: &sluice_sdk::Feature,
    element: &Element,
) -> std::result::Result<(), String> {
    let t = match element.get(&f.name) {
        Some(Value::Dense(t)) => t,
        Some(Value::Ragged(_)) => {
            return Err(format!(
                "feature {:?} is ragged; plugins take dense tensors",
                f.name
            ));
        }
        None => {
            let names: Vec<&str> = element.iter().map(|(n, _)| n).collect();
            return Err(format!("missing feature {:?} (has {names:?})", f.name));
        }
    };
    if let Some(want) = f.dtype
        && sdk_dtype(t.dtype()) != want
    {
        return Err(format!(
            "feature {:?} is {}, expected {want}",
            f.name,
            sdk_dtype(t.dtype())
        ));
    }
    if let Some(rank) = f.rank
        && t.rank() != usize::from(rank)
    {
        return Err(format!(
            "feature {:?} has rank {} (shape {:?}), expected rank {rank}",
            f.name,
            t.rank(),
            t.shape()
        ));
    }
    Ok(())
}
