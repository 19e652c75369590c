// OTLP push (issue 21 item 3, docs/metrics.md "OTLP"): with metrics.otlp.endpoint set, the same
// series as the scrape are pushed every metrics.otlp.pushIntervalSecs by @opentelemetry/sdk-metrics'
// periodic reader and the OTLP/HTTP protobuf exporter. kiln's series live in its prom-client
// registry, so they reach the SDK as a MetricProducer that converts a snapshot (counters as
// cumulative monotonic sums, gauges, histograms with their buckets). The destination is checked
// against outbound.allowedNetworks before every push; a refused or unreachable collector costs a
// warning per interval and nothing else.
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AggregationTemporality, DataPointType, MeterProvider, PeriodicExportingMetricReader,
  type CollectionResult, type DataPoint, type Histogram, type MetricData, type MetricProducer, type PushMetricExporter,
} from '@opentelemetry/sdk-metrics';
import type { Logger } from '../../config/index.js';
import type { KilnMetrics, OutboundClient } from '../../storage/index.js';

type HrTime = [number, number];
type ExportCallback = Parameters<PushMetricExporter['export']>[1];
type Attributes = Record<string, string>;

const hrTime = (ms: number): HrTime => [Math.floor(ms / 1000), Math.round((ms % 1000) * 1e6)];

/** The OTLP/HTTP metrics URL of an endpoint: as given when it names /v1/metrics, else with it appended (as OTEL_EXPORTER_OTLP_ENDPOINT). */
export function otlpMetricsUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (!url.pathname.endsWith('/v1/metrics')) url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/metrics`;
  return url.toString();
}

const attributesOf = (labels: Record<string, string | number>, without?: string): Attributes => {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(labels)) if (k !== without) out[k] = String(v);
  return out;
};
const keyOf = (attributes: Attributes): string => JSON.stringify(Object.entries(attributes).sort());

/** kiln's registry as OTLP metric data: one conversion per push. */
export function kilnMetricProducer(metrics: Pick<KilnMetrics, 'snapshot'>, startedAt: number, now: () => number = Date.now): MetricProducer {
  return {
    async collect(): Promise<CollectionResult> {
      const startTime = hrTime(startedAt);
      const endTime = hrTime(now());
      const data: MetricData[] = [];
      for (const family of await metrics.snapshot()) {
        const descriptor = { name: family.name, description: family.help, unit: family.name.endsWith('_seconds') ? 's' : family.name.endsWith('_bytes') ? 'By' : '', valueType: 1 };
        if (family.type === 'counter' || family.type === 'gauge') {
          const dataPoints: DataPoint<number>[] = family.values.map((v) => ({ startTime, endTime, attributes: attributesOf(v.labels), value: v.value }));
          data.push(family.type === 'counter'
            ? { descriptor, aggregationTemporality: AggregationTemporality.CUMULATIVE, dataPointType: DataPointType.SUM, isMonotonic: true, dataPoints }
            : { descriptor, aggregationTemporality: AggregationTemporality.CUMULATIVE, dataPointType: DataPointType.GAUGE, dataPoints });
        } else if (family.type === 'histogram') {
          // Prometheus buckets are cumulative with an le label; OTLP wants per-bucket counts and the bounds apart.
          const series = new Map<string, { attributes: Attributes; bounds: number[]; cumulative: number[]; sum: number; count: number }>();
          for (const v of family.values) {
            const attributes = attributesOf(v.labels, 'le');
            const key = keyOf(attributes);
            let s = series.get(key);
            if (s === undefined) {
              s = { attributes, bounds: [], cumulative: [], sum: 0, count: 0 };
              series.set(key, s);
            }
            if (v.metricName?.endsWith('_bucket')) {
              const le = v.labels['le'];
              if (le !== '+Inf') s.bounds.push(Number(le));
              s.cumulative.push(v.value);
            } else if (v.metricName?.endsWith('_sum')) s.sum = v.value;
            else if (v.metricName?.endsWith('_count')) s.count = v.value;
          }
          const dataPoints: DataPoint<Histogram>[] = [...series.values()].map((s) => ({
            startTime, endTime, attributes: s.attributes,
            value: { buckets: { boundaries: s.bounds, counts: s.cumulative.map((c, i) => c - (i === 0 ? 0 : s.cumulative[i - 1]!)) }, sum: s.sum, count: s.count },
          }));
          data.push({ descriptor, aggregationTemporality: AggregationTemporality.CUMULATIVE, dataPointType: DataPointType.HISTOGRAM, dataPoints });
        }
      }
      return {
        // The reader keeps its MeterProvider's resource and takes only the scope metrics from here.
        resourceMetrics: { resource: resourceFromAttributes({}), scopeMetrics: [{ scope: { name: 'kiln' }, metrics: data }] },
        errors: [],
      };
    },
  };
}

export interface OtlpPushOptions {
  endpoint: string;
  intervalSecs: number;
  metrics: Pick<KilnMetrics, 'snapshot'>;
  outbound: Pick<OutboundClient, 'refusalOf'>;
  log: Logger;
  version: string;
}

export interface OtlpPush {
  /** pushes now (tests; the timer pushes every interval) */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

export function startOtlpPush(opts: OtlpPushOptions): OtlpPush {
  const url = otlpMetricsUrl(opts.endpoint);
  const intervalMs = opts.intervalSecs * 1000;
  const otlp = new OTLPMetricExporter({ url, timeoutMillis: Math.min(10_000, intervalMs) });
  const warn = (reason: string) => opts.log.warn({ endpoint: url, reason }, 'the OTLP push failed; the next is in metrics.otlp.pushIntervalSecs');
  const exporter: PushMetricExporter = {
    export(data, done: ExportCallback) {
      opts.outbound.refusalOf(url).then((refusal) => {
        if (refusal !== null) {
          warn(`outbound.allowedNetworks: ${refusal}`);
          done({ code: 1, error: new Error(refusal) });
          return;
        }
        otlp.export(data, (result) => {
          if (result.code !== 0) warn(result.error?.message ?? 'the collector did not accept the push');
          done(result);
        });
      }, (err: unknown) => {
        warn(String(err));
        done({ code: 1, error: err instanceof Error ? err : new Error(String(err)) });
      });
    },
    forceFlush: () => otlp.forceFlush(),
    shutdown: () => otlp.shutdown(),
  };
  const reader = new PeriodicExportingMetricReader({
    exporter, exportIntervalMillis: intervalMs, exportTimeoutMillis: Math.min(30_000, intervalMs),
    metricProducers: [kilnMetricProducer(opts.metrics, Date.now())],
  });
  const provider = new MeterProvider({ resource: resourceFromAttributes({ 'service.name': 'kiln', 'service.version': opts.version }), readers: [reader] });
  return {
    flush: () => reader.forceFlush(),
    async stop() {
      // A collector that is down must not hold the process: the shutdown's last push is best effort.
      await provider.shutdown({ timeoutMillis: 2000 }).catch(() => undefined);
    },
  };
}
