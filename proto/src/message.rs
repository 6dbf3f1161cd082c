//! Decoding records into messages and the canonical protobuf JSON mapping.

use prost::{Message, Name};
use serde::{Serialize, de::DeserializeOwned};

use crate::error::{Error, Result};
use crate::example::{Example, SequenceExample};
use crate::tfrecord::Record;

/// A message of the `tensorflow` package that Sluice reads from TFRecord files:
/// [`Example`] or [`SequenceExample`].
///
/// Besides the binary protobuf encoding (prost), each has the canonical protobuf JSON
/// mapping exactly as Python's `json_format.MessageToJson` writes it: lowerCamelCase field
/// names, int64 values as strings, bytes as base64, floats as numbers (`"NaN"`,
/// `"Infinity"`, `"-Infinity"` as strings), empty fields omitted. Both directions accept
/// what the other produces.
///
/// ```
/// use sluice_proto::{Example, TfMessage};
///
/// let json = r#"{"features":{"feature":{"label":{"int64List":{"value":["7"]}}}}}"#;
/// let example = Example::from_json(json)?;
/// assert_eq!(example.to_json(), json);
/// let bytes = example.to_bytes();
/// assert_eq!(Example::from_bytes(&bytes)?, example);
/// # Ok::<(), sluice_proto::Error>(())
/// ```
pub trait TfMessage: Message + Name + Default + Serialize + DeserializeOwned + Sized {
    /// Decodes the binary protobuf encoding.
    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Self::decode(bytes).map_err(|error| Error::Decode {
            file: "<bytes>".to_string(),
            index: 0,
            offset: 0,
            message: Self::full_name_static(),
            error,
        })
    }

    /// Decodes a record read from a TFRecord file; errors name the file, record and offset.
    fn from_record(file: &str, record: &Record) -> Result<Self> {
        Self::decode(record.data.clone()).map_err(|error| Error::Decode {
            file: file.to_string(),
            index: record.index,
            offset: record.offset,
            message: Self::full_name_static(),
            error,
        })
    }

    /// The binary protobuf encoding.
    fn to_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// The canonical protobuf JSON, on one line.
    fn to_json(&self) -> String {
        serde_json::to_string(self).expect("protobuf messages always serialize to JSON")
    }

    /// The canonical protobuf JSON as a [`serde_json::Value`].
    fn to_json_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("protobuf messages always serialize to JSON")
    }

    /// Parses the canonical protobuf JSON (as written by `MessageToJson`; snake_case field
    /// names are accepted too).
    fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|error| Error::Json {
            message: Self::full_name_static(),
            error,
        })
    }

    /// Parses the canonical protobuf JSON from a [`serde_json::Value`].
    fn from_json_value(value: serde_json::Value) -> Result<Self> {
        serde_json::from_value(value).map_err(|error| Error::Json {
            message: Self::full_name_static(),
            error,
        })
    }

    /// `tensorflow.Example` or `tensorflow.SequenceExample`.
    fn full_name_static() -> &'static str;
}

impl TfMessage for Example {
    fn full_name_static() -> &'static str {
        "tensorflow.Example"
    }
}

impl TfMessage for SequenceExample {
    fn full_name_static() -> &'static str {
        "tensorflow.SequenceExample"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::example::{Feature, FloatList, Int64List, feature::Kind};

    fn example(kind: Kind) -> Example {
        let mut features = crate::example::Features::default();
        features
            .feature
            .insert("f".into(), Feature { kind: Some(kind) });
        Example {
            features: Some(features),
        }
    }

    #[test]
    fn int64_is_a_string_and_bytes_are_base64() {
        let e = example(Kind::Int64List(Int64List {
            value: vec![i64::MIN, 0, i64::MAX],
        }));
        assert_eq!(
            e.to_json(),
            r#"{"features":{"feature":{"f":{"int64List":{"value":["-9223372036854775808","0","9223372036854775807"]}}}}}"#
        );
        let b = example(Kind::BytesList(crate::example::BytesList {
            value: vec![bytes::Bytes::from_static(b"hi\x00")],
        }));
        assert_eq!(
            b.to_json(),
            r#"{"features":{"feature":{"f":{"bytesList":{"value":["aGkA"]}}}}}"#
        );
    }

    #[test]
    fn floats_are_shortest_f32_numbers_and_specials_are_strings() {
        let e = example(Kind::FloatList(FloatList {
            value: vec![
                0.330_437_06,
                1.0,
                f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
            ],
        }));
        assert_eq!(
            e.to_json(),
            r#"{"features":{"feature":{"f":{"floatList":{"value":[0.33043706,1.0,"NaN","Infinity","-Infinity"]}}}}}"#
        );
        let back = Example::from_json(&e.to_json()).unwrap();
        assert_eq!(back.to_json(), e.to_json());
    }

    #[test]
    fn empty_list_is_an_empty_object() {
        let e = example(Kind::FloatList(FloatList { value: vec![] }));
        assert_eq!(
            e.to_json(),
            r#"{"features":{"feature":{"f":{"floatList":{}}}}}"#
        );
    }

    #[test]
    fn bad_bytes_and_bad_json_are_typed_errors() {
        let err = Example::from_bytes(&[0xff, 0xff, 0xff]).unwrap_err();
        assert!(matches!(
            err,
            Error::Decode {
                message: "tensorflow.Example",
                ..
            }
        ));
        let err = SequenceExample::from_json(r#"{"context": 3}"#).unwrap_err();
        assert!(matches!(
            err,
            Error::Json {
                message: "tensorflow.SequenceExample",
                ..
            }
        ));
    }
}
