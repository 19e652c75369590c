// The Prometheus series of one server process (docs/metrics.md), in a registry of its own (not
// prom-client's global one: tests run several servers in one process). Code that counts calls the
// methods here; what is read at scrape time (rows in PostgreSQL, connected workers) registers a
// gauge with `scraped`. With metrics off (no metrics.tokenFile) every method returns at once and
// no collector runs, so the hot paths pay one branch.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { BoundedLabel } from './boundedLabel.js';
import { CatchUps } from './catchUps.js';
import { CounterFamily, HistogramFamily, type FamilySnapshot, type PrerenderedFamily } from './prerenderedFamilies.js';

export interface KilnMetricsOptions {
  /** false: nothing is recorded and the registry stays empty */
  enabled: boolean;
  /** metrics.labelTopn: distinct values per unbounded label (caches) before "other" */
  labelTopn: number;
}

/** One labelled value of a gauge read at scrape time. */
export interface Sample<L extends string> {
  labels: Partial<Record<L, string>>;
  value: number;
}

export type NarinfoOutcome = 'hit' | 'miss' | 'upstream';

/** Seconds buckets for requests: a narinfo from memory is well under a millisecond, an upload is seconds. */
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds buckets for builds and waits: seconds to hours. */
/** Seconds buckets for the event bus: a relay within a host is a millisecond, a slow Redis or NOTIFY backlog seconds. */
const BUS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const LONG_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200];

export class KilnMetrics {
  readonly registry = new Registry();
  /** run before each reading (text, snapshot): the serving threads' counts not yet reported */
  readonly beforeReading = new CatchUps();
  private readonly cacheLabel: BoundedLabel;
  // The families that grow with routes and caches render their lines once (prerenderedFamilies.ts).
  private readonly httpDuration: HistogramFamily<'group' | 'method' | 'status'>;
  /**
   * children by group, then method, then status: three lookups of strings the route table and
   * the server already hold (interned, hashed once) and a number, so a request builds no key
   */
  private readonly httpChildren = new Map<string, Map<string, Map<number, { observe(value: number): void }>>>();
  private readonly narinfo: CounterFamily<'cache' | 'outcome'>;
  /** each cache's three outcome children, bound at its first answer */
  private readonly narinfoChildren = new Map<string, Record<NarinfoOutcome, { inc(by?: number): void }>>();
  private readonly narServed: CounterFamily<'cache'>;
  private readonly narServedChildren = new Map<string, { inc(by?: number): void }>();
  private readonly narIngested: CounterFamily<'cache'>;
  private readonly families: PrerenderedFamily[];
  private readonly uploadBusy: Counter;
  private readonly restarts: Counter<'kind'>;
  private readonly deliveries: Counter<'outcome'>;
  private readonly buildDuration: Histogram<'status'>;
  private readonly dispatchLatency: Histogram<'kind'>;
  private readonly collectFailures: Counter<'series'>;
  private readonly busLag: Histogram;

  constructor(readonly options: KilnMetricsOptions) {
    const registers = [this.registry];
    this.cacheLabel = new BoundedLabel(options.labelTopn);
    this.httpDuration = new HistogramFamily('kiln_http_request_duration_seconds', 'HTTP requests answered, by route group, method and status: time from the request to the end of the answer',
      ['group', 'method', 'status'], REQUEST_BUCKETS);
    this.narinfo = new CounterFamily('kiln_cache_narinfo_requests_total', 'narinfo requests answered per cache: hit (stored), upstream (from an upstream cache), miss (404)', ['cache', 'outcome']);
    this.narServed = new CounterFamily('kiln_cache_nar_served_bytes_total', 'NAR file bytes sent per cache (GET, not HEAD)', ['cache']);
    this.narIngested = new CounterFamily('kiln_cache_nar_ingested_bytes_total', 'NAR file bytes stored per cache by every ingest path (REST, nix copy, workers, direct builds)', ['cache']);
    this.families = [this.httpDuration, this.narinfo, this.narServed, this.narIngested];
    this.uploadBusy = new Counter({ name: 'kiln_upload_busy_total', help: 'REST uploads answered 503 upload_busy: no upload permit within upload.restWaitSecs', registers });
    this.restarts = new Counter({ name: 'kiln_supervisor_restarts_total', help: 'actors restarted by their supervisor, by actor kind', labelNames: ['kind'], registers });
    this.deliveries = new Counter({ name: 'kiln_webhook_deliveries_total', help: 'webhook delivery attempts by outcome', labelNames: ['outcome'], registers });
    this.buildDuration = new Histogram({ name: 'kiln_build_duration_seconds', help: 'builds that ended on a worker, from dispatch to result, by status', labelNames: ['status'], buckets: LONG_BUCKETS, registers });
    this.dispatchLatency = new Histogram({ name: 'kiln_dispatch_latency_seconds', help: 'time a job waited in the queue before a worker took it, by job kind', labelNames: ['kind'], buckets: LONG_BUCKETS, registers });
    this.collectFailures = new Counter({ name: 'kiln_metrics_collect_failures_total', help: 'scrape-time series that could not be read (the scrape answers without them)', labelNames: ['series'], registers });
    this.busLag = new Histogram({ name: 'kiln_event_bus_lag_seconds', help: 'events relayed from another server process: time from its send to this process\'s receipt (by the two hosts\' clocks)', buckets: BUS_BUCKETS, registers });
    if (options.enabled) collectDefaultMetrics({ register: this.registry, prefix: 'kiln_' });
  }

  get enabled(): boolean {
    return this.options.enabled;
  }

  /** An HTTP answer: `group` from the route table (a bounded set), `status` the answer's. */
  httpRequest(group: string, method: string, status: number, seconds: number): void {
    if (!this.options.enabled) return;
    let byMethod = this.httpChildren.get(group);
    if (byMethod === undefined) this.httpChildren.set(group, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
    let child = byStatus.get(status);
    if (child === undefined) byStatus.set(status, (child = this.httpDuration.child(group, method, String(status))));
    child.observe(seconds);
  }

  /** `count` narinfo answers (a serving thread reports its own in batches). */
  narinfoAnswered(cache: string, outcome: NarinfoOutcome, count = 1): void {
    if (!this.options.enabled) return;
    let children = this.narinfoChildren.get(cache);
    if (children === undefined) {
      const label = this.cacheLabel.value(cache);
      children = { hit: this.narinfo.child(label, 'hit'), miss: this.narinfo.child(label, 'miss'), upstream: this.narinfo.child(label, 'upstream') };
      this.narinfoChildren.set(cache, children);
    }
    children[outcome].inc(count);
  }

  narBytesServed(cache: string, bytes: number): void {
    if (!this.options.enabled) return;
    let child = this.narServedChildren.get(cache);
    if (child === undefined) this.narServedChildren.set(cache, (child = this.narServed.child(this.cacheLabel.value(cache))));
    child.inc(bytes);
  }

  narBytesIngested(cache: string, bytes: number): void {
    if (this.options.enabled) this.narIngested.child(this.cacheLabel.value(cache)).inc(bytes);
  }

  uploadRefusedBusy(): void {
    if (this.options.enabled) this.uploadBusy.inc();
  }

  supervisorRestart(kind: string, times = 1): void {
    if (this.options.enabled) this.restarts.inc({ kind }, times);
  }

  webhookDelivery(outcome: string): void {
    if (this.options.enabled) this.deliveries.inc({ outcome });
  }

  buildEnded(status: string, seconds: number): void {
    if (this.options.enabled) this.buildDuration.observe({ status }, seconds);
  }

  jobDispatched(kind: 'build' | 'evaluation', waitedSeconds: number): void {
    if (this.options.enabled) this.dispatchLatency.observe({ kind }, waitedSeconds);
  }

  eventBusLag(seconds: number): void {
    if (this.options.enabled) this.busLag.observe(seconds);
  }

  /** A cache name as a label value: itself or "other" (metrics.labelTopn). */
  cacheLabelValue(cache: string): string {
    return this.cacheLabel.value(cache);
  }

  /**
   * A gauge (or, for a name ending in _total, a counter) read at scrape time. A read that fails leaves the gauge out of that scrape and counts
   * kiln_metrics_collect_failures_total: a database that does not answer must not fail the scrape.
   */
  scraped<L extends string>(name: string, help: string, labelNames: readonly L[], read: () => Promise<readonly Sample<L>[]> | readonly Sample<L>[]): void {
    if (!this.options.enabled) return;
    const failures = this.collectFailures;
    const samples = async (): Promise<readonly Sample<L>[]> => {
      try {
        return await read();
      } catch {
        failures.inc({ series: name });
        return [];
      }
    };
    // A name ending in _total is a counter kept elsewhere (say, the hot cache's lookups), exposed as one.
    if (name.endsWith('_total')) {
      new Counter<L>({
        name, help, labelNames, registers: [this.registry],
        async collect() {
          const read = await samples();
          this.reset();
          for (const s of read) this.inc(s.labels, s.value);
        },
      });
      return;
    }
    new Gauge<L>({
      name, help, labelNames, registers: [this.registry],
      async collect() {
        const read = await samples();
        this.reset();
        for (const s of read) this.set(s.labels, s.value);
      },
    });
  }

  /** The exposition text of every series: prom-client's registry, then the prerendered families. */
  async text(): Promise<string> {
    await this.beforeReading.run();
    const registered = await this.registry.metrics();
    return `${registered}\n${this.families.map((f) => f.render()).join('\n')}`;
  }

  /** Every series as data (the OTLP export reads this). */
  async snapshot(): Promise<FamilySnapshot[]> {
    await this.beforeReading.run();
    const registered = await this.registry.getMetricsAsJSON();
    return [
      ...registered.map((m) => ({ name: m.name, help: m.help, type: String(m.type) as FamilySnapshot['type'], values: m.values.map((v) => ({ ...('metricName' in v && typeof v.metricName === 'string' ? { metricName: v.metricName } : {}), labels: { ...v.labels } as Record<string, string | number>, value: v.value })) })),
      ...this.families.map((f) => f.get()),
    ];
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
