//! Unit tests of behaviour that spans modules and is checked through items that are not
//! public (integration tests in `core/tests/` use the public API only).

mod global_shuffle_index;
