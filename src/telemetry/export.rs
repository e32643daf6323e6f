//! OTLP exporters that never disturb the gateway: spans leave through a
//! bounded batch queue (dropped when full), metrics periodically; a failed
//! export is one warning a minute at most, not one per batch.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use opentelemetry_sdk::{
    error::OTelSdkResult,
    metrics::{data::ResourceMetrics, exporter::PushMetricExporter, SdkMeterProvider, Temporality},
    Resource,
};

use super::{
    otlp::{self, OtlpSpans, Settings},
    tracer::{Batch, Batching, Exporter, Tracer},
};
use crate::env::Env;

/// At most one warning per this long.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Remembers when it last warned.
#[derive(Debug, Default)]
struct Warnings {
    last: Mutex<Option<Instant>>,
}

impl Warnings {
    fn failed(&self, what: &str, error: &dyn std::fmt::Display) {
        let mut last = self.last.lock().expect("not poisoned");
        if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            tracing::warn!("{what} could not be exported ({error}); dropping telemetry until the collector answers");
        }
    }
}

#[derive(Debug)]
struct QuietSpans {
    inner: OtlpSpans,
    warnings: Warnings,
}

impl Exporter for QuietSpans {
    async fn export(&self, batch: Batch) -> OTelSdkResult {
        let result = match batch {
            Batch::Written(spans) => self.inner.export_written(spans).await,
            Batch::Data(_) => unreachable!("the OTLP tracer writes its spans where they end"),
        };
        if let Err(error) = &result {
            self.warnings.failed("spans", error);
        }
        result
    }

    /// Nothing to close: each export waits for its answer.
    fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
        Ok(())
    }
}

struct QuietMetrics {
    inner: opentelemetry_otlp::MetricExporter,
    warnings: Warnings,
}

impl PushMetricExporter for QuietMetrics {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        if let Err(error) = &result {
            self.warnings.failed("metrics", error);
        }
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

pub(crate) fn tracer(env: &Env, resource: &Resource) -> Option<Tracer> {
    let mut exporter = match Settings::from_env(env).and_then(|settings| OtlpSpans::new(&settings)) {
        Ok(exporter) => exporter,
        Err(err) => {
            tracing::warn!("traces will not be exported: {err}");
            return None;
        }
    };
    exporter.set_resource(resource);
    let exporter = QuietSpans { inner: exporter, warnings: Warnings::default() };
    let (sampler, limits) = Tracer::configured_by_env();
    Some(Tracer::writing(sampler, limits, exporter, otlp::write_span, Batching::from_env(env)))
}

pub(crate) fn meter_provider(resource: Resource) -> Option<SdkMeterProvider> {
    let exporter = match opentelemetry_otlp::MetricExporter::builder().with_tonic().build() {
        Ok(exporter) => exporter,
        Err(err) => {
            tracing::warn!("metrics will not be exported: {err}");
            return None;
        }
    };
    let exporter = QuietMetrics { inner: exporter, warnings: Warnings::default() };
    Some(SdkMeterProvider::builder().with_resource(resource).with_periodic_exporter(exporter).build())
}
