//! Calls against tools a request declared for itself (the model door): the
//! stages of `Execute` ([`super::prepare`]) over the request's `tools`
//! ([`DeclaredTools`], no catalogue), with nothing run. What the door asks: one tool call
//! as a model emitted it, repaired or not; and the calls a text holds.

use serde_json::Value;

pub(crate) use super::prepare::words;
use super::{prepare, Call, ExecLimits, Repair};
use crate::{
    catalog::{DeclaredTool, DeclaredTools, Tools},
    resolve::AvailableSet,
};

/// The tools of one request, ready to read calls against.
pub(crate) struct Declared {
    tools: DeclaredTools,
    everything: prepare::Inventory,
    limits: ExecLimits,
    /// Every tool of the request: a call may use any of them.
    all: AvailableSet,
}

/// A call the stages made ready: the tool's name as declared, the
/// arguments' JSON text (as emitted when nothing changed them), and what
/// was repaired.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) name: String,
    pub(crate) arguments_json: String,
    pub(crate) repairs: Vec<Repair>,
}

impl Declared {
    /// The request's `tools`, or why they cannot be read against.
    pub(crate) fn new(tools: Vec<DeclaredTool>, limits: ExecLimits) -> Result<Self, String> {
        let tools = DeclaredTools::new(tools)?;
        let everything = prepare::Inventory::of(&tools, &AvailableSet::All, limits.inventory_cap);
        Ok(Self { tools, everything, limits, all: AvailableSet::All })
    }

    /// No tools (a request that declared none).
    pub(crate) fn none() -> Self {
        Self::new(Vec::new(), ExecLimits::default()).expect("no tools always compile")
    }

    /// One call as emitted, through every stage (non-strict); `None` when
    /// it stops at one (the door then leaves it as it was).
    pub(crate) fn prepare(&self, tool: &str, arguments_json: &str) -> Option<Prepared> {
        self.explain(tool, arguments_json).ok()
    }

    /// One call as emitted, through every stage: the call made ready, or
    /// the words `Execute` answers it with (the nearest tools, each bad
    /// value with what is allowed): what a model can act on.
    pub(crate) fn explain(&self, tool: &str, arguments_json: &str) -> Result<Prepared, String> {
        let call = Call { tool: tool.to_owned(), arguments_json: arguments_json.to_owned(), ..Call::default() };
        let cx = self.context(&call);
        match prepare::prepare(&cx) {
            Ok(Ok(ready)) => Ok(Prepared {
                name: self.tools.tool(ready.tool).name.to_owned(),
                arguments_json: ready.arguments_json,
                repairs: ready.repairs,
            }),
            Ok(Err(outcome)) => Err(match outcome.result {
                Err(error) => error.message,
                Ok(_) => "the call could not be made ready".to_owned(),
            }),
            Err(error) => Err(error.to_string()),
        }
    }

    /// Whether text read whole is prose by the words rule: words with no
    /// call where one may begin, or a call with words before or after it
    /// (never asked again, never lifted).
    pub(crate) fn is_prose(&self, text: &str) -> bool {
        let call = Call::default();
        match words::start(text, &self.context(&call)) {
            words::Start::Prose => true,
            _ => prepare::reads_as_words(text, self.limits.arguments),
        }
    }

    /// Whether `name` is a declared tool's name exactly.
    pub(crate) fn declares(&self, name: &str) -> bool {
        self.tools.named(name).is_some()
    }

    /// What an answer's text holds, lifted (the words rule, [`words`]):
    /// calls from its start, or after a preamble (kept as the message's
    /// text); `None` when it is prose, or holds a call that cannot be made
    /// ready (the text is left as it is, never cut to some of its calls).
    pub(crate) fn lift(&self, text: &str) -> Option<Lifted> {
        let call = Call::default();
        match words::start(text, &self.context(&call)) {
            words::Start::Whole(from) => self.calls_in(&text[from..]).map(|calls| Lifted { preamble: None, calls }),
            words::Start::After(words) => {
                self.calls_in(&text[words.end..]).map(|calls| Lifted { preamble: Some(words.end), calls })
            }
            words::Start::Prose => None,
        }
    }

    /// Whether text at the start of an answer could still begin a call
    /// ([`words::could_begin`]).
    pub(crate) fn could_begin(&self, text: &str) -> Option<bool> {
        let call = Call::default();
        words::could_begin(text, &self.context(&call))
    }

    /// The calls of text that begins with them, each prepared, in order,
    /// when the text is nothing but calls and residue and every call is
    /// made ready.
    pub(crate) fn calls_in(&self, text: &str) -> Option<Vec<Prepared>> {
        // One call: the whole text is that call's, as `Execute` reads it.
        if let Some(one) = self.prepare("", text) {
            return Some(vec![one]);
        }
        let call = Call::default();
        let found = prepare::calls_in(&self.context(&call), text)?;
        if found.len() < 2 {
            return None;
        }
        found.iter().map(|(name, arguments)| self.prepare(name, arguments)).collect()
    }

    fn context<'a>(&'a self, call: &'a Call) -> prepare::Context<'a> {
        prepare::Context {
            tools: &self.tools,
            limits: self.limits,
            call,
            strict: false,
            set: &self.all,
            everything: &self.everything,
        }
    }
}

/// The calls an answer's text holds, lifted.
#[derive(Debug)]
pub(crate) struct Lifted {
    /// Where the preamble ends: the text before it stays the message's
    /// text. `None`: the text was nothing but calls and residue.
    pub(crate) preamble: Option<usize>,
    pub(crate) calls: Vec<Prepared>,
}

/// An OpenAI function's name, `parameters` and whether it is strict, for
/// [`DeclaredTool`].
pub(crate) fn declared(name: &str, parameters: Option<&Value>, strict: bool) -> DeclaredTool {
    DeclaredTool { name: name.to_owned(), parameters: parameters.cloned(), strict }
}
