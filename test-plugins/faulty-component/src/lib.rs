//! `faulty` as a WebAssembly component in the `batch-transform` world: the same misbehaviour
//! on request as the core-ABI build, for the component host's tests.
#![deny(unsafe_code)]

sluice_sdk_component::export_batch!(sluice_test_plugin_faulty::Faulty);
