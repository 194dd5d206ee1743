//! The `telestore` binary: a thin shell over `cli::run`.

mod cli;

fn main() {
    std::process::exit(cli::run());
}
