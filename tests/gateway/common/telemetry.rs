//! Telemetry captured in memory: the gateway's real tracer and metrics
//! instruments, with in-memory exporters.

use std::collections::BTreeMap;

use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::{
    metrics::{
        data::{AggregatedMetrics, MetricData},
        InMemoryMetricExporter, SdkMeterProvider,
    },
    trace::{InMemorySpanExporter, Sampler, SpanData, SpanLimits},
    Resource,
};
use toolgate::telemetry::{Batching, Metrics, Observer, Tracer};

/// Spans and metrics of a gateway started with the observer of [`Recorded::start`].
pub struct Recorded {
    spans: InMemorySpanExporter,
    metrics: InMemoryMetricExporter,
    tracer: Tracer,
    meter: SdkMeterProvider,
}

/// One metric data point: its name, attributes and value (a sum's value, a
/// histogram's count).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub name: String,
    pub attributes: BTreeMap<String, String>,
    pub value: f64,
}

impl Recorded {
    pub fn start(record_content: bool) -> (Self, Observer) {
        let spans = InMemorySpanExporter::default();
        let resource = Resource::builder().build();
        let limits = SpanLimits::default();
        let tracer = Tracer::new(Box::new(Sampler::AlwaysOn), limits, spans.clone(), &resource, Batching::default());
        let metrics = InMemoryMetricExporter::default();
        let meter = SdkMeterProvider::builder().with_periodic_exporter(metrics.clone()).build();
        let observer = Observer {
            metrics: Metrics::new(&meter.meter("toolgate")),
            tracer: Some(tracer.clone()),
            record_content,
            scrape: None,
        };
        (Self { spans, metrics, tracer, meter }, observer)
    }

    pub fn spans(&self) -> Vec<SpanData> {
        self.tracer.force_flush();
        self.spans.get_finished_spans().unwrap()
    }

    pub fn points(&self) -> Vec<Point> {
        let _ = self.meter.force_flush();
        let mut points = Vec::new();
        let exported = self.metrics.get_finished_metrics().unwrap();
        // Cumulative: the last export holds everything.
        let Some(last) = exported.last() else { return points };
        for scope in last.scope_metrics() {
            for metric in scope.metrics() {
                let name = metric.name().to_owned();
                let attrs = |kv: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| -> BTreeMap<String, String> {
                    kv.map(|kv| (kv.key.to_string(), kv.value.to_string())).collect()
                };
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            points.push(Point {
                                name: name.clone(),
                                attributes: attrs(&mut p.attributes()),
                                value: p.value() as f64,
                            });
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(histogram)) => {
                        for p in histogram.data_points() {
                            points.push(Point {
                                name: name.clone(),
                                attributes: attrs(&mut p.attributes()),
                                value: p.count() as f64,
                            });
                        }
                    }
                    other => panic!("unexpected metric data for {name}: {other:?}"),
                }
            }
        }
        points
    }
}

/// An attribute of a span, as text.
pub fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.to_string())
}

/// The events of a span: name and attributes.
pub fn events(span: &SpanData) -> Vec<(String, BTreeMap<String, String>)> {
    span.events
        .iter()
        .map(|e| {
            let attributes = e.attributes.iter().map(|kv| (kv.key.to_string(), kv.value.to_string())).collect();
            (e.name.to_string(), attributes)
        })
        .collect()
}
