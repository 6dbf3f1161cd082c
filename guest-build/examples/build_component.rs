//! Builds a component guest crate of the workspace and prints the component's path: what
//! the Python tests use to get `sluice-example-solarize-component`.
//!
//! ```sh
//! cargo run -q -p sluice-guest-build --example build_component -- sluice-example-solarize-component
//! ```

fn main() -> std::process::ExitCode {
    let Some(package) = std::env::args().nth(1) else {
        eprintln!("usage: build_component PACKAGE");
        return std::process::ExitCode::FAILURE;
    };
    let workspace = sluice_guest_build::workspace_dir();
    match sluice_guest_build::build_component(&workspace, &package) {
        Ok(path) => {
            println!("{}", path.display());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}
