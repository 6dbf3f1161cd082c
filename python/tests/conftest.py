"""Shared fixtures: the TensorFlow-written TFRecord fixtures of the repository, and the
example native plugin (built with cargo when it is not there yet)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "tfrecord"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def manifest() -> dict:
    return json.loads((FIXTURES / "MANIFEST.json").read_text())


def target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))


@pytest.fixture(scope="session")
def noise_plugin() -> Path:
    """The example `gaussian_noise` native plugin (examples/plugins/noise)."""
    for profile in ("debug", "release"):
        path = target_dir() / profile / "libsluice_example_noise.so"
        if path.exists():
            return path
    subprocess.run(
        ["cargo", "build", "-p", "sluice-example-noise"], cwd=REPO, check=True
    )
    return target_dir() / "debug" / "libsluice_example_noise.so"


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`code` in a new interpreter (this one's), from the repository root."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def solarize_wasm() -> Path:
    """The example `gray_solarize` plugin (examples/plugins/solarize) built for wasm32 as
    sluice-guest-build builds it for the Rust tests (same flags and target directory, so
    the build is shared)."""
    out = REPO / "target" / "wasm-guests"
    env = {k: v for k, v in os.environ.items() if k not in (
        "CARGO_TARGET_DIR", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET", "RUSTC_WORKSPACE_WRAPPER")}
    env["CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS"] = "-C target-feature=+simd128"
    env["CARGO_PROFILE_RELEASE_DEBUG"] = "false"
    subprocess.run(
        ["cargo", "build", "--release", "--target", "wasm32-unknown-unknown",
         "-p", "sluice-example-solarize", "--target-dir", str(out)],
        cwd=REPO, check=True, env=env,
    )
    return out / "wasm32-unknown-unknown" / "release" / "sluice_example_solarize.wasm"


@pytest.fixture(scope="session")
def solarize_component() -> Path:
    """The same `gray_solarize` as a WebAssembly component (the map-transform world,
    examples/plugins/solarize-component), built and encoded by sluice-guest-build."""
    env = {k: v for k, v in os.environ.items() if k not in (
        "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET", "RUSTC_WORKSPACE_WRAPPER")}
    # The example the workspace's tests built (`cargo test --workspace` runs first in
    # .ci/run, which then keeps only what these tests use of target/debug), else built now.
    built = target_dir() / "debug" / "examples" / "build_component"
    command = [str(built)] if built.exists() else [
        "cargo", "run", "-q", "-p", "sluice-guest-build", "--example", "build_component", "--"]
    out = subprocess.run(
        [*command, "sluice-example-solarize-component"],
        cwd=REPO, check=True, env=env, capture_output=True, text=True,
    )
    return Path(out.stdout.strip())


@pytest.fixture(scope="session")
def python_solarize() -> Path:
    """`gray_solarize` written in Python (examples/plugins/python-solarize), built into a
    component by `sluice plugin build` with componentize-py (on PATH: .ci/run installs it);
    the command prints the component's path on its last line."""
    env = {k: v for k, v in os.environ.items() if k not in (
        "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET", "RUSTC_WORKSPACE_WRAPPER")}
    # The CLI the workspace's tests built (`cargo test --workspace` runs first in .ci/run),
    # else built now.
    built = target_dir() / "debug" / "sluice"
    command = [str(built)] if built.exists() else ["cargo", "run", "-q", "-p", "sluice-cli", "--"]
    out = subprocess.run(
        [*command, "plugin", "build", "examples/plugins/python-solarize"],
        cwd=REPO, env=env, capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip().splitlines()[-1])
