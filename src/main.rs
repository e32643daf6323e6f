#![allow(clippy::print_stderr)] // the last word to a person: the error that ended the command

use std::process::ExitCode;

fn main() -> ExitCode {
    match toolgate::cli::run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
