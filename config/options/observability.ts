// Registry options under log.*, metrics.*.
import { unsignedInt, positiveInt, path, url, level, nullable } from '../kinds.js';
import { option } from '../option.js';

/** Logging and metrics of the server. */
export const observabilityOptions = {
  'log.chunkBytes': option(
    positiveInt(), 262144,
    'target uncompressed size of a stored build log chunk; chunks split at line ends so a long line may exceed it',
  ),
  'log.level.default': option(level(), 'info', 'default level'),
  'log.level.cache': option(nullable(level()), null, 'per-component level; null uses log.level.default'),
  'log.level.proto': option(nullable(level()), null, 'per-component level; null uses log.level.default'),
  'log.level.scheduler': option(nullable(level()), null, 'per-component level; null uses log.level.default'),
  'log.level.web': option(nullable(level()), null, 'per-component level; null uses log.level.default'),
  'log.traceDir': option(
    nullable(path()), null,
    'directory receiving every closed stage span as JSON lines, one file per process; null disables',
  ),
  'metrics.cacheFlushIntervalSecs': option(positiveInt(), 10, 'seconds between flushes of cache traffic counters'),
  'metrics.graphConsistencyIntervalSecs': option(
    unsignedInt(), 300,
    'seconds between build graph consistency checks, which also repair the NAR reference counter; 0 disables both',
  ),
  'metrics.instanceIntervalSecs': option(positiveInt(), 30, 'seconds between updates of the instance-wide metric window'),
  'metrics.labelTopn': option(unsignedInt(), 20, 'maximum distinct label values per rollup dimension, by activity'),
  'metrics.otlp.endpoint': option(
    nullable(url(['http', 'https'])), null,
    'OTLP collector endpoint; null disables export',
    { mask: 'urlPassword' },
  ),
  'metrics.otlp.pushIntervalSecs': option(positiveInt(), 30, 'seconds between OTLP pushes'),
  'metrics.retention.rawDays': option(
    unsignedInt(), 14,
    'days to keep raw phase and worker samples and per-minute cache and upstream counters; 0 keeps forever',
  ),
  'metrics.retention.rollupDays': option(
    unsignedInt(), 400,
    'days to keep minute and hour rollups (day and week rollups stay forever); 0 keeps every rollup',
  ),
  'metrics.rollupIntervalSecs': option(positiveInt(), 60, 'seconds between rollup passes'),
  'metrics.tokenFile': option(
    nullable(path()), null,
    'file with the bearer token for scraping GET /metrics; null disables the endpoint',
  ),
  'metrics.workerSampleIntervalSecs': option(positiveInt(), 15, 'seconds between worker metric samples'),
};
