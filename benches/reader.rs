//! The whole-call reader and the general reading, at 1 KiB, 64 KiB and
//! 1 MiB: each family's form with one long value, and the shapes an attack
//! used against the reader, through `Executor::prepare` (name empty, the
//! text as the arguments) on a catalogue of 100 tools. Linear work shows as
//! the same nanoseconds per byte at every size.
//!
//! `cargo bench --bench reader`; numbers in docs/benchmarks.md.

// Benchmarks report what they measured and start the processes they measure.
#![allow(clippy::disallowed_methods, clippy::print_stdout, clippy::print_stderr)]
// The support modules are modules of this one binary.
#![allow(unreachable_pub)]

#[path = "support/catalogue.rs"]
mod catalogue;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use toolgate::{exec::Call, telemetry::Observer};

/// One string parameter, long values allowed.
const PARAMETERS: &str = "{type: object, properties: {id: {type: string}}, required: [id]}";

/// The forms: a name, and the text of a call of the tool `tool` whose `id`
/// is `pad`.
fn forms(tool: &str, pad: &str) -> Vec<(&'static str, String)> {
    vec![
        ("json call object", format!(r#"{{"name": "{tool}", "arguments": {{"id": "{pad}"}}}}"#)),
        ("qwen xml", format!("<tool_call><function={tool}><parameter=id>{pad}</parameter></function></tool_call>")),
        ("python", format!("{tool}(id=\"{pad}\")")),
        (
            "dsml (general)",
            format!("<｜DSML｜invoke name=\"{tool}\"><｜DSML｜parameter name=\"id\" string=\"true\">{pad}</｜DSML｜parameter></｜DSML｜invoke>"),
        ),
        ("element (general)", format!("<{tool}><id>{pad}</id></{tool}>")),
        ("bare keys (general)", format!("call:{tool}{{id: \"{pad}\"}}")),
    ]
}

/// `unit` repeated to `size` bytes.
fn repeated(unit: &str, size: usize) -> String {
    unit.repeat(size / unit.len())
}

fn reader(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (app, names) = catalogue::start(&runtime, 100, PARAMETERS, "", Observer::disabled());
    let snapshot = app.snapshot();
    let executor = snapshot.executor();
    let tool = &names[50];
    let mut group = c.benchmark_group("reader");
    group.sample_size(10);
    for size in [1 << 10, 64 << 10, (1 << 20) - 256] {
        let pad = "a".repeat(size - 200);
        let mut texts = forms(tool, &pad);
        texts.push(("attack: braces", format!("x{{}}\"{}", repeated("{", size - 8))));
        texts.push(("attack: elements", repeated("<a>", size)));
        texts.push(("attack: call elements", repeated(&format!("<{tool}><id>"), size)));
        texts.push(("attack: bare keys", repeated(&format!("call:{tool}{{id: "), size)));
        texts.push(("attack: function openers", repeated("<function=", size)));
        texts.push(("attack: invoke openers", repeated(&format!("<invoke name=\"{tool}\">"), size)));
        texts.push(("attack: markers after words", format!("Sure.\n{}", repeated("<tool_call>", size - 8))));
        for (form, text) in texts {
            let call = Call { tool: String::new(), arguments_json: text, ..Call::default() };
            let prepared = executor.prepare(&call);
            let read = matches!(prepared, Ok(Ok(_)));
            group.throughput(Throughput::Bytes(call.arguments_json.len() as u64));
            let id = BenchmarkId::new(format!("{form}{}", if read { "" } else { " (no call)" }), size);
            group.bench_with_input(id, &call, |b, call| b.iter(|| executor.prepare(call)));
        }
    }
    group.finish();
}

criterion_group!(benches, reader);
criterion_main!(benches);
