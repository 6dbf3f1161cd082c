//! TensorBoard's `Event` and `Summary` messages (tensorflow/core/util/event.proto,
//! tensorflow/core/framework/summary.proto): the records of a TensorBoard event file, which
//! is a TFRecord file of `Event`s. Only the fields Sluice writes: the file version, and
//! scalar summaries as `simple_value`.

/// One record of an event file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    /// The step (Sluice: milliseconds since the run started).
    #[prost(int64, tag = "2")]
    pub step: i64,
    /// `brain.Event:2` in the first event of a file.
    #[prost(string, optional, tag = "3")]
    pub file_version: Option<String>,
    /// Scalars.
    #[prost(message, optional, tag = "5")]
    pub summary: Option<Summary>,
}

/// A set of summary values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Summary {
    /// The values.
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// One tagged value of a [`Summary`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct SummaryValue {
    /// The tag TensorBoard groups and plots by (`throughput/elements_per_s`).
    #[prost(string, tag = "1")]
    pub tag: String,
    /// A scalar.
    #[prost(float, optional, tag = "2")]
    pub simple_value: Option<f32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn a_scalar_event_encodes_as_tensorflow_does() {
        let e = Event {
            wall_time: 1.5,
            step: 3,
            file_version: None,
            summary: Some(Summary {
                value: vec![SummaryValue {
                    tag: "a".into(),
                    simple_value: Some(2.0),
                }],
            }),
        };
        let bytes = e.encode_to_vec();
        // wall_time (1, fixed64), step (2, varint), summary (5, length-delimited) with a
        // value (1, 8 bytes) holding tag (1) "a" and simple_value (2, fixed32) 2.0.
        let mut want = vec![0x09];
        want.extend(1.5f64.to_le_bytes());
        want.extend([0x10, 3, 0x2a, 10, 0x0a, 8, 0x0a, 1, b'a', 0x15]);
        want.extend(2.0f32.to_le_bytes());
        assert_eq!(bytes, want);
        assert_eq!(Event::decode(&bytes[..]).unwrap(), e);
    }
}
