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
